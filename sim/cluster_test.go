package sim

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/fabric"
)

// rtCluster is a cluster of bare rt endpoints that record what they get.
type rtCluster struct {
	c    *Cluster
	eps  []*rt.Endpoint
	got  [][]uint64 // per node: the sequence numbers delivered to it
	from [][]int    // per node: the sender of each delivery
	ev   [][]rt.Event
}

func newRTCluster(t *testing.T, nodes int, faults []Fault, tweak func(*ClusterConfig)) *rtCluster {
	t.Helper()
	x := &rtCluster{eps: make([]*rt.Endpoint, nodes), got: make([][]uint64, nodes), from: make([][]int, nodes), ev: make([][]rt.Event, nodes)}
	cfg := ClusterConfig{Seed: 7, Start: 1_000_000, Check: 2, Faults: faults, Frames: 4096}
	for range nodes {
		cfg.Nodes = append(cfg.Nodes, NodeConfig{Transport: rt.Options{MaxConns: 8}, Make: func(n *Node, o rt.Options) (Peer, error) {
			e, err := rt.NewEndpoint(o)
			if err != nil {
				return nil, err
			}
			i := n.Index
			x.eps[i] = e
			e.SetULP(&testULP{
				deliver: func(c *rt.Conn, h *wire.Header, p []byte) rt.Verdict {
					x.got[i] = append(x.got[i], binary.BigEndian.Uint64(p))
					x.from[i] = append(x.from[i], int(c.Peer().IP.As4()[3])-1)
					return rt.Accept
				},
				event: func(ev rt.Event) { x.ev[i] = append(x.ev[i], ev) },
			})
			return e, nil
		}})
	}
	if tweak != nil {
		tweak(&cfg)
	}
	c, err := NewCluster(cfg)
	require.NoError(t, err)
	x.c = c
	t.Cleanup(func() { require.NoError(t, c.Close(), "Close finds no leak") })
	return x
}

func (x *rtCluster) open(t *testing.T, from, to int) *rt.Conn {
	t.Helper()
	c, err := x.eps[from].Open(x.c.Nodes[to].Addr())
	require.NoError(t, err)
	require.NoError(t, x.c.Run(func() bool { return c.State() == rt.StateEstablished }, time.Second))
	return c
}

func send(t *testing.T, c *rt.Conn, seq uint64) {
	t.Helper()
	p := make([]byte, 16)
	binary.BigEndian.PutUint64(p, seq)
	_, err := c.Send(rt.SendHeader{Type: wire.TypePushUnsolicitedData}, p)
	require.NoError(t, err)
}

// TestClusterSwitchForwards joins four nodes through the switch: every
// node opens a connection to every other and each packet reaches the node
// it was sent to, once.
func TestClusterSwitchForwards(t *testing.T) {
	x := newRTCluster(t, 4, nil, nil)
	for from := range 4 {
		for to := range 4 {
			if from != to {
				c := x.open(t, from, to)
				send(t, c, uint64(from*10+to))
			}
		}
	}
	require.NoError(t, x.c.Run(func() bool {
		for _, e := range x.eps {
			if e.Outstanding() != 0 {
				return false
			}
		}
		return true
	}, time.Second))
	for to := range 4 {
		require.Len(t, x.got[to], 3, "node %d", to)
		for k, seq := range x.got[to] {
			require.Equal(t, uint64(to), seq%10, "delivered to the node it was sent to")
			require.Equal(t, x.from[to][k], int(seq/10), "from the node that sent it")
		}
	}
	st := x.c.Switch.Stats()
	require.Equal(t, st.Rx, st.Tx+st.Filtered+st.Unknown+st.Refused+st.QueueFull)
	require.Zero(t, st.Unknown)
}

