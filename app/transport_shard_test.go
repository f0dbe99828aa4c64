package app_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/app"
	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/lcore"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/rt"
)

// TestShardedTransport: an initiator and a target of 2 and 4 shards, each
// shard on its own loop and queue of a mem pair, complete a counted
// workload of pushes and pulls exactly once (every operation completes,
// none fails, ordered connections complete in order, every byte is
// right) and leak nothing. With steer=queue the connections spread over
// every shard of both sides and no frame crosses shards: each endpoint
// received exactly the frames of its own queue, and none named a CID it
// did not have. With steer=hash every reply lands on one initiator queue
// and the other shards' frames are handed over in software, counted, and
// still delivered once. Either way target shard i accepts the two
// connections of initiator shard i: the one its ConnOpens' source CID
// names.
func TestShardedTransport(t *testing.T) {
	for _, n := range []int{2, 4} {
		for _, steer := range []string{"queue", "hash"} {
			t.Run(fmt.Sprintf("shards=%d/steer=%s", n, steer), func(t *testing.T) { testSharded(t, n, steer) })
		}
	}
}

func testSharded(t *testing.T, n int, steer string) {
	count := uint64(300 * n)
	name := fmt.Sprintf("sh%d%s", n, steer)
	ports := []string{fmt.Sprintf("mem:%s/0?queues=%d&steer=%s", name, n, steer), fmt.Sprintf("mem:%s/1?queues=%d&steer=%s", name, n, steer)}
	p, err := app.New(app.Options{
		Pool:   mbuf.Options{Name: t.Name(), Frames: 16384},
		Ports:  ports,
		Lcores: unpinned(2 * n),
		Idle:   lcore.IdlePolicy{Mode: lcore.IdleSleep},
		Clock:  clock.NewReal(),
	})
	require.NoError(t, err)
	iniLoops, tgtLoops := make([]int, n), make([]int, n)
	for i := range n {
		iniLoops[i], tgtLoops[i] = i, n+i
	}
	sizes := []int{64, 4096}
	targetIP, initIP := netip.MustParseAddr("198.18.0.6"), netip.MustParseAddr("198.18.0.5")
	tgt, err := p.AddShardedTransport(app.TransportOptions{Role: "target", Port: 1, LocalIP: targetIP, Window: 8, Sizes: sizes, Seed: 1}, tgtLoops)
	require.NoError(t, err)
	ini, err := p.AddShardedTransport(app.TransportOptions{Role: "initiator", Port: 0, LocalIP: initIP, Window: 8, Sizes: sizes,
		RegionKey: tgt.Shards[0].Region.Key, Peer: rt.PeerAddr{MAC: [6]byte(p.Port(1).Info().MAC), IP: targetIP}, Conns: 2 * n, PullEvery: 4, Count: count, Seed: 2}, iniLoops)
	require.NoError(t, err)
	for _, s := range tgt.Shards {
		require.Equal(t, tgt.Shards[0].Region.Key, s.Region.Key, "every target shard serves the key the initiator was given")
	}
	require.NoError(t, p.Start())
	done := func() bool { s := ini.LoadStats(); return s.Completed+s.Failed >= count }
	_, _, err = p.Run(context.Background(), app.RunOptions{Duration: bound, Done: done})
	require.NoError(t, err)
	require.True(t, ini.Drain(), "every outstanding operation completed")
	require.True(t, tgt.Drain())
	require.NoError(t, p.StopLoops())

	ls := ini.LoadStats()
	require.Equal(t, count, ls.Completed, "every operation completed once")
	require.Zero(t, ls.Failed+ls.BadData+ls.OutOfOrder, "%+v", ls)
	pushes, wrong := tgt.Pushes()
	require.NotZero(t, pushes)
	require.Zero(t, wrong, "every push's bytes are right")
	for i, s := range ini.Shards {
		require.NotZero(t, s.Load.Stats().Completed, "initiator shard %d completed operations", i)
	}
	// Setup picks the shard on both sides: the initiator deals its
	// connections round robin, and the target shard that accepts one is
	// the one its opener's CID names, whichever queue the ConnOpen took.
	for i, s := range tgt.Shards {
		require.Equal(t, uint64(2), s.Endpoint.Transport().Stats().ConnAccepted, "target shard %d accepted the connections of initiator shard %d", i, i)
	}
	for side, st := range map[string]*app.ShardedTransport{"initiator": ini, "target": tgt} {
		for i, s := range st.Shards {
			ts := s.Endpoint.Transport().Stats()
			require.Zero(t, ts.RxUnknownCID+ts.RxStaleCID, "%s shard %d received no frame of another shard's connection", side, i)
			c := st.Steer.Stats(i)
			require.Equal(t, c.Received-c.SteeredOut-c.HandoffDropped+c.SteeredIn, ts.RxFrames,
				"%s shard %d: its endpoint received what its queue kept and what other shards handed it (%+v)", side, i, c)
		}
	}
	if steer == "queue" {
		for side, st := range map[string]*app.ShardedTransport{"initiator": ini, "target": tgt} {
			require.Zero(t, st.Steer.Total().SteeredOut, "%s: the sender's queue i reaches the peer's shard i", side)
			qs := p.Port(map[string]int{"initiator": 0, "target": 1}[side]).Stats().Queues
			for i, s := range st.Shards {
				require.Equal(t, qs[i].RxPackets, s.Endpoint.Transport().Stats().RxFrames, "%s shard %d got all of queue %d and nothing else", side, i, i)
			}
		}
		for i, s := range tgt.Shards {
			require.NotZero(t, s.Endpoint.Stats().RequestsDelivered, "target shard %d served its paired initiator shard's connections", i)
		}
	} else {
		require.NotZero(t, ini.Steer.Total().SteeredOut, "replies on one queue are handed to their shards")
		require.Zero(t, ini.Steer.Total().HandoffDropped+tgt.Steer.Total().HandoffDropped)
	}
	require.NoError(t, p.Close())
	require.Zero(t, p.Pool().InUse(), "every frame is back in the pool")
}

