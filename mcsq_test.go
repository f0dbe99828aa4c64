package peregrine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/peregrine-net/peregrine/core/lcore"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/fabric"
	"github.com/peregrine-net/peregrine/pmd"
)

// mqNet is an initiator with Options.MCSQ and n targets, each with a
// listener whose connections are taken and dropped, on an emulated switch
// (its own loop) that forwards by IP.
type mqNet struct {
	init    *Endpoint
	targets []*Endpoint
	sw      *fabric.Switch
}

func newMQNet(t *testing.T, h *Host, n int, init, target Options) *mqNet {
	t.Helper()
	name := fmt.Sprintf("q%d", pairSeq.Add(1))
	if init.Poll == PollLoop && target.Poll == PollLoop {
		init.Poll, target.Poll = testPoll, testPoll
	}
	init.MCSQ = true
	net := &mqNet{}
	var ips []netip.Addr
	var sides []port.Port
	for i := range n + 1 {
		ip := netip.AddrFrom4([4]byte{198, 18, 1, byte(i + 1)})
		o := target
		if i == 0 {
			o = init
		}
		o.IP = ip
		ep, err := h.Open(fmt.Sprintf("mem:%s-%d/0", name, i), o)
		if err != nil {
			t.Fatal(err)
		}
		side, err := pmd.Open(h.h.env, fmt.Sprintf("mem:%s-%d/1", name, i))
		if err != nil {
			t.Fatal(err)
		}
		ips, sides = append(ips, ip), append(sides, side)
		if i == 0 {
			net.init = ep
			continue
		}
		net.targets = append(net.targets, ep)
		listenForQueues(t, ep)
	}
	var err error
	if net.sw, err = fabric.NewSwitch(h.h.pool, fabric.SwitchOptions{Name: name, IPs: ips, Ports: sides}); err != nil {
		t.Fatal(err)
	}
	loop, err := lcore.New(lcore.Options{Name: name, CPU: -1, Clock: h.h.clock, Idle: lcore.IdlePolicy{Mode: lcore.IdleAdaptive}, Stages: []lcore.Stage{net.sw}})
	if err == nil {
		err = loop.Start()
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Endpoints first (their frames come home), then the switch.
		for _, ep := range append([]*Endpoint{net.init}, net.targets...) {
			_ = ep.Close()
		}
		loop.Stop()
		if err := loop.Wait(); err != nil {
			t.Error(err)
		}
		_ = net.sw.Close()
		for _, pt := range sides {
			_ = pt.Close()
		}
		if n := h.h.pool.InUse(); n != 0 {
			t.Errorf("pool: %d frames in use after everything closed", n)
		}
	})
	return net
}

// listenForQueues makes ep a send queue's peer: a listener whose
// connections (the queue's: nothing to read on them) are taken and dropped
// until ep closes.
func listenForQueues(t *testing.T, ep *Endpoint) {
	t.Helper()
	l, err := ep.Listen(ConnOptions{RecvSlots: 1, MaxMessage: 64})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			if _, err := l.Accept(context.Background()); err != nil {
				return
			}
		}
	}()
}

// fill writes a pattern of WR i into b.
func fill(b []byte, i int) {
	for k := range b {
		b[k] = byte(i*7 + k)
	}
}

// One DC (or RC) queue pushes to three targets: every WR completes exactly
// once, each target holds the right bytes, and a pull reads them back.
func TestSendQueuePushesToThreeTargets(t *testing.T) {
	eachPoll(t, func(t *testing.T) {
		for _, kind := range []SQKind{DC, RC} {
			t.Run(kind.String(), func(t *testing.T) { testSendQueueThreeTargets(t, kind) })
		}
	})
}

