package perf

import (
	"fmt"
	"time"

	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/fabric"
	"github.com/peregrine-net/peregrine/sim"
)

// SimPacketsPerSecond runs one simulation on the calling goroutine and
// returns how many transport packets (every frame either endpoint sent:
// data, resends, ACKs, control) it simulated per second of wall time.
// Two endpoints exchange packets/2 packets each way on one connection
// through the fabric (5µs delay, 0.1 % loss, no invariant checks), with
// delivery checked as in the property tests. For the
// `peregrine bench transport-core` command.
func SimPacketsPerSecond(seed uint64, packets int) (pps float64, err error) {
	if packets < 2 {
		return 0, fmt.Errorf("perf: SimPacketsPerSecond: packets %d is too few (use 2 or more)", packets)
	}
	profile := fabric.Profile{Delay: 5 * time.Microsecond, Loss: 0.1}
	ep := rt.Options{MaxConns: 4, AckEvery: 8, Burst: 64}
	s, err := sim.New(sim.Config{Seed: seed, AtoB: profile, BtoA: profile, A: ep, B: ep, Frames: 8192, Start: 1_000_000})
	if err != nil {
		return 0, err
	}
	defer func() {
		if cerr := s.Close(); err == nil {
			err = cerr
		}
	}()
	w := sim.NewWorkload(s, sim.WorkloadConfig{Conns: 1, Packets: packets / 2, MaxPayload: 64, PerPoll: 64, Seed: seed})
	start := time.Now()
	if err := w.Open(); err != nil {
		return 0, err
	}
	if err := s.Run(func() bool { return w.Err() != nil || w.Done() }, time.Hour); err != nil {
		return 0, err
	}
	elapsed := time.Since(start)
	if err := w.Verify(); err != nil {
		return 0, err
	}
	frames := s.A.Stats().TxFrames + s.B.Stats().TxFrames
	return float64(frames) / elapsed.Seconds(), nil
}
