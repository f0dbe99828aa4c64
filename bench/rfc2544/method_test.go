package rfc2544

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/clock"
)

// TestRunMeasuresAKnownDUT runs every measurement against a simulated DUT
// whose answers are known: NDR at its capacity, loss (R−C)/R above it, a
// back-to-back burst of Buffer/(1−C/R), latency growing with load; then
// renders the report.
func TestRunMeasuresAKnownDUT(t *testing.T) {
	vc := clock.NewVirtual(0)
	const capacity, maxRate, buffer = 1e6, 2e6, 5000
	dut, err := NewSimulated(SimulatedOptions{Capacity: capacity, Buffer: buffer, Seed: 1, Clock: vc})
	require.NoError(t, err)
	var lines []string
	res, err := Run(context.Background(), dut, "sim", Options{
		Search:  SearchOptions{MaxRate: maxRate, Duration: 100 * time.Millisecond},
		Sizes:   []FrameSize{64, IMIX},
		Repeats: 3, Clock: vc, Progress: func(s string) { lines = append(lines, s) },
	})
	require.NoError(t, err)
	require.Len(t, res.Sizes, 2)
	s := res.Size(64)
	require.Len(t, s.Searches, 3)
	require.Len(t, res.Size(IMIX).Searches, 1)
	// The buffer absorbs Buffer frames of excess per trial: a rate up to
	// C + Buffer/duration loses nothing (as a real DUT's queues do).
	const dur = 0.1
	require.GreaterOrEqual(t, s.NDR, capacity*(1-DefaultWidth))
	require.LessOrEqual(t, s.NDR, capacity+buffer/dur)
	require.GreaterOrEqual(t, s.PDR, s.NDR)
	require.LessOrEqual(t, s.Repeatability, 1+DefaultWidth)
	require.Len(t, s.Latency, 4)
	for i := 1; i < len(s.Latency); i++ {
		require.GreaterOrEqual(t, s.Latency[i].P99, s.Latency[i-1].P99, "latency grows with load")
	}
	require.Len(t, s.FrameLoss, 10)
	require.Zero(t, s.FrameLoss[4].Loss, "50 %% of 2 Mfps is the capacity")
	require.InDelta(t, 1-(buffer+capacity*dur)/(maxRate*dur), s.FrameLoss[9].Loss, 1e-4, "at 2 Mfps what neither the DUT nor its buffer takes is lost")
	want := buffer / (1 - capacity/maxRate)
	require.InEpsilon(t, want, s.BackToBack.Mean, DefaultWidth+0.001)
	require.False(t, s.BackToBack.AtMax)
	require.Equal(t, vc.Now().Sub(0), res.Elapsed, "the run is timed on its clock")
	require.NotEmpty(t, lines)

	rep := &Report{Parameters: map[string]any{"trial_duration": "100ms"}, Results: []*Result{res}, Ratios: []RatioLine{{"search_repeatability", s.Repeatability, "<= 1.10", true}}}
	var md, js bytes.Buffer
	require.NoError(t, rep.WriteMarkdown(&md))
	for _, want := range []string{"# RFC 2544 benchmark", "| sim | 64B |", "p99 by load", "Frame loss rate", "Back-to-back", "search_repeatability", "trial_duration"} {
		require.Contains(t, md.String(), want)
	}
	require.NoError(t, rep.WriteJSON(&js))
	var back Report
	require.NoError(t, json.Unmarshal(js.Bytes(), &back))
	require.Equal(t, "sim", back.Results[0].DUT)
	require.Equal(t, s.NDR, back.Results[0].Sizes[0].NDR)
	require.NotEmpty(t, back.Results[0].Sizes[0].Searches[0].Trials)
}

func TestRunRejectsBadOptions(t *testing.T) {
	dut, _ := NewSimulated(SimulatedOptions{Capacity: 1})
	for _, o := range []Options{
		{Search: SearchOptions{MaxRate: 10}, Sizes: []FrameSize{32}},
		{Search: SearchOptions{MaxRate: 10}, Measures: []Measure{"jitter"}},
		{Search: SearchOptions{MaxRate: 10}, Measures: []Measure{Latency}},
		{Search: SearchOptions{MaxRate: 10}, LossLoads: []float64{1.5}},
		{Search: SearchOptions{}},
	} {
		_, err := Run(context.Background(), dut, "x", o)
		require.Error(t, err, "%+v", o)
	}
}