func testSendQueueThreeTargets(t *testing.T, kind SQKind) {
	h := testHost(t, HostOptions{})
	net := newMQNet(t, h, 3, Options{}, Options{})
	// DC: fewer SQs than targets, which they take turns to serve; RC: one
	// each.
	sqs := 2
	if kind == RC {
		sqs = 3
	}
	sq, err := net.init.NewSendQueue(SendQueueOptions{Kind: kind, SQs: sqs, Depth: 64})
	if err != nil {
		t.Fatal(err)
	}
	const count, size = 96, 512
	src := make([]byte, count*size)
	for i := range count {
		fill(src[i*size:(i+1)*size], i)
	}
	local, err := net.init.Register(src, 0)
	if err != nil {
		t.Fatal(err)
	}
	var regions []*Region
	for _, tg := range net.targets {
		r, err := tg.Register(make([]byte, count*size), RemoteWrite|RemoteRead)
		if err != nil {
			t.Fatal(err)
		}
		regions = append(regions, r)
	}
	cq, err := NewCompletionQueue(128)
	if err != nil {
		t.Fatal(err)
	}
	ops := make([]Op, count)
	ctx := ctxT(t)
	// Runs of 8 WRs per target: with fewer DC SQs than targets, each run
	// may take an SQ from another target (a connect; the connection it
	// leaves lingers closing at both ends).
	at := func(i int) int { return i / 8 % 3 }
	for i := range count {
		k := at(i)
		ops[i].Tag, ops[i].CQ = uint64(i), cq
		for {
			err := sq.PushAsync(&ops[i], net.targets[k].Addr(), local, i*size, size, regions[k].Remote(uint64(i*size)))
			if err == nil {
				break
			}
			if !errors.Is(err, ErrBusy) {
				t.Fatalf("push %d: %v", i, err)
			}
			runtime.Gosched() // the queue is full: its completions come
		}
	}
	seen := make([]int, count)
	out := make([]*Op, 16)
	for got := 0; got < count; {
		n, err := cq.Wait(ctx, out)
		if err != nil {
			t.Fatalf("after %d completions: %v", got, err)
		}
		for _, op := range out[:n] {
			if _, err := op.Result(); err != nil {
				t.Fatalf("push %d: %v", op.Tag, err)
			}
			seen[op.Tag]++
		}
		got += n
	}
	for i, c := range seen {
		if c != 1 {
			t.Fatalf("push %d completed %d times", i, c)
		}
	}
	for i := range count {
		k := at(i)
		if !bytes.Equal(regions[k].Bytes()[i*size:(i+1)*size], src[i*size:(i+1)*size]) {
			t.Fatalf("push %d: target %d holds other bytes", i, k)
		}
	}
	back, err := net.init.Register(make([]byte, size), 0)
	if err != nil {
		t.Fatal(err)
	}
	for k, tg := range net.targets {
		i := 8 * k // a WR that went to target k
		if err := sq.Pull(ctx, tg.Addr(), back, 0, size, regions[k].Remote(uint64(i*size))); err != nil {
			t.Fatalf("pull from target %d: %v", k, err)
		}
		if !bytes.Equal(back.Bytes(), src[i*size:(i+1)*size]) {
			t.Fatalf("pull from target %d: other bytes", k)
		}
	}
	if err := sq.Close(); err != nil {
		t.Fatal(err)
	}
	if err := sq.Push(ctx, net.targets[0].Addr(), local, 0, size, regions[0].Remote(0)); !errors.Is(err, ErrClosed) {
		t.Fatalf("push after Close: %v, want ErrClosed", err)
	}
}

// An ordered queue completes in posting order, whatever the targets.
func TestSendQueueOrderedCompletions(t *testing.T) {
	eachPoll(t, func(t *testing.T) {
		h := testHost(t, HostOptions{})
		net := newMQNet(t, h, 3, Options{}, Options{})
		sq, err := net.init.NewSendQueue(SendQueueOptions{Ordered: true, SQs: 3, Depth: 32})
		if err != nil {
			t.Fatal(err)
		}
		if !sq.Ordered() {
			t.Fatal("Ordered() is false")
		}
		// Sizes that differ a lot, so that unordered completions would
		// come out of posting order.
		sizes := []int{16 << 10, 64, 4 << 10}
		local, err := net.init.Register(make([]byte, 16<<10), 0)
		if err != nil {
			t.Fatal(err)
		}
		var regions []*Region
		for _, tg := range net.targets {
			r, err := tg.Register(make([]byte, 16<<10), RemoteWrite)
			if err != nil {
				t.Fatal(err)
			}
			regions = append(regions, r)
		}
		cq, err := NewCompletionQueue(32)
		if err != nil {
			t.Fatal(err)
		}
		const count = 150
		ops := make([]Op, 32)
		ctx := ctxT(t)
		out := make([]*Op, 32)
		next, posted, free := 0, 0, make([]*Op, 0, len(ops))
		for i := range ops {
			free = append(free, &ops[i])
		}
		for next < count {
			for posted < count && len(free) > 0 {
				op := free[len(free)-1]
				k := posted % 3
				op.Tag, op.CQ = uint64(posted), cq
				if err := sq.PushAsync(op, net.targets[k].Addr(), local, 0, sizes[k], regions[k].Remote(0)); err != nil {
					t.Fatalf("push %d: %v", posted, err)
				}
				free = free[:len(free)-1]
				posted++
			}
			n, err := cq.Wait(ctx, out)
			if err != nil {
				t.Fatal(err)
			}
			for _, op := range out[:n] {
				if _, err := op.Result(); err != nil {
					t.Fatalf("push %d: %v", op.Tag, err)
				}
				if op.Tag != uint64(next) {
					t.Fatalf("completion %d is push %d: out of posting order", next, op.Tag)
				}
				next++
				free = append(free, op)
			}
		}
	})
}

