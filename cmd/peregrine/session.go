package main

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/peregrine-net/peregrine/app"
	"github.com/peregrine-net/peregrine/core/port"
)

// flagError names the flag behind an option app.New (or Start) refused:
// flags maps an app.FieldError's field ("Ports[1]") or option ("Pool") to
// the flag; an option without one reports the cause alone.
func flagError(err error, flags map[string]string) error {
	var fe *app.FieldError
	if !errors.As(err, &fe) {
		return err
	}
	flag, ok := flags[fe.Field()]
	if !ok {
		flag = flags[fe.Option]
	}
	if flag == "" {
		return fe.Err
	}
	return fmt.Errorf("%s: %w", flag, fe.Err)
}

// joinStop stops p after err ended a command early, and reports both.
func joinStop(err error, p *app.Pipeline) error {
	if serr := p.Stop(); serr != nil {
		return fmt.Errorf("%w (and while stopping: %v)", err, serr)
	}
	return err
}

// portMeter prints per-port, per-queue rates between calls.
type portMeter struct {
	ports []port.Port
	last  []port.Stats
	at    time.Duration
	// js, with --json, receives the figures instead of the text.
	js *jsonRun
}

// counters are the ports' cumulative counters by "PORT.COUNTER".
func (m *portMeter) counters() map[string]float64 {
	out := map[string]float64{}
	for i, p := range m.ports {
		st := p.Stats()
		name := fmt.Sprintf("%d:%s", i, p.Info().Name)
		for k, v := range map[string]uint64{"rx_packets": st.RxPackets, "rx_bytes": st.RxBytes, "tx_packets": st.TxPackets, "tx_bytes": st.TxBytes,
			"rx_dropped": st.RxDropped, "rx_no_buffer": st.RxNoBuf, "tx_refused": st.TxDropped, "errors": st.Errors} {
			out[name+"."+k] = float64(v)
		}
	}
	return out
}

func newPortMeter(ports []port.Port) *portMeter {
	m := &portMeter{ports: ports, last: make([]port.Stats, len(ports))}
	for i, p := range ports {
		m.last[i] = p.Stats()
	}
	return m
}

func (m *portMeter) print(w io.Writer, elapsed time.Duration) {
	if m.js != nil {
		m.js.interval(elapsed.Seconds(), m.counters())
		return
	}
	dt := (elapsed - m.at).Seconds()
	m.at = elapsed
	for i, p := range m.ports {
		st := p.Stats()
		prev := m.last[i]
		m.last[i] = st
		fmt.Fprintf(w, "[%5.1fs] %-28s rx %8.3f Mpps %7.3f Gbit/s  tx %8.3f Mpps %7.3f Gbit/s  drop rx %d tx %d\n",
			elapsed.Seconds(), p.Info().Name,
			float64(st.RxPackets-prev.RxPackets)/dt/1e6, float64(st.RxBytes-prev.RxBytes)*8/dt/1e9,
			float64(st.TxPackets-prev.TxPackets)/dt/1e6, float64(st.TxBytes-prev.TxBytes)*8/dt/1e9,
			st.RxDropped+st.RxNoBuf, st.TxDropped)
		if len(st.Queues) > 1 {
			for q, qs := range st.Queues {
				var pq port.QueueStats
				if q < len(prev.Queues) {
					pq = prev.Queues[q]
				}
				fmt.Fprintf(w, "          %-28s rx %8.3f Mpps            tx %8.3f Mpps\n",
					fmt.Sprintf("  queue %d", q), float64(qs.RxPackets-pq.RxPackets)/dt/1e6, float64(qs.TxPackets-pq.TxPackets)/dt/1e6)
			}
		}
	}
}

// tick prints one period's rates, unless quiet (--json lines still go).
func (m *portMeter) tick(w io.Writer, elapsed time.Duration, quiet bool) {
	if !quiet || m.js != nil {
		m.print(w, elapsed)
	}
}

// summary prints each port's totals (with --json, and the checks).
func (m *portMeter) summary(w io.Writer, elapsed time.Duration, checks []check, interrupted bool) {
	if m.js != nil {
		totals := map[string]any{}
		for k, v := range m.counters() {
			totals[k] = v
		}
		m.js.summary(elapsed.Seconds(), totals, checks, interrupted)
	}
	secs := elapsed.Seconds()
	for _, p := range m.ports {
		st := p.Stats()
		fmt.Fprintf(w, "  %-28s rx %d pkts (%.3f Mpps)  tx %d pkts (%.3f Mpps)  rx dropped %d  no-buf %d  tx refused %d  errors %d\n",
			p.Info().Name, st.RxPackets, float64(st.RxPackets)/secs/1e6, st.TxPackets, float64(st.TxPackets)/secs/1e6,
			st.RxDropped, st.RxNoBuf, st.TxDropped, st.Errors)
	}
}
