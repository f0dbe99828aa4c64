package mcsq_test

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/rt/txn"
	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/sched/mcsq"
	"github.com/peregrine-net/peregrine/sim"
)

func TestDCPushesCompleteInOrderPerFlow(t *testing.T) {
	for _, ordered := range []bool{true, false} {
		t.Run(map[bool]string{true: "ordered", false: "unordered"}[ordered], func(t *testing.T) {
			f := newFixture(t, sim.MCSQNetOptions{Seed: 1, Hosts: 4})
			ts := f.targets()
			dc, err := f.n.Engine.NewPool(mcsq.PoolOptions{Kind: mcsq.DC, SQs: 3})
			require.NoError(t, err)
			q, err := f.n.Engine.NewQueue(mcsq.QueueOptions{DC: dc, Ordered: ordered, Depth: 512})
			require.NoError(t, err)
			const n = 300
			for k := 1; k <= n; k++ {
				flow := uint64(k % 10)
				host := int(flow) % 4
				wr := f.push(mcsq.Flow(flow), ts[host], host, k, 64, uint64(k), flow)
				require.NoError(t, q.Post(&wr))
			}
			f.runUntilCovered(q, n, time.Second)
			checkCoverage(t, f.cqes, n, ordered)
			for _, c := range f.cqes {
				require.Equal(t, mcsq.StatusOK, c.Status, "%+v", c)
			}
			// Per flow, the hosts saw the pushes in posting order.
			last := map[uint64]uint64{}
			for _, a := range f.got {
				require.Greater(t, a.seq, last[a.flow], "flow %d: push %d after %d", a.flow, a.seq, last[a.flow])
				last[a.flow] = a.seq
			}
			require.Len(t, f.got, n)
			ps := dc.Stats()
			require.Greater(t, ps.Binds, uint64(3), "SQs rebound to other flows")
			require.Equal(t, ps.DCConnects, ps.DCDisconnects, "every connection closed once its last WR was acknowledged")
			qs := q.Stats()
			require.Equal(t, uint64(n), qs.Completed)
			require.Positive(t, qs.HOLNoSQ, "10 flows over 3 SQs wait for releases")
			if ordered {
				require.Positive(t, qs.Coalesced)
				require.Less(t, qs.CQEs, uint64(n))
			} else {
				require.Equal(t, uint64(n), qs.CQEs)
			}
		})
	}
}

// TestDCFirstDataNeedsNoRoundTrip: the first push of a DC SQ completes one
// round trip after posting (connect and data together), an RC first push
// after two (ConnOpen/ConnAccept, then the data).
func TestDCFirstDataNeedsNoRoundTrip(t *testing.T) {
	const d = 50 * time.Microsecond // per switch port: RTT = 2d
	lat := func(kind mcsq.PoolKind) time.Duration {
		f := newFixture(t, sim.MCSQNetOptions{Seed: 2, Hosts: 1, Delay: d})
		ts := f.targets()
		p, err := f.n.Engine.NewPool(mcsq.PoolOptions{Kind: kind, SQs: 4})
		require.NoError(t, err)
		var q *mcsq.Queue
		id := mcsq.Flow(1)
		if kind == mcsq.RC {
			q, err = f.n.Engine.NewQueue(mcsq.QueueOptions{RC: p})
			require.NoError(t, err)
			id = mcsq.QPN(7)
		} else {
			q, err = f.n.Engine.NewQueue(mcsq.QueueOptions{DC: p})
			require.NoError(t, err)
		}
		wr := f.push(id, ts[0], 0, 1, 64, 1, 1)
		start := f.n.Clock.Now()
		if kind == mcsq.RC {
			require.NoError(t, p.AddRC(7, f.n.Peers[0]))
		}
		require.NoError(t, q.Post(&wr))
		f.runUntilCovered(q, 1, time.Second)
		require.Equal(t, mcsq.StatusOK, f.cqes[0].Status)
		return f.n.Clock.Now().Sub(start)
	}
	dcLat, rcLat := lat(mcsq.DC), lat(mcsq.RC)
	t.Logf("first push: DC %v, RC (connect first) %v, RTT %v", dcLat, rcLat, 2*d)
	require.Less(t, dcLat, 3*d, "DC: connect and data in one round trip")
	require.GreaterOrEqual(t, rcLat, 4*d, "RC: the setup round trip, then the data's")
}