// A target that dies ends the WRs for it with ErrPeerGone — those in
// flight, and later ones at once until Reset — and the others' go on.
func TestSendQueueDeadTarget(t *testing.T) {
	eachPoll(t, func(t *testing.T) {
		h := testHost(t, HostOptions{})
		// The default retry limit: with 4, a live target whose loop a
		// loaded machine kept off its CPU for a few RTOs was given up too
		// (its SQ failed "unreachable"); the dead one is found either way.
		net := newMQNet(t, h, 3, Options{}, Options{})
		sq, err := net.init.NewSendQueue(SendQueueOptions{SQs: 3})
		if err != nil {
			t.Fatal(err)
		}
		local, err := net.init.Register(make([]byte, 1024), 0)
		if err != nil {
			t.Fatal(err)
		}
		var remotes []RemoteAddr
		for _, tg := range net.targets {
			r, err := tg.Register(make([]byte, 1024), RemoteWrite)
			if err != nil {
				t.Fatal(err)
			}
			remotes = append(remotes, r.Remote(0))
		}
		ctx := ctxT(t)
		round := func() []error {
			var ops [3]Op
			errs := make([]error, 3)
			for k, tg := range net.targets {
				if err := sq.PushAsync(&ops[k], tg.Addr(), local, 0, 1024, remotes[k]); err != nil {
					t.Fatal(err)
				}
			}
			for k := range ops {
				_, errs[k] = ops[k].Wait(ctx)
			}
			return errs
		}
		for k, err := range round() {
			if err != nil {
				t.Fatalf("target %d alive: %v", k, err)
			}
		}
		dead := net.targets[1].Addr()
		if err := net.targets[1].Close(); err != nil {
			t.Fatal(err)
		}
		for r := range 2 { // the WR that finds it dead, then one refused at once
			for k, err := range round() {
				switch {
				case k == 1 && !errors.Is(err, ErrPeerGone):
					t.Fatalf("round %d: push to the dead target: %v, want ErrPeerGone", r, err)
				case k != 1 && err != nil:
					t.Fatalf("round %d: push to live target %d: %v", r, k, err)
				}
			}
		}
		var pe *Error
		if err := sq.Push(ctx, dead, local, 0, 16, remotes[1]); !errors.As(err, &pe) || pe.Op != "push" || pe.Status != StatusPeerGone {
			t.Fatalf("blocking push to the dead target: %#v, want an *Error for push with StatusPeerGone", err)
		}
		if err := sq.Reset(dead); err != nil {
			t.Fatal(err)
		}
		if err := sq.Close(); err != nil {
			t.Fatal(err)
		}
		if n := sq.q.inflight.Load(); n != 0 {
			t.Fatalf("%d operations in flight after Close", n)
		}
	})
}

