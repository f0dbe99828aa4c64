// Package metrics exports a running pipeline's counters to Prometheus: the
// ports (packets and bytes per queue and direction), every drop with a
// reason label, the pool in use, the loops' busy ratio, the fabric and the
// transport endpoints. It serves them on /metrics with the official client
// library (github.com/prometheus/client_golang).
//
// Scraping never locks the datapath: every collector reads snapshots the
// stages already publish for any goroutine (port.Port.Stats, the loops'
// and the transport's atomically published counters, the pool's in-use
// count) when Prometheus asks, and nothing is added to the per-packet path
// — there is no per-packet cost, on or off.
//
// A mechanism's counters join through Registry.Register with a collector
// of its own (prometheus.Collector); names follow Prometheus conventions,
// peregrine_<subsystem>_<what>_total for counters.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/peregrine-net/peregrine/core/lcore"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/fabric"
)

// Registry holds the collectors one process exports.
type Registry struct {
	reg *prometheus.Registry
}

// New returns a registry with the Go runtime and process collectors.
func New() *Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return &Registry{reg: r}
}

// Register adds a collector: the registration point for each mechanism's
// counters. Its metrics must not clash with those already registered.
func (r *Registry) Register(c prometheus.Collector) error { return r.reg.Register(c) }

// Gatherer returns the registry for tests and handlers.
func (r *Registry) Gatherer() prometheus.Gatherer { return r.reg }

// Ports exports the ports' counters: peregrine_port_{rx,tx}_{packets,bytes}_total
// per port (labelled with its spec; "SPEC#INDEX" for a spec given twice)
// and queue, peregrine_port_drops_total by reason, and
// peregrine_port_queue_drops_total by queue and reason (rx_dropped,
// tx_refused) for ports that count per queue.
func (r *Registry) Ports(ports func() []port.Port) error {
	return r.Register(&portCollector{ports: ports})
}

// Pool exports peregrine_pool_frames_in_use and peregrine_pool_frames.
func (r *Registry) Pool(pool *mbuf.Pool) error {
	return r.Register(newFuncCollector(func(ch chan<- prometheus.Metric) {
		ch <- gauge("peregrine_pool_frames_in_use", "Frames of the packet pool allocated now.", nil, float64(pool.InUse()))
		ch <- gauge("peregrine_pool_frames", "Frames in the packet pool.", nil, float64(pool.Frames()))
	}))
}

// Loops exports each loop's peregrine_lcore_polls_total,
// peregrine_lcore_idle_polls_total and peregrine_lcore_busy_ratio (the
// share of iterations in which a stage found work, since the start).
func (r *Registry) Loops(loops func() []*lcore.Loop) error {
	return r.Register(newFuncCollector(func(ch chan<- prometheus.Metric) {
		for _, l := range loops() {
			st := l.Stats()
			lv := []string{l.Name()}
			ch <- counter("peregrine_lcore_polls_total", "Poll-loop iterations.", []string{"lcore"}, float64(st.Polls), lv...)
			ch <- counter("peregrine_lcore_idle_polls_total", "Poll-loop iterations in which no stage found work.", []string{"lcore"}, float64(st.IdlePolls), lv...)
			busy := 0.0
			if st.Polls > 0 {
				busy = 1 - float64(st.IdlePolls)/float64(st.Polls)
			}
			ch <- gauge("peregrine_lcore_busy_ratio", "Share of the loop's iterations in which a stage found work, since it started.", []string{"lcore"}, busy, lv...)
		}
	}))
}