func TestBadInputIsAClearError(t *testing.T) {
	f := newFixture(t, sim.MCSQNetOptions{Seed: 3, Hosts: 1})
	ts := f.targets()
	dc, err := f.n.Engine.NewPool(mcsq.PoolOptions{Kind: mcsq.DC, SQs: 2})
	require.NoError(t, err)
	q, err := f.n.Engine.NewQueue(mcsq.QueueOptions{DC: dc, Ordered: true})
	require.NoError(t, err)

	wr := f.push(mcsq.QPN(5), ts[0], 0, 1, 64, 1, 1)
	require.ErrorIs(t, q.Post(&wr), mcsq.ErrWrongKind, "a QPN on a queue without an RC pool")
	wr = f.push(mcsq.Flow(1), 99, 0, 1, 64, 1, 1)
	require.ErrorIs(t, q.Post(&wr), mcsq.ErrUnknownTarget)
	wr = mcsq.WR{ID: mcsq.Flow(1), Op: 99}
	require.ErrorIs(t, q.Post(&wr), mcsq.ErrBadWR)
	wr = mcsq.WR{Op: mcsq.OpPush}
	require.ErrorIs(t, q.Post(&wr), mcsq.ErrBadWR, "no identifier kind")

	// A WR naming a deregistered region: its own error CQE, nothing else
	// fails, and the WR after it completes.
	gone, err := f.n.Init.Register(make([]byte, 256), 0)
	require.NoError(t, err)
	require.NoError(t, q.Post(&mcsq.WR{Op: mcsq.OpDeregister, Local: gone, Cookie: 1}))
	bad := f.push(mcsq.Flow(1), ts[0], 0, 2, 64, 2, 1)
	bad.Local, bad.LocalAddr = gone, 0
	require.NoError(t, q.Post(&bad))
	good := f.push(mcsq.Flow(1), ts[0], 0, 3, 64, 3, 1)
	require.NoError(t, q.Post(&good))
	f.runUntilCovered(q, 3, time.Second)
	checkCoverage(t, f.cqes, 3, true)
	require.Equal(t, mcsq.StatusOK, f.cqes[0].Status, "the deregister")
	require.Equal(t, mcsq.StatusLocalError, f.cqes[1].Status)
	require.ErrorIs(t, f.cqes[1].Err, mcsq.ErrLocalRegion)
	require.Equal(t, mcsq.StatusOK, f.cqes[2].Status)
	require.Zero(t, dc.Stats().SQFailures)

	require.NoError(t, q.Close())
	require.ErrorIs(t, q.Post(&good), mcsq.ErrClosed)
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	require.ErrorIs(t, q.PostWait(ctx, &good), mcsq.ErrClosed)
}

func TestLocalOperationsRunInStreamOrder(t *testing.T) {
	f := newFixture(t, sim.MCSQNetOptions{Seed: 4, Hosts: 1})
	ts := f.targets()
	dc, err := f.n.Engine.NewPool(mcsq.PoolOptions{Kind: mcsq.DC, SQs: 2})
	require.NoError(t, err)
	q, err := f.n.Engine.NewQueue(mcsq.QueueOptions{DC: dc})
	require.NoError(t, err)
	mem := make([]byte, 4096)
	// Register, a pull into it, a copy out of it, then deregister: each
	// local op waits for the WRs before it.
	require.NoError(t, q.Post(&mcsq.WR{Op: mcsq.OpRegister, Mem: mem, Cookie: 1}))
	f.runUntilCovered(q, 1, time.Second)
	require.Equal(t, mcsq.StatusOK, f.cqes[0].Status)
	reg := f.cqes[0].Region
	require.Equal(t, 4096, reg.Len)
	copy(f.n.Mem[0][128:], "pulled bytes....")
	require.NoError(t, q.Post(&mcsq.WR{ID: mcsq.Flow(9), Target: ts[0], Op: mcsq.OpPull, Local: reg, Len: 16,
		Remote: f.pushRef(0, 128), Cookie: 2}))
	require.NoError(t, q.Post(&mcsq.WR{Op: mcsq.OpCopy, Local: reg, LocalAddr: 0, Dst: reg, DstAddr: 1000, Len: 16, Cookie: 3}))
	require.NoError(t, q.Post(&mcsq.WR{Op: mcsq.OpDeregister, Local: reg, Cookie: 4}))
	f.runUntilCovered(q, 4, time.Second)
	for _, c := range f.cqes {
		require.Equal(t, mcsq.StatusOK, c.Status, "%+v", c)
	}
	require.Equal(t, "pulled bytes....", string(mem[1000:1016]), "the copy ran after the pull completed")
	require.Positive(t, q.Stats().HOLFence)
	_, err = f.n.Init.LocalSpan(reg, 0, 1)
	require.ErrorIs(t, err, txn.ErrLocalRegion)
}

