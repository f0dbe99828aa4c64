package txn

import (
	"bytes"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/fabric"
	"github.com/peregrine-net/peregrine/pmd/mem"
)

// incastSwitch joins N initiator ports to one uplink: frames from the
// initiators go up in arrival order, frames coming down go to the port
// whose MAC they name.
type incastSwitch struct {
	pool  *mbuf.Pool
	downs []port.Port
	macs  [][6]byte
	up    port.Port
	buf   []mbuf.Handle
}

func (s *incastSwitch) Poll(clock.Time) int {
	work := 0
	for _, d := range s.downs {
		n := d.RxBurst(0, s.buf)
		if n == 0 {
			continue
		}
		work += n
		sent := s.up.TxBurst(0, s.buf[:n])
		s.pool.Free(s.buf[sent:n])
	}
	n := s.up.RxBurst(0, s.buf)
	for _, h := range s.buf[:n] {
		dst := [6]byte(s.pool.Data(h)[:6])
		out := -1
		for i, m := range s.macs {
			if m == dst {
				out = i
			}
		}
		one := []mbuf.Handle{h}
		if out < 0 || s.downs[out].TxBurst(0, one) != 1 {
			s.pool.Free(one)
		}
	}
	return work + n
}

// TestIncast16to1 runs sixteen initiators pushing into one target through
// a switch whose port toward the target is a rate-limited queue: the
// target's grants keep that queue short and every initiator progresses.
func TestIncast16to1(t *testing.T) {
	const (
		initiators = 16
		perInit    = 6
		msg        = 64 << 10
		capBytes   = 128 << 10
	)
	pool, err := mbuf.New(mbuf.Options{Name: "incast", Frames: 32768, CacheSize: 128})
	require.NoError(t, err)
	defer pool.Close()
	clk := clock.NewVirtual(1_000_000)

	tEnd, tSide, err := mem.NewPair(pool, mem.PairOptions{Name: "incast-target", Size: 4096})
	require.NoError(t, err)
	swEnd, swSide, err := mem.NewPair(pool, mem.PairOptions{Name: "incast-uplink", Size: 8192})
	require.NoError(t, err)
	prof, err := fabric.ParseProfile("rate=10gbit,queue=4096,delay=2us")
	require.NoError(t, err)
	fab, err := fabric.New(fabric.Options{Name: "incast", A: swSide, B: tSide, Pool: pool, AtoB: prof, Seed: 1})
	require.NoError(t, err)

	targetIP := netip.MustParseAddr("198.18.1.1")
	mem0 := make([]byte, initiators*perInit*msg)
	tgt, err := New(Options{
		Transport: rt.Options{Name: "target", Port: tEnd, Pool: pool, Clock: clk, LocalIP: targetIP, MaxConns: initiators, Seed: 99},
		IncastCap: capBytes,
	})
	require.NoError(t, err)
	region, err := tgt.Register(mem0, RemoteWrite)
	require.NoError(t, err)

	sw := &incastSwitch{pool: pool, up: swEnd, buf: make([]mbuf.Handle, 64)}
	var inits []*Endpoint
	var ports []port.Port
	src := pattern(3, perInit*msg)
	for i := range initiators {
		a, b, err := mem.NewPair(pool, mem.PairOptions{Name: fmt.Sprintf("incast-%d", i), Size: 2048})
		require.NoError(t, err)
		ports = append(ports, a, b)
		sw.downs = append(sw.downs, b)
		sw.macs = append(sw.macs, [6]byte(a.Info().MAC))
		ep, err := New(Options{Transport: rt.Options{Name: fmt.Sprintf("i%d", i), Port: a, Pool: pool, Clock: clk,
			LocalIP: netip.AddrFrom4([4]byte{198, 18, 2, byte(i + 1)}), MaxConns: 2, Seed: uint64(i)}})
		require.NoError(t, err)
		r, err := ep.Register(src, 0)
		require.NoError(t, err)
		c, err := ep.Open(rt.PeerAddr{MAC: [6]byte(tEnd.Info().MAC), IP: targetIP}, ConnOptions{Ordered: true})
		require.NoError(t, err)
		for k := range perInit {
			off := uint64((i*perInit + k) * msg)
			_, err := c.Push(Op{Local: r, LocalAddr: uint64(k * msg), Len: msg, Remote: wire.RegionRef{Key: region.Key, Addr: off}, Tag: uint64(k), Solicit: SolicitAlways})
			require.NoError(t, err)
		}
		inits = append(inits, ep)
	}

	done := make([]int, initiators)
	total, maxHeld := 0, uint64(0)
	halfwayMin := -1
	cq := make([]Completion, 16)
	poll := func() int {
		now := clk.Now()
		w := 0
		for _, ep := range inits {
			w += ep.Poll(now)
		}
		w += sw.Poll(now) + fab.Poll(now) + tgt.Poll(now)
		if h := fab.Stats().AtoB.Held; h > maxHeld {
			maxHeld = h
		}
		for i, ep := range inits {
			n := ep.Completions(cq)
			for _, c := range cq[:n] {
				require.Equal(t, StatusOK, c.Status)
			}
			done[i] += n
			total += n
		}
		if halfwayMin < 0 && total >= initiators*perInit/2 {
			halfwayMin = done[0]
			for _, d := range done {
				halfwayMin = min(halfwayMin, d)
			}
		}
		return w
	}
	end := clk.Now().Add(5 * time.Second)
	for total < initiators*perInit {
		require.True(t, clk.Now() < end, "incast did not finish: %d of %d done (%v)", total, initiators*perInit, done)
		if poll() > 0 {
			continue
		}
		next := clk.Now().Add(time.Microsecond)
		for _, ep := range append([]*Endpoint{tgt}, inits...) {
			if d, ok := ep.NextDeadline(); ok && d > clk.Now() && d < next {
				next = d
			}
		}
		if d, ok := fab.NextDeadline(); ok && d > clk.Now() && d < next {
			next = d
		}
		require.NoError(t, clk.Set(next))
	}
	st := tgt.Stats()
	fs := fab.Stats().AtoB
	t.Logf("incast 16:1: %v virtual, target granted at most %d bytes (cap %d), queue toward the target held at most %d frames, tail drops %d, reorder waits %d",
		clk.Now().Sub(1_000_000), st.GrantedMax, capBytes, maxHeld, fs.QueueFull, st.ReorderWaits)
	require.LessOrEqual(t, st.GrantedMax, uint64(capBytes), "grants within the incast cap")
	// The data in flight toward the target is what was granted: the queue
	// holds at most that many segments plus the small push requests (all
	// posted at once), ACKs and the probes of initiators that wait for
	// their grants (rt.Conn.SetAwaiting) — against 6 MiB (thousands of
	// frames) had every initiator pushed at once.
	seg := uint64(tgt.Segment())
	bound := capBytes/seg + initiators*perInit + 3*initiators
	require.LessOrEqual(t, maxHeld, bound, "queue toward the target bounded by the cap")
	require.Zero(t, fs.QueueFull, "no tail drops")
	require.Positive(t, halfwayMin, "every initiator completed something by the halfway point")
	for i := range initiators {
		for k := range perInit {
			off := (i*perInit + k) * msg
			require.True(t, bytes.Equal(src[k*msg:(k+1)*msg], mem0[off:off+msg]), "initiator %d push %d", i, k)
		}
	}

	now := clk.Now()
	for _, ep := range inits {
		ep.Stop(now)
		require.NoError(t, ep.Close())
	}
	tgt.Stop(now)
	require.NoError(t, tgt.Close())
	fab.Stop(now)
	require.NoError(t, fab.Close())
	for _, p := range append(ports, tEnd, tSide, swEnd, swSide) {
		require.NoError(t, p.Close())
	}
	require.Zero(t, pool.InUse())
}
