package mcsq_test

import (
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

// fixture is a network (sim.MCSQNet) with a local source region on the
// initiator and a record of what every host's ULP saw.
type fixture struct {
	t     testing.TB
	n     *sim.MCSQNet
	src   []byte
	srcR  txn.Region
	got   []arrival // pushes placed at the hosts, in arrival order
	cqes  []mcsq.CQE
	buf   []mcsq.CQE
	hosts int
}

// arrival is a push as a host saw it: the WR's sequence tag and flow,
// which the test wrote into the first 16 bytes of its payload.
type arrival struct {
	host int
	seq  uint64
	flow uint64
}

func fastTransport(o *rt.Options) {
	o.MinRTO = 50 * time.Microsecond
	o.InitialRTO = 200 * time.Microsecond
	o.MaxRTO = 2 * time.Millisecond
	o.RetryLimit = 4
	o.CloseLinger = 1 * time.Millisecond
}

func newFixture(t testing.TB, o sim.MCSQNetOptions) *fixture {
	t.Helper()
	f := &fixture{t: t, buf: make([]mcsq.CQE, 256), hosts: o.Hosts}
	if o.Transport == nil {
		o.Transport = fastTransport
	}
	if o.InitiatorConns == 0 {
		o.InitiatorConns = 128 // DC SQs plus connections still closing
	}
	if o.HostConns == 0 {
		o.HostConns = 64
	}
	if o.MaxOps == 0 {
		o.MaxOps = 2048
	}
	if o.Delay == 0 {
		o.Delay = 5 * time.Microsecond
	}
	user := o.OnRequest
	o.OnRequest = func(h int, r *txn.Request) {
		if r.Kind == txn.OpPush && len(r.Data) >= 16 {
			f.got = append(f.got, arrival{host: h, seq: binary.LittleEndian.Uint64(r.Data), flow: binary.LittleEndian.Uint64(r.Data[8:])})
		}
		if user != nil {
			user(h, r)
		}
	}
	n, err := sim.NewMCSQNet(o)
	require.NoError(t, err)
	f.n = n
	f.hosts = len(n.Hosts)
	t.Cleanup(func() { require.NoError(t, n.Close()) })
	f.src = make([]byte, 1<<20)
	f.srcR, err = n.Init.Register(f.src, 0)
	require.NoError(t, err)
	return f
}

// targets adds one target per host and returns them.
func (f *fixture) targets() []mcsq.Target {
	ts := make([]mcsq.Target, f.hosts)
	for i := range ts {
		var err error
		ts[i], err = f.n.Engine.AddTarget(f.n.Peers[i])
		require.NoError(f.t, err)
	}
	return ts
}

// push builds a push WR of n bytes (n ≥ 16) whose payload starts with tag
// and flow, written into the source region at slot off.
func (f *fixture) push(id mcsq.ID, target mcsq.Target, host int, slot int, n int, tag, flow uint64) mcsq.WR {
	off := slot * 64
	binary.LittleEndian.PutUint64(f.src[off:], tag)
	binary.LittleEndian.PutUint64(f.src[off+8:], flow)
	return mcsq.WR{ID: id, Target: target, Op: mcsq.OpPush, Local: f.srcR, LocalAddr: uint64(off), Len: n,
		Remote: wire.RegionRef{Key: f.n.Regions[host].Key, Addr: uint64(slot % 512 * 64)}, Cookie: tag}
}

// drain moves every CQE of q into f.cqes.
func (f *fixture) drain(q *mcsq.Queue) {
	for {
		k := q.Completions(f.buf)
		f.cqes = append(f.cqes, f.buf[:k]...)
		if k < len(f.buf) {
			return
		}
	}
}

// covered counts the WRs the collected CQEs cover.
func (f *fixture) covered() int {
	n := 0
	for _, c := range f.cqes {
		n += c.Count
	}
	return n
}

// runUntilCovered runs until n WRs are covered by CQEs of q.
func (f *fixture) runUntilCovered(q *mcsq.Queue, n int, limit time.Duration) {
	f.t.Helper()
	ok := f.n.Run(func() bool { f.drain(q); return f.covered() >= n }, limit)
	require.True(f.t, ok, "only %d of %d WRs covered after %v", f.covered(), n, limit)
}

// checkCoverage verifies every WR 1..n is covered by exactly one CQE, and,
// if ordered, that CQEs come in posting order.
func checkCoverage(t testing.TB, cqes []mcsq.CQE, n int, ordered bool) {
	t.Helper()
	seen := make([]int, n+1)
	var last uint64
	for k, c := range cqes {
		require.GreaterOrEqual(t, c.Count, 1, "CQE %d covers nothing", k)
		lo := c.Seq - uint64(c.Count) + 1
		require.GreaterOrEqual(t, lo, uint64(1))
		require.LessOrEqual(t, c.Seq, uint64(n), "CQE %d names seq %d beyond the %d posted", k, c.Seq, n)
		if ordered {
			require.Equal(t, last+1, lo, "ordered CQ: CQE %d covers %d..%d after %d", k, lo, c.Seq, last)
			last = c.Seq
		}
		for s := lo; s <= c.Seq; s++ {
			seen[s]++
		}
	}
	for s := 1; s <= n; s++ {
		require.Equal(t, 1, seen[s], "WR seq %d covered %d times", s, seen[s])
	}
}