func TestRCPool(t *testing.T) {
	f := newFixture(t, sim.MCSQNetOptions{Seed: 5, Hosts: 3})
	rc, err := f.n.Engine.NewPool(mcsq.PoolOptions{Kind: mcsq.RC, SQs: 8})
	require.NoError(t, err)
	for i := range 3 {
		require.NoError(t, rc.AddRC(uint32(100+i), f.n.Peers[i]))
	}
	require.ErrorIs(t, rc.AddRC(1<<24, f.n.Peers[0]), mcsq.ErrBadWR)
	q, err := f.n.Engine.NewQueue(mcsq.QueueOptions{RC: rc, Ordered: true})
	require.NoError(t, err)
	const n = 90
	for k := 1; k <= n; k++ {
		h := k % 3
		wr := f.push(mcsq.QPN(uint32(100+h)), 0, h, k, 64, uint64(k), uint64(h))
		require.NoError(t, q.Post(&wr))
	}
	wr := f.push(mcsq.QPN(55), 0, 0, n+1, 64, n+1, 55)
	require.NoError(t, q.Post(&wr))
	f.runUntilCovered(q, n+1, time.Second)
	checkCoverage(t, f.cqes, n+1, true)
	last := f.cqes[len(f.cqes)-1]
	require.Equal(t, mcsq.StatusUnknownID, last.Status)
	require.ErrorIs(t, last.Err, mcsq.ErrUnknownQPN)
	require.Len(t, f.got, n)
}

// TestFailedSQIsBlacklisted: a target that refuses connections fails its
// SQ only; its flow's WRs complete with errors without executing, the
// other flows go on, and once unblacklisted the flow works again (after
// the target relents).
func TestFailedSQIsBlacklisted(t *testing.T) {
	refuse := true
	f := newFixture(t, sim.MCSQNetOptions{Seed: 6, Hosts: 2, Accept: func(h int, _ rt.PeerAddr) bool { return h != 1 || !refuse }})
	ts := f.targets()
	// SQDepth 4: when the SQ fails, WRs are still queued behind the four
	// in the transport, and later ones wait at the head for room.
	dc, err := f.n.Engine.NewPool(mcsq.PoolOptions{Kind: mcsq.DC, SQs: 2, SQDepth: 4})
	require.NoError(t, err)
	q, err := f.n.Engine.NewQueue(mcsq.QueueOptions{DC: dc, Ordered: true})
	require.NoError(t, err)
	const n = 40
	for k := 1; k <= n; k++ {
		h := k % 2
		wr := f.push(mcsq.Flow(uint64(h)), ts[h], h, k, 64, uint64(k), uint64(h))
		require.NoError(t, q.Post(&wr))
	}
	f.runUntilCovered(q, n, time.Second)
	checkCoverage(t, f.cqes, n, true)
	okN, bad := 0, 0
	for _, c := range f.cqes {
		if c.Status == mcsq.StatusOK {
			okN += c.Count
			continue
		}
		bad++
		require.Equal(t, uint64(1), c.ID.N, "only flow 1 fails: %+v", c)
		require.Equal(t, mcsq.CauseRefused, c.Cause)
		require.Contains(t, []mcsq.Status{mcsq.StatusSQFailed, mcsq.StatusBlacklisted}, c.Status)
	}
	require.Equal(t, n/2, okN)
	require.Equal(t, n/2, bad)
	for _, a := range f.got {
		require.Zero(t, a.host, "nothing of flow 1 executed")
	}
	ps := dc.Stats()
	require.Equal(t, uint64(1), ps.Failures[mcsq.CauseRefused])
	require.Equal(t, uint64(1), ps.BlacklistAdds)
	require.Positive(t, q.Stats().Blacklisted)

	refuse = false
	dc.Unblacklist(mcsq.Flow(1))
	f.n.Step()
	wr := f.push(mcsq.Flow(1), ts[1], 1, n+1, 64, n+1, 1)
	require.NoError(t, q.Post(&wr))
	f.runUntilCovered(q, n+1, time.Second)
	require.Equal(t, mcsq.StatusOK, f.cqes[len(f.cqes)-1].Status)
	require.Equal(t, uint64(1), dc.Stats().BlacklistRemoves)
}