// TestClusterLinkDownAndProfile takes a node's link down on the timeline,
// then gives it a lossy profile: the packets still arrive, after the link
// comes back, exactly once.
func TestClusterLinkDownAndProfile(t *testing.T) {
	x := newRTCluster(t, 2, []Fault{
		{At: 100 * time.Microsecond, Do: LinkDown{Node: 1, Dir: fabric.Both}},
		{At: 2 * time.Millisecond, Do: LinkUp{Node: 1, Dir: fabric.Both}},
		{At: 2 * time.Millisecond, Do: SetProfile{Node: 0, Dir: fabric.AtoB, Profile: fabric.Profile{Loss: 20}}},
	}, nil)
	c := x.open(t, 0, 1)
	require.NoError(t, x.c.Idle(200*time.Microsecond-x.c.Clock.Now().Sub(1_000_000)))
	require.True(t, x.c.Nodes[1].Link.LinkDown(fabric.Both))
	for i := range 20 {
		send(t, c, uint64(i))
	}
	require.NoError(t, x.c.Run(func() bool { return len(x.got[1]) == 20 && x.eps[0].Outstanding() == 0 }, time.Second))
	require.GreaterOrEqual(t, x.c.Clock.Now().Sub(1_000_000), 2*time.Millisecond, "nothing crossed while the link was down")
	st := x.c.Nodes[1].Link.Stats()
	require.Positive(t, st.BtoA.LinkDown, "frames to the node were lost to the link")
	require.Len(t, x.c.FaultsApplied(), 3)
}

// TestClusterPathDownAndUp takes the paths of a node's link down on the
// timeline and brings them back: nothing crosses while they are down, the
// frames sent down them are counted as the dead paths', and the packets
// arrive, exactly once, after they are back.
func TestClusterPathDownAndUp(t *testing.T) {
	x := newRTCluster(t, 2, []Fault{
		{At: 100 * time.Microsecond, Do: PathDown{Node: 0, Dir: fabric.AtoB, Path: 0}},
		{At: 100 * time.Microsecond, Do: PathDown{Node: 0, Dir: fabric.AtoB, Path: 1}},
		{At: 2 * time.Millisecond, Do: PathUp{Node: 0, Dir: fabric.AtoB, Path: 0}},
		{At: 2 * time.Millisecond, Do: PathUp{Node: 0, Dir: fabric.AtoB, Path: 1}},
	}, func(cfg *ClusterConfig) { cfg.Nodes[0].Up = fabric.Profile{Paths: 2} })
	c := x.open(t, 0, 1)
	require.NoError(t, x.c.Idle(200*time.Microsecond-x.c.Clock.Now().Sub(1_000_000)))
	require.True(t, x.c.Nodes[0].Link.PathDown(fabric.AtoB, 0))
	for i := range 20 {
		send(t, c, uint64(i))
	}
	require.NoError(t, x.c.Run(func() bool { return len(x.got[1]) == 20 && x.eps[0].Outstanding() == 0 }, time.Second))
	require.GreaterOrEqual(t, x.c.Clock.Now().Sub(1_000_000), 2*time.Millisecond, "nothing crossed while the paths were down")
	require.False(t, x.c.Nodes[0].Link.PathDown(fabric.AtoB, 0))
	st := x.c.Nodes[0].Link.Stats()
	require.Positive(t, st.AtoB.PathDownDrops, "frames from the node were lost on the dead paths")
	require.Len(t, x.c.FaultsApplied(), 4)
	require.Contains(t, x.c.FaultsApplied()[0], "path 0 down")
}

// TestClusterKillRevive kills a node with its state kept: frames to it are
// dropped and its timers stop; revived, it resumes and the transfer
// completes.
func TestClusterKillRevive(t *testing.T) {
	x := newRTCluster(t, 2, nil, nil)
	c := x.open(t, 0, 1)
	require.NoError(t, x.c.Kill(1, false))
	for i := range 5 {
		send(t, c, uint64(i))
	}
	require.NoError(t, x.c.Idle(500*time.Microsecond))
	require.Empty(t, x.got[1])
	require.Positive(t, x.c.Nodes[1].DeadDrops)
	require.NoError(t, x.c.Revive(1))
	require.NoError(t, x.c.Run(func() bool { return len(x.got[1]) == 5 && x.eps[0].Outstanding() == 0 }, time.Second))
	require.Equal(t, []uint64{0, 1, 2, 3, 4}, x.got[1])

	require.NoError(t, x.c.Kill(1, true))
	require.Nil(t, x.c.Nodes[1].Peer, "state discarded")
	require.Error(t, x.c.Revive(1), "a discarded node cannot be revived, only restarted")
}

