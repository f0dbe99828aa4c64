package sched

import (
	"fmt"
	"testing"

	"github.com/peregrine-net/peregrine/core/clock"
)

// BenchmarkEnqueueNext measures one item through the scheduler (Enqueue plus
// the Next that picks it) with every flow backlogged: each item Next returns
// is enqueued again on its flow, so the number of active flows stays fixed.
func BenchmarkEnqueueNext(b *testing.B) {
	for _, mode := range []struct {
		name  string
		rr    bool
		sizes []int
	}{
		{"drr", false, []int{1500}},
		{"drr-mixed", false, []int{64, 1500, 9000}},
		{"rr", true, []int{1500}},
	} {
		for _, flows := range []int{1, 64, 4096} {
			b.Run(fmt.Sprintf("%s/flows=%d", mode.name, flows), func(b *testing.B) {
				const perFlow = 4
				s, err := New(Options{Flows: flows, Items: flows * perFlow, RoundRobin: mode.rr})
				if err != nil {
					b.Fatal(err)
				}
				size := func(f int) int { return mode.sizes[f%len(mode.sizes)] }
				for f := range flows {
					for i := range perFlow {
						if err := s.Enqueue(f, Class(i%2), uint32(f*perFlow+i), size(f)); err != nil {
							b.Fatal(err)
						}
					}
				}
				b.ReportAllocs()
				var now clock.Time
				for b.Loop() {
					now++
					f, c, item, ok := s.Next(now)
					if !ok {
						b.Fatal("nothing to send")
					}
					if err := s.Enqueue(f, c, item, size(f)); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "items/s")
			})
		}
	}
}

// BenchmarkPaced adds the pacing path: every pick paces its flow for a few
// picks, so each item costs a heap push and a re-admission.
func BenchmarkPaced(b *testing.B) {
	for _, flows := range []int{64, 4096} {
		b.Run(fmt.Sprintf("flows=%d", flows), func(b *testing.B) {
			s, err := New(Options{Flows: flows, Items: flows * 2})
			if err != nil {
				b.Fatal(err)
			}
			for f := range flows {
				for i := range 2 {
					if err := s.Enqueue(f, ClassRequest, uint32(f*2+i), 1500); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportAllocs()
			var now clock.Time
			for b.Loop() {
				now++
				f, c, item, ok := s.Next(now)
				if !ok {
					b.Fatal("nothing to send")
				}
				s.PaceUntil(f, now+clock.Time(flows/2))
				if err := s.Enqueue(f, c, item, 1500); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
