package afxdp

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/pmd/netns"
	"github.com/peregrine-net/peregrine/pmd/netns/netnstest"
	"github.com/peregrine-net/peregrine/pmd/pmdtest"
)

// TestConformance runs the pmd suite over a veth pair: an afxdp port on
// the A end sends, one on the B end receives, two queues.
func TestConformance(t *testing.T) {
	const queues = 2
	tp := topo(t, queues)
	pool := newPool(t, 16384, 2048)
	pmdtest.Run(t, pmdtest.Harness{
		Pool: pool,
		Open: func(t *testing.T) (port.Port, port.Port) {
			tx, err := New(pool, Options{Interface: tp.IfA, Namespace: tp.A, Queues: queues, RingSize: 1024})
			require.NoError(t, err)
			rx, err := New(pool, Options{Interface: tp.IfB, Namespace: tp.B, Queues: queues, RingSize: 1024})
			require.NoError(t, err)
			return tx, rx
		},
		MaxFrame: 1514,
		// A real link: a receiver goroutine that is not scheduled for a
		// while lets its RX ring fill, and the kernel drops what follows.
		Lossy:  true,
		Settle: runtime.Gosched,
	})
}

// TestConformanceJumbo runs the suite with 16 KiB pool frames over a veth
// at MTU 9000: frames up to 9014 bytes cross as several UMEM chunks
// (multi-buffer), one queue.
func TestConformanceJumbo(t *testing.T) {
	skipUnlessRoot(t)
	tp := netnstest.TwoNS(t, netns.VethOptions{GRO: true, MTU: 9000})
	pool := newPool(t, 8192, 16384)
	pmdtest.Run(t, pmdtest.Harness{
		Pool: pool,
		Open: func(t *testing.T) (port.Port, port.Port) {
			tx, err := New(pool, Options{Interface: tp.IfA, Namespace: tp.A, RingSize: 1024, Mode: ModeGeneric})
			require.NoError(t, err)
			rx, err := New(pool, Options{Interface: tp.IfB, Namespace: tp.B, RingSize: 1024, Mode: ModeGeneric})
			require.NoError(t, err)
			return tx, rx
		},
		MaxFrame: 9014,
		Lossy:    true,
		Settle:   runtime.Gosched,
	})
}
