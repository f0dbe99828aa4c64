package sim

import (
	"flag"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/internal/testenv"
)

var (
	packetsFlag = flag.Int("packets", 0, "packets per side and connection in TestProperty (default 60)")
	traceFlag   = flag.Bool("frames", false, "with -seed: log every frame the endpoints send and receive")
)

// propertySeeds is how many seeds TestProperty runs (PEREGRINE_SEEDS
// overrides).
var propertySeeds = testenv.Seeds{Full: 1000, Short: 100}

func TestProperty(t *testing.T) {
	packets := 60
	if *packetsFlag > 0 {
		packets = *packetsFlag
	}
	if seed, ok := testenv.Replay(t); ok {
		sc := RandomScenario(seed, packets)
		if *traceFlag {
			sc.Sim.Trace = os.Stdout
		}
		t.Log(sc)
		rep, err := Check(sc, nil)
		require.NoError(t, err)
		t.Logf("%+v", rep)
		return
	}
	n := propertySeeds.N(t)
	workers := 2
	var next atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []error
	var sent, retx, early, rtt, eack, badck, dup, oow, resync, abandoned, closed atomic.Uint64
	for range workers {
		pool, err := mbuf.New(mbuf.Options{Name: "sim-property", Frames: DefaultFrames, CacheSize: 128})
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer pool.Close()
			for {
				seed := next.Add(1) - 1
				if seed >= int64(n) {
					return
				}
				rep, err := Check(RandomScenario(uint64(seed), packets), pool)
				if err != nil {
					mu.Lock()
					failures = append(failures, err)
					mu.Unlock()
					if len(failures) >= 3 {
						next.Store(int64(n))
					}
					continue
				}
				sent.Add(uint64(rep.Sent))
				for _, st := range []rt.Stats{rep.A, rep.B} {
					retx.Add(st.TxRetransmit)
					early.Add(st.TxEarlyRetransmit)
					rtt.Add(st.RTTSamples)
					eack.Add(st.TxExtendedAck)
					badck.Add(st.RxBadChecksum)
					dup.Add(st.RxDuplicate + st.RxStalePSN)
					oow.Add(st.RxOutOfWindow)
					resync.Add(st.ResyncSent)
					abandoned.Add(st.Abandoned)
					closed.Add(st.ConnClosed)
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range failures {
		t.Error(err)
	}
	t.Logf("%d seeds: %d packets delivered exactly once; %d timeout and %d early retransmissions, %d RTT samples, %d extended ACKs, "+
		"%d checksum drops, %d duplicate/stale arrivals, %d out-of-window, %d resyncs, %d abandoned, %d clean closes",
		n, sent.Load(), retx.Load(), early.Load(), rtt.Load(), eack.Load(), badck.Load(), dup.Load(), oow.Load(), resync.Load(), abandoned.Load(), closed.Load())
}

func TestPropertyDeterministic(t *testing.T) {
	for _, seed := range []uint64{3, 17, 42} {
		sc := RandomScenario(seed, 80)
		r1, err := Check(sc, nil)
		require.NoError(t, err)
		r2, err := Check(sc, nil)
		require.NoError(t, err)
		require.Equal(t, r1, r2, "seed %d: the same seed replays the same run", seed)
	}
}