// Fabric exports a fabric's frames per direction and its drops by reason.
func (r *Registry) Fabric(name string, f *fabric.Fabric) error {
	return r.Register(newFuncCollector(func(ch chan<- prometheus.Metric) {
		st := f.Stats()
		for dir, d := range map[string]fabric.DirStats{"a_to_b": st.AtoB, "b_to_a": st.BtoA} {
			labels := []string{"fabric", "direction"}
			ch <- counter("peregrine_fabric_received_total", "Frames the fabric took in.", labels, float64(d.Received), name, dir)
			ch <- counter("peregrine_fabric_sent_total", "Frames the fabric sent on.", labels, float64(d.Sent), name, dir)
			ch <- counter("peregrine_fabric_reordered_total", "Frames the fabric held back to reorder.", labels, float64(d.Reordered), name, dir)
			ch <- counter("peregrine_fabric_duplicated_total", "Copies the fabric made.", labels, float64(d.Duplicated), name, dir)
			ch <- counter("peregrine_fabric_corrupted_total", "Frames the fabric flipped a bit in.", labels, float64(d.Corrupted), name, dir)
			for reason, n := range map[string]uint64{"loss_random": d.LossRandom, "loss_burst": d.LossBurst, "queue_full": d.QueueFull,
				"limit_full": d.LimitFull, "ttl_expired": d.TTLExpired, "link_down": d.LinkDown, "link_cut": d.LinkCut, "dup_no_buffer": d.DupNoBuf,
				"path_queue_full": d.PathQueueFull, "path_loss": d.PathLossDrops, "path_down": d.PathDownDrops} {
				ch <- counter("peregrine_fabric_drops_total", "Frames the fabric dropped, by reason.", []string{"fabric", "direction", "reason"}, float64(n), name, dir, reason)
			}
		}
	}))
}

// Transport exports one endpoint's reliable-transport counters:
// packets, retransmissions, RTT samples, connections and drops by reason.
// ops, when set, reports the operations a workload completed and failed
// and their bytes.
func (r *Registry) Transport(name string, stats func() rt.Stats, ops func() (completed, failed, bytes uint64)) error {
	return r.Register(newFuncCollector(func(ch chan<- prometheus.Metric) {
		s := stats()
		ep := []string{"endpoint"}
		c := func(metric, help string, v uint64) { ch <- counter(metric, help, ep, float64(v), name) }
		c("peregrine_transport_tx_data_packets_total", "Reliable packets sent the first time.", s.TxData)
		c("peregrine_transport_retransmits_total", "Packets resent after a timeout or an RNR NACK.", s.TxRetransmit)
		c("peregrine_transport_early_retransmits_total", "Holes resent before their timeout.", s.TxEarlyRetransmit)
		c("peregrine_transport_rx_frames_total", "Frames the endpoint took from its port.", s.RxFrames)
		c("peregrine_transport_delivered_packets_total", "Reliable packets delivered.", s.RxDelivered)
		c("peregrine_transport_acks_sent_total", "ACKs and extended ACKs sent.", s.TxAck+s.TxExtendedAck)
		c("peregrine_transport_rtt_samples_total", "RTT samples taken.", s.RTTSamples)
		c("peregrine_transport_connections_established_total", "Connections established.", s.ConnEstablished)
		c("peregrine_transport_connections_failed_total", "Connections failed.", s.ConnFailed)
		for reason, n := range map[string]uint64{
			"not_transport": s.RxNotTransport, "bad_version": s.RxBadVersion, "malformed": s.RxMalformed, "bad_checksum": s.RxBadChecksum,
			"not_for_us": s.RxNotForUs, "unknown_cid": s.RxUnknownCID, "stale_cid": s.RxStaleCID, "bad_state": s.RxBadState,
			"duplicate": s.RxDuplicate, "stale_psn": s.RxStalePSN, "out_of_window": s.RxOutOfWindow, "refused": s.RxRefused,
			"bad_source": s.RxBadSource, "bad_seal": s.RxBadSeal, "no_buffer": s.NoBuffer, "cam_full": s.CAMFull,
		} {
			ch <- counter("peregrine_transport_drops_total", "Packets the transport dropped (or sends it refused), by reason.", []string{"endpoint", "reason"}, float64(n), name, reason)
		}
		if ops != nil {
			done, failed, bytes := ops()
			c("peregrine_transport_ops_completed_total", "Operations completed without error.", done)
			c("peregrine_transport_ops_failed_total", "Operations completed with an error.", failed)
			c("peregrine_transport_goodput_bytes_total", "Payload bytes of operations completed without error.", bytes)
		}
	}))
}