// TestClusterRestart restarts a node with the same seed: the new
// incarnation is a fresh endpoint on the same address that a new
// connection reaches.
func TestClusterRestart(t *testing.T) {
	x := newRTCluster(t, 2, nil, nil)
	x.open(t, 0, 1)
	old := x.eps[1]
	seed := x.c.Nodes[1].Seed
	require.NoError(t, x.c.Restart(1, seed))
	require.NotSame(t, old, x.eps[1])
	require.Equal(t, 1, x.c.Nodes[1].Incarnation)
	require.Equal(t, seed, x.c.Nodes[1].Seed)
	require.Equal(t, 0, x.eps[1].Conns(), "the new incarnation has no state")
	c := x.open(t, 0, 1)
	send(t, c, 42)
	require.NoError(t, x.c.Run(func() bool { return len(x.got[1]) == 1 }, time.Second))
}

// TestClusterRecordReplay records a node's data frames and replays them
// later: the receiver sees them as duplicates and delivers nothing twice.
func TestClusterRecordReplay(t *testing.T) {
	x := newRTCluster(t, 2, nil, nil)
	c := x.open(t, 0, 1)
	rec := x.c.Record(0, func(from, _ int, f *wire.Frame) bool {
		return from == 0 && f != nil && f.Header.Type == wire.TypePushUnsolicitedData
	})
	for i := range 4 {
		send(t, c, uint64(i))
	}
	require.NoError(t, x.c.Run(func() bool { return len(x.got[1]) == 4 && x.eps[0].Outstanding() == 0 }, time.Second))
	require.Len(t, rec.Frames, 4)
	before := x.eps[1].Stats()
	require.NoError(t, Replay{From: rec, To: 1, Pick: func(i int, f *wire.Frame) bool { return i%2 == 0 }}.apply(x.c))
	require.NoError(t, x.c.Idle(time.Millisecond))
	require.Equal(t, 2, rec.Replayed)
	require.Len(t, x.got[1], 4, "replayed duplicates are not delivered again")
	require.Equal(t, before.RxDuplicate+before.RxStalePSN+2, x.eps[1].Stats().RxDuplicate+x.eps[1].Stats().RxStalePSN)
	require.EqualValues(t, 2, x.c.Switch.Stats().Injected)
}

// TestClusterDeterministic: the same seed and timeline replay the same run,
// frame for frame.
func TestClusterDeterministic(t *testing.T) {
	run := func() string {
		var b strings.Builder
		x := newRTCluster(t, 3, []Fault{
			{At: 50 * time.Microsecond, Do: SetProfile{Node: 0, Dir: fabric.Both, Profile: fabric.Profile{Loss: 10, Jitter: 5 * time.Microsecond}}},
			{At: 300 * time.Microsecond, Do: LinkDown{Node: 2, Dir: fabric.AtoB}},
			{At: 600 * time.Microsecond, Do: LinkUp{Node: 2, Dir: fabric.AtoB}},
		}, func(c *ClusterConfig) { c.Trace = &b })
		c1 := x.open(t, 0, 2)
		c2 := x.open(t, 1, 2)
		for i := range 30 {
			send(t, c1, uint64(i))
			send(t, c2, uint64(100+i))
			require.NoError(t, x.c.Idle(20*time.Microsecond))
		}
		require.NoError(t, x.c.Run(func() bool { return x.eps[0].Outstanding()+x.eps[1].Outstanding() == 0 }, time.Second))
		fmt.Fprintf(&b, "%v %v", x.got[2], x.c.Switch.Stats())
		return b.String()
	}
	a, b := run(), run()
	require.Equal(t, a, b)
	require.Contains(t, a, " tx ")
}

func TestClusterRejectsBadConfig(t *testing.T) {
	_, err := NewCluster(ClusterConfig{Nodes: []NodeConfig{{}}})
	require.Error(t, err)
	pool, err := mbuf.New(mbuf.Options{Name: "bad", Frames: 1024})
	require.NoError(t, err)
	defer pool.Close()
	_, err = NewCluster(ClusterConfig{Pool: pool, Nodes: []NodeConfig{{}, {}}, Faults: []Fault{{At: time.Millisecond}}})
	require.ErrorContains(t, err, "no action")
	require.Zero(t, pool.InUse())
}