func TestDeadTargetFailsOnlyItsSQ(t *testing.T) {
	f := newFixture(t, sim.MCSQNetOptions{Seed: 7, Hosts: 3})
	ts := f.targets()
	rc, err := f.n.Engine.NewPool(mcsq.PoolOptions{Kind: mcsq.RC})
	require.NoError(t, err)
	for i := range 3 {
		require.NoError(t, rc.AddRC(uint32(i+1), f.n.Peers[i]))
	}
	dc, err := f.n.Engine.NewPool(mcsq.PoolOptions{Kind: mcsq.DC, SQs: 4})
	require.NoError(t, err)
	q, err := f.n.Engine.NewQueue(mcsq.QueueOptions{RC: rc, DC: dc})
	require.NoError(t, err)
	f.n.Run(func() bool { return false }, time.Millisecond) // RC connections up
	f.n.Kill(2)
	const n = 60
	for k := 1; k <= n; k++ {
		h := k % 3
		var wr = f.push(mcsq.QPN(uint32(h+1)), 0, h, k, 64, uint64(k), uint64(h))
		if k%2 == 0 {
			wr = f.push(mcsq.Flow(uint64(h)), ts[h], h, k, 64, uint64(k), uint64(h))
		}
		require.NoError(t, q.Post(&wr))
	}
	f.runUntilCovered(q, n, 5*time.Second)
	checkCoverage(t, f.cqes, n, false)
	for _, c := range f.cqes {
		if c.Status != mcsq.StatusOK {
			dead := c.ID == mcsq.QPN(3) || c.ID == mcsq.Flow(2)
			require.True(t, dead, "only host 2's identifiers fail: %+v", c)
		}
	}
	require.Equal(t, uint64(1), rc.Stats().SQFailures)
	require.Equal(t, uint64(1), dc.Stats().SQFailures)
	var bl []mcsq.BlacklistEntry
	require.Len(t, rc.Blacklist(bl), 1)
	require.Len(t, dc.Blacklist(bl), 1)
}

func (f *fixture) pushRef(host int, addr uint64) wire.RegionRef {
	return wire.RegionRef{Key: f.n.Regions[host].Key, Addr: addr}
}

// TestQueuesShareAPool: two queues feed one DC pool; an identifier is
// bound pool-wide, so the WRs both queues post for one flow reach the
// target in the order the distributor took them (queue by queue, each in
// posting order), and each queue's CQ covers exactly its own WRs.
func TestQueuesShareAPool(t *testing.T) {
	f := newFixture(t, sim.MCSQNetOptions{Seed: 13, Hosts: 2})
	ts := f.targets()
	dc, err := f.n.Engine.NewPool(mcsq.PoolOptions{Kind: mcsq.DC, SQs: 2})
	require.NoError(t, err)
	q1, err := f.n.Engine.NewQueue(mcsq.QueueOptions{DC: dc, Ordered: true})
	require.NoError(t, err)
	q2, err := f.n.Engine.NewQueue(mcsq.QueueOptions{DC: dc})
	require.NoError(t, err)
	const n = 60
	for k := 1; k <= n; k++ {
		fl := uint64(k % 4)
		h := int(fl % 2)
		q := q1
		tag := uint64(k)
		if k%2 == 0 {
			q, tag = q2, uint64(1000+k)
		}
		wr := f.push(mcsq.Flow(fl), ts[h], h, k, 32, tag, fl)
		require.NoError(t, q.Post(&wr))
	}
	var c1, c2 []mcsq.CQE
	buf := make([]mcsq.CQE, 64)
	ok := f.n.Run(func() bool {
		k := q1.Completions(buf)
		c1 = append(c1, buf[:k]...)
		k = q2.Completions(buf)
		c2 = append(c2, buf[:k]...)
		cov := 0
		for _, c := range append(append([]mcsq.CQE(nil), c1...), c2...) {
			cov += c.Count
		}
		return cov == n
	}, time.Second)
	require.True(t, ok)
	checkCoverage(t, c1, n/2, true)
	checkCoverage(t, c2, n/2, false)
	for _, c := range c2 {
		require.Greater(t, c.Cookie, uint64(1000), "q2's CQ holds q2's WRs")
	}
	// Per flow, each queue's WRs arrive in its posting order.
	last := map[[2]uint64]uint64{}
	for _, a := range f.got {
		k := [2]uint64{a.flow, a.seq / 1000}
		require.Greater(t, a.seq, last[k])
		last[k] = a.seq
	}
	require.Len(t, f.got, n)
}

