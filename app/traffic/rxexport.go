package traffic

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/peregrine-net/peregrine/core/hist"
)

// IntervalRecord is one closed interval's latency histogram as exported:
// its number, when it ended (seconds since the start) and its non-empty
// buckets, nanoseconds.
type IntervalRecord struct {
	Interval uint64        `json:"interval"`
	End      float64       `json:"end_s"`
	Count    uint64        `json:"count"`
	Min      uint64        `json:"min_ns"`
	P50      uint64        `json:"p50_ns"`
	P99      uint64        `json:"p99_ns"`
	P999     uint64        `json:"p99_9_ns"`
	Max      uint64        `json:"max_ns"`
	Buckets  []hist.Bucket `json:"buckets"`
}

// NewIntervalRecord summarises h.
func NewIntervalRecord(interval uint64, end float64, h *hist.HDR) IntervalRecord {
	r := IntervalRecord{Interval: interval, End: end, Count: h.Count(), Min: h.Min(), Max: h.Max(),
		P50: h.Quantile(0.5), P99: h.Quantile(0.99), P999: h.Quantile(0.999), Buckets: []hist.Bucket{}}
	h.Buckets(func(b hist.Bucket) { r.Buckets = append(r.Buckets, b) })
	return r
}

// WriteJSON writes the record as one JSON line.
func (r IntervalRecord) WriteJSON(w io.Writer) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// IntervalCSVHeader is the header of WriteCSV's rows: one row per bucket.
const IntervalCSVHeader = "interval,end_s,lo_ns,hi_ns,count\n"

// WriteCSV writes one row per non-empty bucket.
func (r IntervalRecord) WriteCSV(w io.Writer) error {
	for _, b := range r.Buckets {
		if _, err := fmt.Fprintf(w, "%d,%.3f,%d,%d,%d\n", r.Interval, r.End, b.Lo, b.Hi, b.Count); err != nil {
			return err
		}
	}
	return nil
}

// FlowRecord is one flow's counters as exported.
type FlowRecord struct {
	Flow          int     `json:"flow"`
	SrcPort       int     `json:"src_port"`
	Received      uint64  `json:"received"`
	Lost          uint64  `json:"lost"`
	Duplicates    uint64  `json:"duplicates"`
	Reordered     uint64  `json:"reordered"`
	MaxExtent     uint64  `json:"reordering_extent_max"`
	MeanExtent    float64 `json:"reordering_extent_mean"`
	ExtentUnknown uint64  `json:"reordering_extent_unknown"`
	LatencyMin    uint64  `json:"latency_min_ns"`
	LatencyMean   float64 `json:"latency_mean_ns"`
	LatencyMax    uint64  `json:"latency_max_ns"`
	// The flow's latency quantiles, within 12.5 % (FlowLatency); 0
	// without its histogram.
	LatencyP50  uint64 `json:"latency_p50_ns"`
	LatencyP99  uint64 `json:"latency_p99_ns"`
	LatencyP999 uint64 `json:"latency_p99_9_ns"`
}

// FlowRecords lists the flows that received anything, flow i sent from
// source port srcPort+i; lats, when not nil, are the flows' latency
// histograms (Sink.FlowLatencies).
func FlowRecords(flows []FlowStats, lats []FlowLatency, srcPort int) []FlowRecord {
	var out []FlowRecord
	for i := range flows {
		f := &flows[i]
		if f.Received == 0 && f.Duplicates == 0 {
			continue
		}
		out = append(out, FlowRecord{Flow: i, SrcPort: srcPort + i, Received: f.Received, Lost: f.Lost(), Duplicates: f.Duplicates,
			Reordered: f.Reordered, MaxExtent: f.MaxExtent, MeanExtent: f.MeanExtent(), ExtentUnknown: f.ExtentUnknown,
			LatencyMin: f.LatencyMin, LatencyMean: f.LatencyMean(), LatencyMax: f.LatencyMax})
		if i < len(lats) {
			r := &out[len(out)-1]
			r.LatencyP50, r.LatencyP99, r.LatencyP999 = lats[i].Quantile(0.5), lats[i].Quantile(0.99), lats[i].Quantile(0.999)
		}
	}
	return out
}

// FlowCSVHeader heads WriteFlowsCSV's rows.
const FlowCSVHeader = "flow,src_port,received,lost,duplicates,reordered,reordering_extent_max,reordering_extent_mean,latency_min_ns,latency_mean_ns,latency_max_ns,latency_p50_ns,latency_p99_ns,latency_p99_9_ns\n"

// WriteFlowsCSV writes the header and one row per flow.
func WriteFlowsCSV(w io.Writer, recs []FlowRecord) error {
	if _, err := io.WriteString(w, FlowCSVHeader); err != nil {
		return err
	}
	for _, r := range recs {
		if _, err := fmt.Fprintf(w, "%d,%d,%d,%d,%d,%d,%d,%.2f,%d,%.0f,%d,%d,%d,%d\n", r.Flow, r.SrcPort, r.Received, r.Lost, r.Duplicates,
			r.Reordered, r.MaxExtent, r.MeanExtent, r.LatencyMin, r.LatencyMean, r.LatencyMax, r.LatencyP50, r.LatencyP99, r.LatencyP999); err != nil {
			return err
		}
	}
	return nil
}