// Stage exports a stage's counters, read at each scrape: each entry of
// counters() becomes peregrine_KIND_ENTRY_total{stage=NAME}, and each
// entry of drops() a peregrine_KIND_drops_total{stage=NAME,reason=ENTRY}.
// Either may be nil.
func (r *Registry) Stage(kind, name string, counters, drops func() map[string]uint64) error {
	return r.Register(newFuncCollector(func(ch chan<- prometheus.Metric) {
		if counters != nil {
			for k, v := range counters() {
				ch <- counter("peregrine_"+kind+"_"+k+"_total", "The "+kind+" stage's "+strings.ReplaceAll(k, "_", " ")+".", []string{"stage"}, float64(v), name)
			}
		}
		if drops != nil {
			for reason, v := range drops() {
				ch <- counter("peregrine_"+kind+"_drops_total", "Frames the "+kind+" stage dropped, by reason.", []string{"stage", "reason"}, float64(v), name, reason)
			}
		}
	}))
}

// Conns exports an endpoint's connections as a sampler publishes them:
// peregrine_transport_srtt_seconds (mean smoothed RTT of the live
// connections), peregrine_transport_cwnd_packets (their congestion windows
// summed) and peregrine_transport_connections.
func (r *Registry) Conns(name string, sample func() (srtt time.Duration, window, conns int)) error {
	return r.Register(newFuncCollector(func(ch chan<- prometheus.Metric) {
		srtt, window, conns := sample()
		ep := []string{"endpoint"}
		ch <- gauge("peregrine_transport_srtt_seconds", "Mean smoothed round-trip time of the endpoint's live connections.", ep, srtt.Seconds(), name)
		ch <- gauge("peregrine_transport_cwnd_packets", "Congestion windows of the endpoint's live connections, summed, in packets.", ep, float64(window), name)
		ch <- gauge("peregrine_transport_connections", "Live connections the endpoint's workload holds.", ep, float64(conns), name)
	}))
}

// portCollector reads each port's Stats snapshot.
type portCollector struct {
	ports func() []port.Port
}

var (
	portLabels  = []string{"port", "queue"}
	dropLabels  = []string{"port", "reason"}
	qdropLabels = []string{"port", "queue", "reason"}
	descRxPkts  = prometheus.NewDesc("peregrine_port_rx_packets_total", "Packets received, per port and queue.", portLabels, nil)
	descRxBytes = prometheus.NewDesc("peregrine_port_rx_bytes_total", "Bytes received (without FCS), per port and queue.", portLabels, nil)
	descTxPkts  = prometheus.NewDesc("peregrine_port_tx_packets_total", "Packets transmitted, per port and queue.", portLabels, nil)
	descTxBytes = prometheus.NewDesc("peregrine_port_tx_bytes_total", "Bytes transmitted (without FCS), per port and queue.", portLabels, nil)
	descDrops   = prometheus.NewDesc("peregrine_port_drops_total", "Packets a port dropped or refused, by reason.", dropLabels, nil)
	descQDrops  = prometheus.NewDesc("peregrine_port_queue_drops_total", "Packets a port dropped (rx_dropped) or refused (tx_refused), per queue.", qdropLabels, nil)
)

func (c *portCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRxPkts, descRxBytes, descTxPkts, descTxBytes, descDrops, descQDrops} {
		ch <- d
	}
}