// TestShardedTransportRefusesBadOptions: too many shards for the port's
// queues, fewer connections or operations than shards: refused naming
// the field and the fix.
func TestShardedTransportRefusesBadOptions(t *testing.T) {
	for _, tc := range []struct {
		field, want string
		loops       []int
		edit        func(o *app.TransportOptions)
	}{
		{"Shards", "queues=4", []int{0, 1, 0, 1}, func(*app.TransportOptions) {}},
		{"Shards", "use 1..256", nil, func(*app.TransportOptions) {}},
		{"Conns", "use 2 or more", []int{0, 1}, func(o *app.TransportOptions) { o.Conns = 1 }},
		{"Count", "use 2 or more", []int{0, 1}, func(o *app.TransportOptions) { o.Count = 1 }},
	} {
		p, err := app.New(app.Options{Pool: mbuf.Options{Name: t.Name(), Frames: 4096}, Ports: []string{"mem:shbad/0?queues=2", "mem:shbad/1?queues=2"}, Lcores: unpinned(2), Clock: clock.NewReal()})
		require.NoError(t, err)
		o := app.TransportOptions{Role: "initiator", Window: 4, Sizes: []int{64}, LocalIP: netip.MustParseAddr("198.18.0.5"), Conns: 4,
			Peer: rt.PeerAddr{IP: netip.MustParseAddr("198.18.0.6")}}
		tc.edit(&o)
		_, err = p.AddShardedTransport(o, tc.loops)
		var fe *app.FieldError
		require.True(t, errors.As(err, &fe), "%s: %v", tc.field, err)
		require.Equal(t, tc.field, fe.Field())
		require.ErrorContains(t, err, tc.want)
		require.NoError(t, p.Stop())
	}
}
