package mcsq

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/peregrine-net/peregrine/bench/report"
	"github.com/peregrine-net/peregrine/core/clock"
)

// BenchmarkThroughput runs each design's real-clock throughput harness for
// 200 ms per iteration (a profile target: go test -bench Throughput
// -benchtime=1x -cpuprofile; the figures belong to a quiet machine).
func BenchmarkThroughput(b *testing.B) {
	for _, d := range []design{designMCSQ, designPerTarget} {
		for _, g := range []int{1, 4} {
			b.Run(fmt.Sprintf("%v/g%d_burst8", d, g), func(b *testing.B) {
				o := Options{}
				o.defaults()
				var ops float64
				for range b.N {
					bd, err := newBed(&o, d, false, clock.NewReal(), dcIdle)
					if err != nil {
						b.Fatal(err)
					}
					v, err := bd.throughput(context.Background(), g, 8, 200*time.Millisecond, 1)
					st := bd.q.Stats()
					ps := bd.pool.Stats()
					if cerr := bd.n.Close(); err == nil {
						err = cerr
					}
					if err != nil {
						b.Fatal(err)
					}
					ops = v
					b.Logf("%v g%d: %.0f WR/s; hol nosq %d full %d wait %.1fms overtook %d scans %d; binds %d hits %d connects %d", d, g, v, st.HOLNoSQ, st.HOLSQFull, float64(st.HOLWaitNs)/1e6, st.Overtook, st.LookScans, ps.Binds, ps.BoundHits, ps.DCConnects)
				}
				b.ReportMetric(ops, "WR/s")
			})
		}
	}
}

// BenchmarkVirtualBurst8 runs 20,000 WRs in bursts of 8 per random target
// through each design on a virtual clock: the loop's CPU per WR (a
// profile target).
func BenchmarkVirtualBurst8(b *testing.B) {
	for _, d := range []design{designMCSQ, designPerTarget} {
		b.Run(d.String(), func(b *testing.B) {
			o := Options{}
			o.defaults()
			for range b.N {
				bd, err := newBed(&o, d, false, clock.NewVirtual(1_000_000), dcIdle)
				if err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				if err := virtualRun(bd, 20000, 1); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				st, ps := bd.q.Stats(), bd.pool.Stats()
				b.Logf("%v: hol nosq %d full %d; binds %d hits %d connects %d; rt %+v", d, st.HOLNoSQ, st.HOLSQFull, ps.Binds, ps.BoundHits, ps.DCConnects, bd.n.Init.Transport().Stats().TxData)
				if err := bd.n.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestLookaheadGain: the lookahead is no slower than the strict wait, on
// the virtual clock (exact), for every traffic shape the bench prints.
func TestLookaheadGain(t *testing.T) {
	o := Options{}
	o.defaults()
	var out strings.Builder
	rep := report.New(&out)
	if err := lookaheadGain(&o, rep, 4000); err != nil {
		t.Fatal(err)
	}
	pass, fail := rep.Summary()
	t.Log(out.String())
	if fail != 0 || pass != 3 {
		t.Fatalf("lookahead slower than strict: %s", out.String())
	}
}