func (c *portCollector) Collect(ch chan<- prometheus.Metric) {
	seen := map[string]bool{}
	for i, p := range c.ports() {
		st := p.Stats()
		// Two ports may share a spec ("null:" twice): the second and later
		// get their index, so every series stays unique.
		name := p.Info().Name
		if seen[name] {
			name += "#" + strconv.Itoa(i)
		}
		seen[name] = true
		queues := st.Queues
		if len(queues) == 0 {
			queues = []port.QueueStats{{RxPackets: st.RxPackets, RxBytes: st.RxBytes, TxPackets: st.TxPackets, TxBytes: st.TxBytes}}
		}
		for q, qs := range queues {
			qn := strconv.Itoa(q)
			ch <- prometheus.MustNewConstMetric(descRxPkts, prometheus.CounterValue, float64(qs.RxPackets), name, qn)
			ch <- prometheus.MustNewConstMetric(descRxBytes, prometheus.CounterValue, float64(qs.RxBytes), name, qn)
			ch <- prometheus.MustNewConstMetric(descTxPkts, prometheus.CounterValue, float64(qs.TxPackets), name, qn)
			ch <- prometheus.MustNewConstMetric(descTxBytes, prometheus.CounterValue, float64(qs.TxBytes), name, qn)
		}
		for q, qs := range st.Queues {
			qn := strconv.Itoa(q)
			ch <- prometheus.MustNewConstMetric(descQDrops, prometheus.CounterValue, float64(qs.RxDropped), name, qn, "rx_dropped")
			ch <- prometheus.MustNewConstMetric(descQDrops, prometheus.CounterValue, float64(qs.TxDropped), name, qn, "tx_refused")
		}
		for reason, n := range map[string]uint64{"rx_dropped": st.RxDropped, "rx_no_buffer": st.RxNoBuf, "tx_refused": st.TxDropped, "errors": st.Errors} {
			ch <- prometheus.MustNewConstMetric(descDrops, prometheus.CounterValue, float64(n), name, reason)
		}
	}
}

// funcCollector is an unchecked collector (no Describe): its metrics are
// made at each scrape from a snapshot.
type funcCollector struct {
	collect func(chan<- prometheus.Metric)
}

func newFuncCollector(f func(chan<- prometheus.Metric)) prometheus.Collector {
	return &funcCollector{collect: f}
}

func (c *funcCollector) Describe(chan<- *prometheus.Desc)    {}
func (c *funcCollector) Collect(ch chan<- prometheus.Metric) { c.collect(ch) }

func counter(name, help string, labels []string, v float64, values ...string) prometheus.Metric {
	return prometheus.MustNewConstMetric(prometheus.NewDesc(name, help, labels, nil), prometheus.CounterValue, v, values...)
}

func gauge(name, help string, labels []string, v float64, values ...string) prometheus.Metric {
	return prometheus.MustNewConstMetric(prometheus.NewDesc(name, help, labels, nil), prometheus.GaugeValue, v, values...)
}

// Server serves /metrics.
type Server struct {
	srv  *http.Server
	ln   net.Listener
	done chan error
}

// Serve listens on addr and serves r's metrics on /metrics. Unless public,
// addr must be a loopback address (127.0.0.1:9100, [::1]:9100,
// localhost:9100): metrics name ports and peers, and a scrape costs CPU.
// The listen happens here, so an address in use is this call's error.
func Serve(addr string, public bool, r *Registry) (*Server, error) {
	if err := CheckAddr(addr, public); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%q: %w (is another process serving there? pick another port)", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{}))
	s := &Server{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}, ln: ln, done: make(chan error, 1)}
	go func() { s.done <- s.srv.Serve(ln) }()
	return s, nil
}

// CheckAddr is Serve's check of addr, opening nothing: HOST:PORT, and a
// loopback host unless public.
func CheckAddr(addr string, public bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q: give HOST:PORT, e.g. 127.0.0.1:9100 (%v)", addr, err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("%q: the port must be a number 0..65535, e.g. 127.0.0.1:9100", addr)
	}
	if !public && !isLoopback(host) {
		return fmt.Errorf("%q is not a loopback address: use 127.0.0.1:PORT, [::1]:PORT or localhost:PORT, or add --metrics-public to serve on other addresses", addr)
	}
	return nil
}