// A blocking post whose context ends returns at once, both while it waits
// for room and once its WR is out; closing the endpoint ends the rest, and
// every slot and frame comes back.
func TestSendQueueCancelMidPost(t *testing.T) {
	eachPoll(t, func(t *testing.T) {
		h := testHost(t, HostOptions{})
		// A patient initiator: WRs to a station nobody answers for stay
		// in flight until cancelled or closed.
		net := newMQNet(t, h, 1, Options{RetryLimit: 200}, Options{})
		sq, err := net.init.NewSendQueue(SendQueueOptions{Depth: 2, SQs: 2})
		if err != nil {
			t.Fatal(err)
		}
		local, err := net.init.Register(make([]byte, 256), 0)
		if err != nil {
			t.Fatal(err)
		}
		nowhere := Addr{IP: netip.MustParseAddr("198.18.1.99"), MAC: net.targets[0].Addr().MAC}
		remote := RemoteAddr{Key: 1}

		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- sq.Push(ctx, nowhere, local, 0, 256, remote) }()
		for sq.q.inflight.Load() == 0 {
			runtime.Gosched() // until the push is posted
		}
		cancel()
		if err := <-done; !errors.Is(err, ErrCancelled) || !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled push: %v, want ErrCancelled and context.Canceled", err)
		}
		// Its WR runs on: one slot of two stays taken. Fill the other, and a
		// blocking post waits for room until its context ends.
		var op Op
		if err := sq.PushAsync(&op, nowhere, local, 0, 256, remote); err != nil {
			t.Fatal(err)
		}
		var busy Op
		if err := sq.PushAsync(&busy, nowhere, local, 0, 256, remote); !errors.Is(err, ErrBusy) {
			t.Fatalf("async post to a full queue: %v, want ErrBusy", err)
		}
		ctx2, cancel2 := context.WithCancel(context.Background())
		go func() { done <- sq.Push(ctx2, nowhere, local, 0, 256, remote) }()
		for sq.q.inflight.Load() != 3 {
			runtime.Gosched() // until it waits for room
		}
		cancel2()
		if err := <-done; !errors.Is(err, ErrCancelled) || !errors.Is(err, context.Canceled) {
			t.Fatalf("push waiting for room: %v, want ErrCancelled and context.Canceled", err)
		}
		if err := net.init.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := op.Wait(ctxT(t)); !errors.Is(err, ErrClosed) {
			t.Fatalf("in flight when the endpoint closed: %v, want ErrClosed", err)
		}
		if err := sq.Close(); err != nil {
			t.Fatal(err)
		}
		if n, free := sq.q.inflight.Load(), sq.q.free.Len(); n != 0 || free != len(sq.q.slots) {
			t.Fatalf("after the endpoint closed: %d in flight, %d of %d slots free", n, free, len(sq.q.slots))
		}
		if err := sq.PushAsync(&op, nowhere, local, 0, 256, remote); !errors.Is(err, ErrClosed) {
			t.Fatalf("post after Close: %v, want ErrClosed", err)
		}
	})
}