// TestGeneratorLimitedNDRIsALowerBound: a run whose generator cannot offer
// what the DUT forwards (it tops out at 500 kfps, the DUT loses nothing)
// reports the NDR as "≥ 500000 (generator-limited)" in the Markdown, and
// in the JSON as ndr_at_least_fps with ndr_fps null — never as the NDR —
// and reads back the same.
func TestGeneratorLimitedNDRIsALowerBound(t *testing.T) {
	res, err := Run(context.Background(), &slowGen{limit: 5e5}, "sim", Options{
		Search: SearchOptions{MaxRate: 1e6, Duration: 100 * time.Millisecond}, Sizes: []FrameSize{64}, Measures: []Measure{Throughput},
	})
	require.NoError(t, err)
	s := res.Size(64)
	require.True(t, s.GeneratorLimited)
	require.InDelta(t, 5e5, s.NDR, 1)
	rep := &Report{Results: []*Result{res}}
	var md, js bytes.Buffer
	require.NoError(t, rep.WriteMarkdown(&md))
	require.Contains(t, md.String(), "| sim | 64B | ≥ 500000 (generator-limited) |")
	require.NoError(t, rep.WriteJSON(&js))
	var raw struct {
		Results []struct {
			Sizes []map[string]any `json:"sizes"`
		} `json:"results"`
	}
	require.NoError(t, json.Unmarshal(js.Bytes(), &raw))
	got := raw.Results[0].Sizes[0]
	require.Nil(t, got["ndr_fps"])
	require.InDelta(t, 5e5, got["ndr_at_least_fps"], 1)
	require.Equal(t, "≥ 500000 (generator-limited)", got["ndr"])
	var back Report
	require.NoError(t, json.Unmarshal(js.Bytes(), &back))
	b := back.Results[0].Sizes[0]
	require.Equal(t, s.NDR, b.NDR)
	require.True(t, b.GeneratorLimited)
	require.Equal(t, FrameSize(64), b.Size)
}

// FuzzSizeResultJSON: reading a result back never panics, and what it
// reads writes again.
func FuzzSizeResultJSON(f *testing.F) {
	f.Add([]byte(`{"size":"64B","ndr_fps":null,"ndr_at_least_fps":5e5,"generator_limited":true}`))
	f.Add([]byte(`{"size":"imix","ndr_fps":1e6}`))
	f.Add([]byte(`{"size":"9018B","generator_limited":false,"searches":[{"goals":[]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var s SizeResult
		if json.Unmarshal(b, &s) != nil {
			return
		}
		if _, err := json.Marshal(s); err != nil && !strings.Contains(err.Error(), "unsupported value") {
			t.Fatal(err)
		}
	})
}

// TestRepeatedSearchesLabelTheMedian: of three searches one met a
// generator that could not keep up (its ceiling lowered, passed there) and
// two found the DUT passing MaxRate: the size's NDR, their median, is a
// found rate, not a generator-limited one.
func TestRepeatedSearchesLabelTheMedian(t *testing.T) {
	d := &slowAtFirst{slowGen: slowGen{limit: 5e5}, left: heldBackLimit}
	res, err := Run(context.Background(), d, "sim", Options{
		Search: SearchOptions{MaxRate: 1e6, Duration: 100 * time.Millisecond}, Sizes: []FrameSize{64}, Measures: []Measure{Throughput}, Repeats: 3,
	})
	require.NoError(t, err)
	s := res.Size(64)
	require.True(t, s.Searches[0].GeneratorLimited)
	require.Equal(t, 1e6, s.NDR)
	require.False(t, s.GeneratorLimited)
}

// slowAtFirst is slowGen for its first left trials, then a generator that
// keeps any rate.
type slowAtFirst struct {
	slowGen
	left int
}

func (d *slowAtFirst) Trial(ctx context.Context, spec TrialSpec) (TrialResult, error) {
	if d.left > 0 {
		d.left--
		return d.slowGen.Trial(ctx, spec)
	}
	n := spec.Count()
	return TrialResult{Sent: n, Received: n, SendTime: time.Duration(float64(n) / spec.Rate * float64(time.Second))}, nil
}