// Addr is the address the server listens on (its port when addr's was 0).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the server and waits for it.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if serr := <-s.done; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// App is one application attached to the sidecar, as the appliance counts
// it (host.Server.Stats): the metrics of Apps are labelled by its
// attachment's number (app), user (uid) and process (pid).
type App struct {
	ID       uint64
	UID      uint32
	PID      int32
	Channels int   // channels the attachment holds (one)
	Buffers  int   // channel buffers the appliance holds for operations in flight
	Conns    int64 // connections open
	InFlight int   // operations in flight
	OpsOK, OpsFailed, OpsUnused,
	BytesSent, BytesReceived uint64
	// Drops are the descriptors and control messages the appliance
	// refused, by reason.
	Drops map[string]uint64
}

// Sidecar is the appliance's own count of attachments.
type Sidecar struct {
	Attached                    int
	Attaches, Detaches, Refused uint64
}

// Apps exports the sidecar's applications, read at each scrape: sample
// calls app once per attached application and returns the server's
// counts. Per application: peregrine_sidecar_app_channels,
// peregrine_sidecar_app_buffers_in_use, peregrine_sidecar_app_connections,
// peregrine_sidecar_app_ops_in_flight, peregrine_sidecar_app_ops_total by
// outcome, peregrine_sidecar_app_bytes_total by direction and
// peregrine_sidecar_app_drops_total by reason; and the server's
// peregrine_sidecar_apps_attached and peregrine_sidecar_{attaches,
// detaches,refused}_total.
func (r *Registry) Apps(sample func(app func(App)) Sidecar) error {
	return r.Register(newFuncCollector(func(ch chan<- prometheus.Metric) {
		l := []string{"app", "uid", "pid"}
		st := sample(func(a App) {
			v := []string{strconv.FormatUint(a.ID, 10), strconv.FormatUint(uint64(a.UID), 10), strconv.FormatInt(int64(a.PID), 10)}
			ch <- gauge("peregrine_sidecar_app_channels", "Shared-memory channels the application holds.", l, float64(a.Channels), v...)
			ch <- gauge("peregrine_sidecar_app_buffers_in_use", "Channel buffers the appliance holds for the application's operations in flight.", l, float64(a.Buffers), v...)
			ch <- gauge("peregrine_sidecar_app_connections", "Connections the application holds open.", l, float64(a.Conns), v...)
			ch <- gauge("peregrine_sidecar_app_ops_in_flight", "The application's operations in flight.", l, float64(a.InFlight), v...)
			lo := append(l[:len(l):len(l)], "outcome")
			ch <- counter("peregrine_sidecar_app_ops_total", "The application's operations completed, by outcome.", lo, float64(a.OpsOK), append(v, "ok")...)
			ch <- counter("peregrine_sidecar_app_ops_total", "The application's operations completed, by outcome.", lo, float64(a.OpsFailed), append(v, "failed")...)
			ch <- counter("peregrine_sidecar_app_ops_total", "The application's operations completed, by outcome.", lo, float64(a.OpsUnused), append(v, "unused")...)
			ld := append(l[:len(l):len(l)], "direction")
			ch <- counter("peregrine_sidecar_app_bytes_total", "Message bytes of the application's successful sends and receives.", ld, float64(a.BytesSent), append(v, "sent")...)
			ch <- counter("peregrine_sidecar_app_bytes_total", "Message bytes of the application's successful sends and receives.", ld, float64(a.BytesReceived), append(v, "received")...)
			lr := append(l[:len(l):len(l)], "reason")
			for reason, n := range a.Drops {
				ch <- counter("peregrine_sidecar_app_drops_total", "Descriptors and requests of the application the appliance refused, by reason.", lr, float64(n), append(v, reason)...)
			}
		})
		ch <- gauge("peregrine_sidecar_apps_attached", "Applications attached now.", nil, float64(st.Attached))
		ch <- counter("peregrine_sidecar_attaches_total", "Attachments accepted.", nil, float64(st.Attaches))
		ch <- counter("peregrine_sidecar_detaches_total", "Attachments ended, closed or by the application's death.", nil, float64(st.Detaches))
		ch <- counter("peregrine_sidecar_refused_total", "Attachments refused: malformed, or over a quota.", nil, float64(st.Refused))
	}))
}