// Bad posts and options are refused with ErrInvalid, before anything runs.
func TestSendQueueRefusals(t *testing.T) {
	h := testHost(t, HostOptions{})
	plain, other := pair(t, h, Options{}, Options{MCSQ: true})
	t.Cleanup(func() { _ = plain.Close(); _ = other.Close() })
	if _, err := plain.NewSendQueue(SendQueueOptions{}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("no Options.MCSQ: %v, want ErrInvalid", err)
	}
	if _, err := other.NewSendQueue(SendQueueOptions{SQs: 40}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("80 connections of 64: %v, want ErrInvalid", err)
	}
	sq, err := other.NewSendQueue(SendQueueOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := other.Register(make([]byte, 64), 0)
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := plain.Register(make([]byte, 64), 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	for name, err := range map[string]error{
		"no peer":        sq.Push(ctx, Addr{}, r, 0, 8, RemoteAddr{}),
		"foreign region": sq.Push(ctx, plain.Addr(), foreign, 0, 8, RemoteAddr{}),
		"span":           sq.Pull(ctx, plain.Addr(), r, 60, 8, RemoteAddr{}),
		"nil op":         sq.PushAsync(nil, plain.Addr(), r, 0, 8, RemoteAddr{}),
	} {
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

// Posts and completions with the caller's buffers allocate nothing, blocking
// or through a completion queue (the target's loop counted too).
func TestSendQueueDoesNotAllocate(t *testing.T) {
	eachPoll(t, func(t *testing.T) {
		h := testHost(t, HostOptions{})
		a, b := pair(t, h, Options{MCSQ: true}, Options{})
		t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
		listenForQueues(t, b)
		// Connections kept: a reconnect allocates (once per connect).
		sq, err := a.NewSendQueue(SendQueueOptions{IdleTimeout: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		local, _ := a.Register(make([]byte, 1024), 0)
		remote, _ := b.Register(make([]byte, 1024), RemoteWrite|RemoteRead)
		cq, err := NewCompletionQueue(8)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		peer, dst := b.Addr(), remote.Remote(0)
		var ops [2]Op
		ops[0].CQ, ops[1].CQ = cq, cq
		out := make([]*Op, 2)
		var failed error
		note := func(err error) {
			if err != nil && failed == nil {
				failed = err
			}
		}
		round := func() {
			note(sq.Push(ctx, peer, local, 0, 1024, dst))
			note(sq.Pull(ctx, peer, local, 0, 1024, dst))
			note(sq.PushAsync(&ops[0], peer, local, 0, 512, dst))
			note(sq.PullAsync(&ops[1], peer, local, 512, 512, dst))
			for got := 0; got < 2; {
				n, err := cq.Wait(ctx, out)
				note(err)
				for _, op := range out[:n] {
					_, err := op.Result()
					note(err)
				}
				got += n
			}
		}
		for range 50 {
			round()
		}
		if allocs := testing.AllocsPerRun(100, round); allocs != 0 {
			t.Fatalf("%.2f allocations per round (Push, Pull, PushAsync, PullAsync), want 0", allocs)
		}
		if failed != nil {
			t.Fatal(failed)
		}
	})
}

// An endpoint with a send queue keeps its connections: their sends,
// receives and accepts go on beside the queue's WRs. A peer without a
// listener refuses the queue (ErrRefused) until it listens and the queue
// is Reset for it.
func TestSendQueueBesideConnections(t *testing.T) {
	eachPoll(t, func(t *testing.T) {
		h := testHost(t, HostOptions{})
		a, b := pair(t, h, Options{MCSQ: true}, Options{})
		t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
		cb, ca, _ := connect(t, b, a, ConnOptions{})
		sq, err := a.NewSendQueue(SendQueueOptions{})
		if err != nil {
			t.Fatal(err)
		}
		src, err := a.Register([]byte("one-sided"), 0)
		if err != nil {
			t.Fatal(err)
		}
		dst, err := b.Register(make([]byte, 64), RemoteWrite)
		if err != nil {
			t.Fatal(err)
		}
		ctx := ctxT(t)
		if err := sq.Push(ctx, b.Addr(), src, 0, src.Len(), dst.Remote(0)); !errors.Is(err, ErrRefused) {
			t.Fatalf("push to a peer without a listener: %v, want ErrRefused", err)
		}
		buf := make([]byte, 64)
		for _, m := range []string{"to the queue's endpoint", "and back"} {
			from, to := cb, ca
			if m == "and back" {
				from, to = ca, cb
			}
			if err := from.Send(ctx, []byte(m)); err != nil {
				t.Fatalf("send %q: %v", m, err)
			}
			if n, err := to.Recv(ctx, buf); err != nil || string(buf[:n]) != m {
				t.Fatalf("recv: %q, %v; want %q", buf[:n], err, m)
			}
		}
		listenForQueues(t, b)
		if err := sq.Reset(b.Addr()); err != nil {
			t.Fatal(err)
		}
		if err := sq.Push(ctx, b.Addr(), src, 0, src.Len(), dst.Remote(0)); err != nil {
			t.Fatalf("push after Listen and Reset: %v", err)
		}
		if got := string(dst.Bytes()[:src.Len()]); got != "one-sided" {
			t.Fatalf("pushed %q", got)
		}
		if err := ca.Send(ctx, []byte("still here")); err != nil {
			t.Fatal(err)
		}
		if n, err := cb.Recv(ctx, buf); err != nil || string(buf[:n]) != "still here" {
			t.Fatalf("recv after the queue's pushes: %q, %v", buf[:n], err)
		}
	})
}

// On a sharded endpoint the send queues are dealt over the shards: each
// pushes and pulls with the regions every shard knows, and every shard of
// both ends carried connections of its own.
func TestSendQueueOnShardedEndpoint(t *testing.T) {
	h := testHost(t, HostOptions{})
	a, b := pair(t, h, Options{MCSQ: true, Shards: 2}, Options{Shards: 2})
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	listenForQueues(t, b)
	src, err := a.Register([]byte("from a sharded endpoint"), 0)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := b.Register(make([]byte, 64), RemoteWrite|RemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	for q := range 2 {
		sq, err := a.NewSendQueue(SendQueueOptions{})
		if err != nil {
			t.Fatal(err)
		}
		clear(dst.Bytes())
		if err := sq.Push(ctx, b.Addr(), src, 0, src.Len(), dst.Remote(0)); err != nil {
			t.Fatalf("queue %d: %v", q, err)
		}
		if got := string(dst.Bytes()[:src.Len()]); got != "from a sharded endpoint" {
			t.Fatalf("queue %d pushed %q", q, got)
		}
		back, err := a.Register(make([]byte, src.Len()), 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := sq.Pull(ctx, b.Addr(), back, 0, src.Len(), dst.Remote(0)); err != nil || !bytes.Equal(back.Bytes(), src.Bytes()) {
			t.Fatalf("queue %d pull: %q, %v", q, back.Bytes(), err)
		}
		if err := sq.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for i, st := range a.ShardStats() {
		if st.Dialled == 0 {
			t.Errorf("shard %d of the queues' endpoint opened no connection: %+v", i, a.ShardStats())
		}
	}
	for i, st := range b.ShardStats() {
		if st.Accepted == 0 {
			t.Errorf("shard %d of the peer accepted no connection: %+v", i, b.ShardStats())
		}
	}
}
