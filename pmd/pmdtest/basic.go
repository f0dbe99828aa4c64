package pmdtest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
)

// BasicHarness describes a driver whose ports do not loop back (null,
// pcap, pcap-out): RunBasic checks what holds for any single port.
type BasicHarness struct {
	// Pool is where frames live; it must be dedicated to the suite.
	Pool *mbuf.Pool
	// Open returns a fresh port; the suite closes it.
	Open func(t *testing.T) port.Port
	// Settle and MaxEmptyPolls are as in Harness.
	Settle        func()
	MaxEmptyPolls int
}

// RunBasic runs the single-port subset of the suite: Info, stats that
// match what RxBurst returned and TxBurst accepted or refused (refused
// frames still the caller's), out-of-range queues, Close idempotence, and
// the leak check after each.
func RunBasic(t *testing.T, h BasicHarness) {
	t.Helper()
	require.NotNil(t, h.Pool, "pmdtest: BasicHarness.Pool is nil")
	require.NotNil(t, h.Open, "pmdtest: BasicHarness.Open is nil")
	if h.MaxEmptyPolls == 0 {
		h.MaxEmptyPolls = DefaultMaxEmptyPolls
	}
	full := Harness{
		Pool: h.Pool,
		Open: func(t *testing.T) (port.Port, port.Port) {
			p := h.Open(t)
			return p, p
		},
		MaxFrame:      min(1514, h.Pool.FrameSize()-h.Pool.Headroom()),
		Settle:        h.Settle,
		MaxEmptyPolls: h.MaxEmptyPolls,
	}
	subtests := []struct {
		name string
		fn   func(*session)
	}{
		{"Info", testInfo},
		{"Stats", testBasicStats},
		{"QueueOutOfRange", testQueueOutOfRange},
		{"CloseIdempotent", testCloseIdempotent},
	}
	for _, st := range subtests {
		t.Run(st.name, func(t *testing.T) {
			st.fn(open(t, full))
		})
	}
}

// testBasicStats receives what the port offers and transmits a few frames
// on every queue, then checks the counters against what happened.
func testBasicStats(s *session) {
	t := s.t
	p := s.tx
	before := p.Stats()
	var got tally
	var accepted, refused int
	var acceptedBytes uint64
	bufs := make([]mbuf.Handle, 32)
	for q := range p.Info().Queues {
		for range 4 {
			if n := p.RxBurst(q, bufs); n > 0 {
				for _, h := range bufs[:n] {
					require.LessOrEqual(t, int(s.pool.Meta(h).DataOff)+len(s.pool.Data(h)), s.pool.FrameSize(), "received frame overruns its buffer")
				}
				// Not checked as frames of ours: a source port may hand
				// out recycled frames that still hold old bytes.
				for _, h := range bufs[:n] {
					got.packets++
					got.bytes += uint64(s.pool.Meta(h).DataLen)
				}
				s.pool.Free(bufs[:n])
			}
		}
		sizes := s.sizesFor(8)
		hs := s.make(q, sizes...)
		n := p.TxBurst(q, hs)
		port.FlushTx(p, q)
		require.GreaterOrEqual(t, n, 0)
		require.LessOrEqual(t, n, len(hs))
		seqsOf(s, hs[n:]) // refused frames are still intact
		s.pool.Free(hs[n:])
		accepted += n
		refused += len(hs) - n
		for _, size := range sizes[:n] {
			acceptedBytes += uint64(size)
		}
	}
	after := p.Stats()
	require.Equal(t, uint64(got.packets), after.RxPackets-before.RxPackets, "RxPackets")
	require.Equal(t, got.bytes, after.RxBytes-before.RxBytes, "RxBytes")
	require.Equal(t, uint64(accepted), after.TxPackets-before.TxPackets, "TxPackets")
	require.Equal(t, acceptedBytes, after.TxBytes-before.TxBytes, "TxBytes")
	require.Equal(t, uint64(refused), after.TxDropped-before.TxDropped, "TxDropped must count the refused frames")
	requireSumsMatch(t, after)
}