// TestTupleIdentifiers: 5-tuples are DC identifiers like flow IDs: equal
// tuples share an SQ (their order kept), different ones do not.
func TestTupleIdentifiers(t *testing.T) {
	f := newFixture(t, sim.MCSQNetOptions{Seed: 14, Hosts: 1})
	ts := f.targets()
	dc, err := f.n.Engine.NewPool(mcsq.PoolOptions{Kind: mcsq.DC, SQs: 2})
	require.NoError(t, err)
	q, err := f.n.Engine.NewQueue(mcsq.QueueOptions{DC: dc, Ordered: true})
	require.NoError(t, err)
	tuple := func(port uint16) mcsq.ID {
		return mcsq.Tuple(mcsq.FiveTuple{Src: sim.HostIP(0), Dst: sim.HostIP(1), SrcPort: port, DstPort: 80, Proto: 6})
	}
	const n = 40
	for k := 1; k <= n; k++ {
		port := uint16(1000 + k%3)
		wr := f.push(tuple(port), ts[0], 0, k, 32, uint64(k), uint64(port))
		require.NoError(t, q.Post(&wr))
	}
	f.runUntilCovered(q, n, time.Second)
	checkCoverage(t, f.cqes, n, true)
	last := map[uint64]uint64{}
	for _, a := range f.got {
		require.Greater(t, a.seq, last[a.flow])
		last[a.flow] = a.seq
	}
	require.Len(t, last, 3)
	require.Contains(t, tuple(1).String(), "5-tuple")
}

// TestSends: two-sided Sends through DC SQs land in the receive WQEs the
// target posts on each new connection, in posting order per flow; a
// target that posts none fails its SQ once the RNR retries run out.
func TestSends(t *testing.T) {
	var f *fixture
	var recv [2]int
	f = newFixture(t, sim.MCSQNetOptions{Seed: 15, Hosts: 2, OnConnEvent: func(h int, ev txn.ConnEvent) {
		if ev.Kind != txn.ConnEstablished || h != 0 {
			return // host 1 never posts a receive
		}
		for k := range 8 {
			_, err := ev.Conn.PostRecv(txn.RecvWR{Local: f.n.Regions[0], LocalAddr: uint64(4096 + (recv[0]%64)*64), Len: 64, WRID: uint64(k)})
			require.NoError(t, err)
			recv[0]++
		}
	}})
	ts := f.targets()
	// An ordered pool carries Sends too (txn places them by index and
	// completes them in the connection's order): its connection gets WQEs
	// 0..7, and its one Send lands in the first.
	ord, err := f.n.Engine.NewPool(mcsq.PoolOptions{Kind: mcsq.DC, SQs: 1})
	require.NoError(t, err)
	oq, err := f.n.Engine.NewQueue(mcsq.QueueOptions{DC: ord})
	require.NoError(t, err)
	first := f.push(mcsq.Flow(9), ts[0], 0, 100, 32, 100, 9)
	first.Op = mcsq.OpSend
	require.NoError(t, oq.Post(&first))
	f.runUntilCovered(oq, 1, time.Second)
	require.Equal(t, mcsq.StatusOK, f.cqes[0].Status, "%+v", f.cqes[0])
	require.Equal(t, uint64(100), binary.LittleEndian.Uint64(f.n.Mem[0][4096:]), "the ordered pool's Send in its connection's first WQE")
	f.cqes = nil
	base := recv[0] // the next connection's WQEs start here

	dc, err := f.n.Engine.NewPool(mcsq.PoolOptions{Kind: mcsq.DC, SQs: 2, Unordered: true})
	require.NoError(t, err)
	q, err := f.n.Engine.NewQueue(mcsq.QueueOptions{DC: dc, Ordered: true})
	require.NoError(t, err)
	for k := 1; k <= 6; k++ {
		wr := f.push(mcsq.Flow(1), ts[0], 0, k, 32, uint64(k), 1)
		wr.Op = mcsq.OpSend
		require.NoError(t, q.Post(&wr))
	}
	wr := f.push(mcsq.Flow(2), ts[1], 1, 7, 32, 7, 2)
	wr.Op = mcsq.OpSend
	require.NoError(t, q.Post(&wr))
	f.runUntilCovered(q, 7, 5*time.Second)
	checkCoverage(t, f.cqes, 7, true)
	ok := 0
	for _, c := range f.cqes {
		if c.Status == mcsq.StatusOK {
			ok += c.Count
			continue
		}
		require.Equal(t, mcsq.Flow(2), c.ID, "only the flow to the host without receives fails: %+v", c)
		require.Equal(t, mcsq.CauseRetryExhausted, c.Cause)
		require.Equal(t, txn.StatusRNRRetryExceeded, c.TxnStatus)
	}
	require.Equal(t, 6, ok)
	require.Equal(t, mcsq.OpSend, f.cqes[0].Op)
	for k := range 6 {
		require.Equal(t, uint64(k+1), binary.LittleEndian.Uint64(f.n.Mem[0][4096+(base+k)*64:]), "Send %d in WQE %d", k+1, base+k)
	}
}
