package peregrine

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/peregrine-net/peregrine/core/shard"
	pwire "github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/pmd"
	"github.com/peregrine-net/peregrine/pmd/netns"
	"github.com/peregrine-net/peregrine/pmd/netns/netnstest"
)

// dialAccept dials b from a and takes the connection from l.
func dialAccept(t testing.TB, a, b *Endpoint, l *Listener, opts ConnOptions) (*Conn, *Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a hang guard
	defer cancel()
	ca, err := a.Dial(ctx, b.Addr(), opts)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := l.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return ca, cb
}

// shardPair opens two endpoints of n shards on a fresh mem pair with the
// given steering.
func shardPair(t *testing.T, h *Host, n int, steer string) (*Endpoint, *Endpoint) {
	t.Helper()
	name := fmt.Sprintf("s%d", pairSeq.Add(1))
	var eps [2]*Endpoint
	for i := range eps {
		ep, err := h.Open(fmt.Sprintf("mem:%s/%d?steer=%s", name, i, steer),
			Options{IP: netip.AddrFrom4([4]byte{198, 18, 0, byte(1 + i)}), Shards: n, Poll: testPoll})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ep.Close() }) // a failed test's too, before its host's
		eps[i] = ep
	}
	return eps[0], eps[1]
}

// shardTraffic runs, on every one of conns connections dialled from a to
// b, at once: messages both ways, each received exactly once with its
// bytes, a push into b's region (checked after a message through b's
// loop) and a pull back from it, each connection on its own span of the
// two endpoints' one region each.
func shardTraffic(t *testing.T, a, b *Endpoint, conns int) {
	t.Helper()
	ctx := ctxT(t)
	l, err := b.Listen(ConnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ca, cb := make([]*Conn, conns), make([]*Conn, conns)
	for k := range conns {
		ca[k], cb[k] = dialAccept(t, a, b, l, ConnOptions{})
	}
	const span, msgs = 3000, 6
	// Accept hands connections over in the order they were set up, which
	// is not the dial order across shards: a connection's first message
	// names it.
	byID := make([]*Conn, conns)
	for k := range conns {
		var id [4]byte
		binary.LittleEndian.PutUint32(id[:], uint32(k))
		if err := ca[k].Send(ctx, id[:]); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range cb {
		var id [4]byte
		if n, err := c.Recv(ctx, id[:]); err != nil || n != 4 {
			t.Fatalf("hello: %d bytes, %v", n, err)
		}
		k := binary.LittleEndian.Uint32(id[:])
		if k >= uint32(conns) || byID[k] != nil {
			t.Fatalf("hello names connection %d twice or out of range", k)
		}
		byID[k] = c
	}
	cb = byID

	local, err := a.Register(make([]byte, conns*span), 0)
	if err != nil {
		t.Fatal(err)
	}
	back, err := a.Register(make([]byte, conns*span), 0)
	if err != nil {
		t.Fatal(err)
	}
	remote, err := b.Register(make([]byte, conns*span), RemoteWrite|RemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	msg := func(k, i, dir int) []byte {
		m := bytes.Repeat([]byte{byte(k), byte(i), byte(dir)}, 1+(k*131+i*977)%3000)
		return m
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2*conns)
	for k := range conns {
		src := local.Bytes()[k*span : (k+1)*span]
		for j := range src {
			src[j] = byte(k*7 + j)
		}
		wg.Add(2)
		go func() { // a's side: sends, then the push and the pull
			defer wg.Done()
			errs <- func() error {
				buf := make([]byte, 64<<10)
				for i := range msgs {
					if err := ca[k].Send(ctx, msg(k, i, 0)); err != nil {
						return fmt.Errorf("conn %d send %d: %w", k, i, err)
					}
				}
				seen := make([]bool, msgs)
				for range msgs {
					n, err := ca[k].Recv(ctx, buf)
					if err != nil {
						return fmt.Errorf("conn %d recv: %w", k, err)
					}
					i := int(buf[1])
					if i >= msgs || seen[i] || !bytes.Equal(buf[:n], msg(k, i, 1)) {
						return fmt.Errorf("conn %d: message %d wrong or twice", k, i)
					}
					seen[i] = true
				}
				if err := ca[k].Push(ctx, local, k*span, span, remote.Remote(uint64(k*span))); err != nil {
					return fmt.Errorf("conn %d push: %w", k, err)
				}
				if err := ca[k].Send(ctx, []byte("pushed")); err != nil {
					return err
				}
				if err := ca[k].Pull(ctx, back, k*span, span, remote.Remote(uint64(k*span))); err != nil {
					return fmt.Errorf("conn %d pull: %w", k, err)
				}
				if !bytes.Equal(back.Bytes()[k*span:(k+1)*span], src) {
					return fmt.Errorf("conn %d: pulled bytes differ from those pushed", k)
				}
				return nil
			}()
		}()
		go func() { // b's side: receives and answers, then checks the push
			defer wg.Done()
			errs <- func() error {
				buf := make([]byte, 64<<10)
				seen := make([]bool, msgs)
				for range msgs {
					n, err := cb[k].Recv(ctx, buf)
					if err != nil {
						return fmt.Errorf("conn %d peer recv: %w", k, err)
					}
					i := int(buf[1])
					if i >= msgs || seen[i] || !bytes.Equal(buf[:n], msg(k, i, 0)) {
						return fmt.Errorf("conn %d peer: message %d wrong or twice", k, i)
					}
					seen[i] = true
				}
				for i := range msgs {
					if err := cb[k].Send(ctx, msg(k, i, 1)); err != nil {
						return fmt.Errorf("conn %d peer send %d: %w", k, i, err)
					}
				}
				if n, err := cb[k].Recv(ctx, buf); err != nil || string(buf[:n]) != "pushed" {
					return fmt.Errorf("conn %d peer: %q, %v", k, buf[:n], err)
				}
				if !bytes.Equal(remote.Bytes()[k*span:(k+1)*span], local.Bytes()[k*span:(k+1)*span]) {
					return fmt.Errorf("conn %d: pushed bytes differ", k)
				}
				return nil
			}()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	// Nothing more arrived than was sent: no connection has a message
	// left over.
	for k := range conns {
		for _, c := range []*Conn{ca[k], cb[k]} {
			short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
			n, err := c.Recv(short, make([]byte, 64<<10))
			cancel()
			if !errors.Is(err, ErrCancelled) {
				t.Errorf("conn %d: a message too many (%d bytes, %v)", k, n, err)
			}
		}
	}
	for _, r := range []*Region{local, back} {
		if err := a.Deregister(r); err != nil {
			t.Error(err)
		}
	}
	if err := b.Deregister(remote); err != nil {
		t.Error(err)
	}
	if err := l.Close(); err != nil {
		t.Error(err)
	}
}

// closeAll closes the endpoints and checks every frame of the host's pool
// came back.
func closeAll(t *testing.T, h *Host, eps ...*Endpoint) {
	t.Helper()
	for _, ep := range eps {
		if err := ep.Close(); err != nil {
			t.Error(err)
		}
	}
	if n := h.h.pool.InUse(); n != 0 {
		t.Errorf("pool: %d frames in use after Close", n)
	}
}

// With queue steering, connections dialled from a sharded endpoint are
// dealt over its shards and land on the peer's shard of the same index,
// every message, push and pull completes once with its bytes, and no
// frame crosses between shards in software.
func TestShardsSpread(t *testing.T) {
	for _, n := range []int{2, 4} {
		t.Run(fmt.Sprintf("shards=%d", n), func(t *testing.T) {
			eachPoll(t, func(t *testing.T) {
				h := testHost(t, HostOptions{})
				a, b := shardPair(t, h, n, "queue")
				const perShard = 3
				shardTraffic(t, a, b, perShard*n)
				sa, sb := a.ShardStats(), b.ShardStats()
				if len(sa) != n || len(sb) != n {
					t.Fatalf("%d and %d shards' stats, want %d", len(sa), len(sb), n)
				}
				for i := range n {
					if sa[i].Dialled != perShard || sb[i].Accepted != perShard {
						t.Errorf("shard %d: dialled %d, accepted %d at the peer; want %d each", i, sa[i].Dialled, sb[i].Accepted, perShard)
					}
					if sa[i].Accepted != 0 || sb[i].Dialled != 0 {
						t.Errorf("shard %d: a accepted %d, b dialled %d", i, sa[i].Accepted, sb[i].Dialled)
					}
					for _, s := range []ShardStats{sa[i], sb[i]} {
						if s.SteeredOut != 0 || s.SteeredIn != 0 || s.HandoffDropped != 0 {
							t.Errorf("shard %d: %+v: frames crossed shards in software", i, s)
						}
						if s.RxFrames == 0 {
							t.Errorf("shard %d: took in no frames", i)
						}
					}
				}
				closeAll(t, h, a, b)
			})
		})
	}
}

// With RSS-like hash steering the device puts frames on queues their CID
// does not name: the shards hand them over in software, the counters say
// so, the connections still pair shard i with shard i, and the data is
// still right.
func TestShardsMissteered(t *testing.T) {
	h := testHost(t, HostOptions{})
	a, b := shardPair(t, h, 2, "hash")
	shardTraffic(t, a, b, 6)
	var out, in uint64
	for _, ep := range []*Endpoint{a, b} {
		for _, s := range ep.ShardStats() {
			out += s.SteeredOut + s.HandoffDropped
			in += s.SteeredIn
		}
	}
	if out == 0 || in == 0 {
		t.Fatalf("steered out %d, in %d: hash steering moved nothing between shards", out, in)
	}
	// Whichever queue a ConnOpen took, the peer's shard of the dialling
	// shard's index accepted it.
	sa, sb := a.ShardStats(), b.ShardStats()
	for i := range sa {
		if sa[i].Dialled != 3 || sb[i].Accepted != 3 {
			t.Errorf("shard %d: dialled %d, accepted %d at the peer; want 3 each", i, sa[i].Dialled, sb[i].Accepted)
		}
	}
	closeAll(t, h, a, b)
}

// A spec that contradicts Shards is refused naming both; one that leaves
// the queues out gets them.
func TestShardsSpec(t *testing.T) {
	for _, c := range []struct {
		spec, want, bad string
	}{
		{spec: "mem:x/0", want: "mem:x/0?queues=2"},
		{spec: "mem:x/0?steer=hash", want: "mem:x/0?steer=hash&queues=2"},
		{spec: "mem:x/0?queues=2", want: "mem:x/0?queues=2"},
		{spec: "afxdp:eth1?queue=4", want: "afxdp:eth1?queue=4&queues=2"},
		{spec: "afxdp:eth1?udp_port=4791", want: "afxdp:eth1?udp_port=4791&queues=2&shard_bits=1"},
		{spec: "afxdp:eth1?udp_port=4791&shard_bits=1&queues=2", want: "afxdp:eth1?udp_port=4791&shard_bits=1&queues=2"},
		{spec: "mem:x/0?queues=3", bad: "queues=3"},
		{spec: "afxdp:eth1?udp_port=4791&shard_bits=2", bad: "shard_bits=2"},
		{spec: "null:", bad: "null"},
	} {
		got, err := shardSpec(c.spec, 2)
		if c.bad != "" {
			if err == nil || !strings.Contains(err.Error(), c.bad) || !strings.Contains(err.Error(), "Shards") {
				t.Errorf("%s: %v, want an error naming %s and Shards", c.spec, err, c.bad)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: %q, %v; want %q", c.spec, got, err, c.want)
		}
	}
	h := testHost(t, HostOptions{})
	for _, n := range []int{-1, 257} {
		if _, err := h.Open("mem:shardsbad/0", Options{IP: netip.MustParseAddr("198.18.0.1"), Shards: n}); !errors.Is(err, ErrInvalid) {
			t.Errorf("Shards %d: %v, want ErrInvalid", n, err)
		}
	}
	if _, err := h.Open("mem:shardsbad/0?queues=4", Options{IP: netip.MustParseAddr("198.18.0.1"), Shards: 2}); !errors.Is(err, ErrInvalid) {
		t.Errorf("queues=4 with Shards 2: %v, want ErrInvalid", err)
	}
}

// A region registered with a sharded endpoint has one key on every shard,
// and a deregistered one stops matching on every shard; slots are reused.
func TestShardsRegions(t *testing.T) {
	h := testHost(t, HostOptions{})
	a, b := shardPair(t, h, 2, "queue")
	ctx := ctxT(t)
	l, err := b.Listen(ConnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var cs [2]*Conn
	for i := range cs {
		cs[i], _ = dialAccept(t, a, b, l, ConnOptions{})
	}
	src, err := a.Register([]byte("sharded region"), 0)
	if err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		dst, err := b.Register(make([]byte, 64), RemoteWrite)
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range cs { // one connection on each shard of both ends
			if err := c.Push(ctx, src, 0, src.Len(), dst.Remote(uint64(i))); err != nil {
				t.Fatalf("round %d, shard %d: %v", round, i, err)
			}
		}
		if err := b.Deregister(dst); err != nil {
			t.Fatal(err)
		}
		for i, c := range cs {
			if err := c.Push(ctx, src, 0, 1, dst.Remote(0)); !errors.Is(err, ErrRemoteAccess) {
				t.Fatalf("round %d, shard %d: a push into a deregistered region: %v, want ErrRemoteAccess", round, i, err)
			}
		}
	}
	closeAll(t, h, a, b)
}

// Two sharded endpoints over a two-queue veth pair through AF_XDP, as
// root: the veth puts a frame on the receive queue of the queue it was
// sent on, so shard i of each end pairs with shard i of the other, every
// connection's data arrives whole, and nothing is handed over in
// software. The XDP program steers by UDP port and counts the frames it
// saw on a queue their CID does not name (none).
func TestShardsVeth(t *testing.T) {
	tp := netnstest.TwoNS(t, netns.VethOptions{Queues: 2, GRO: true})
	h := testHost(t, HostOptions{})
	var eps [2]*Endpoint
	for i, end := range []struct {
		ifc string
		ns  *netns.NS
	}{{tp.IfA, tp.A}, {tp.IfB, tp.B}} {
		spec := fmt.Sprintf("afxdp:%s?netns=%s&udp_port=%d", end.ifc, end.ns.Name, pwire.DefaultPort)
		ep, err := h.Open(spec, Options{IP: netip.AddrFrom4([4]byte{198, 18, 0, byte(1 + i)}), Shards: 2})
		if err != nil {
			t.Fatal(err)
		}
		eps[i] = ep
	}
	a, b := eps[0], eps[1]
	shardTraffic(t, a, b, 4)
	for _, ep := range eps {
		for i, s := range ep.ShardStats() {
			if s.SteeredOut != 0 || s.SteeredIn != 0 || s.HandoffDropped != 0 {
				t.Errorf("shard %d: %+v: frames crossed shards in software", i, s)
			}
			if s.Dialled+s.Accepted != 2 {
				t.Errorf("shard %d: dialled %d, accepted %d; want 2 connections", i, s.Dialled, s.Accepted)
			}
		}
		if m := ep.g.set.Missteered(); len(m) != 2 || m[0] != 0 || m[1] != 0 {
			t.Errorf("the XDP program saw frames on the wrong queue: %v", m)
		}
	}
	closeAll(t, h, a, b)
}

// Blocking calls on connections of every shard allocate nothing in steady
// state, hand-offs between shards included (hash steering), in both poll
// modes.
func TestShardsDoNotAllocate(t *testing.T) {
	for _, steer := range []string{"queue", "hash"} {
		t.Run(steer, func(t *testing.T) {
			eachPoll(t, func(t *testing.T) {
				h := testHost(t, HostOptions{})
				a, b := shardPair(t, h, 2, steer)
				l, err := b.Listen(ConnOptions{})
				if err != nil {
					t.Fatal(err)
				}
				var ca, cb [2]*Conn
				for i := range ca {
					ca[i], cb[i] = dialAccept(t, a, b, l, ConnOptions{})
				}
				ctx := ctxT(t)
				msg, buf := make([]byte, 1024), make([]byte, 1024)
				remote, err := b.Register(make([]byte, 1024), RemoteWrite|RemoteRead)
				if err != nil {
					t.Fatal(err)
				}
				local, err := a.Register(make([]byte, 1024), 0)
				if err != nil {
					t.Fatal(err)
				}
				var failed error
				note := func(err error) {
					if err != nil && failed == nil {
						failed = err
					}
				}
				roundTrip := func() {
					for i := range ca { // one connection per shard
						note(ca[i].Send(ctx, msg))
						_, err := cb[i].Recv(ctx, buf)
						note(err)
						note(ca[i].Push(ctx, local, 0, len(msg), remote.Remote(0)))
						note(ca[i].Pull(ctx, local, 0, len(msg), remote.Remote(0)))
					}
				}
				for range 50 {
					roundTrip()
				}
				if allocs := testing.AllocsPerRun(100, roundTrip); allocs != 0 {
					t.Errorf("%.2f allocations per round over both shards, want 0", allocs)
				}
				if failed != nil {
					t.Fatal(failed)
				}
				closeAll(t, h, a, b)
			})
		})
	}
}

// With Pin, shard i's loop runs on CPU Options.CPU+i.
func TestShardsPinned(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs two CPUs: shard 1 pins to CPU 1")
	}
	h := testHost(t, HostOptions{})
	ep, err := h.Open("mem:shardspin/0", Options{IP: netip.MustParseAddr("198.18.0.1"), Shards: 2, Pin: true, CPU: 0})
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range ep.g.engines {
		if e.loop.CPU() != i {
			t.Errorf("shard %d's loop on CPU %d, want %d", i, e.loop.CPU(), i)
		}
	}
	if err := ep.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Open("mem:shardspin/0", Options{IP: netip.MustParseAddr("198.18.0.1"), Shards: 2, Pin: true, CPU: runtime.NumCPU() - 1}); err == nil {
		t.Fatal("shard 1 pinned past the last CPU: opened")
	}
}

// 64 B pushes over both endpoints' shards at once, two connections a
// shard, each pushed by its own goroutine: shards=2 against shards=1 is
// what a second queue and loop buy (both endpoints busy-poll, so run it
// on a machine with a core per loop). steered/op is the frames handed
// between shards in software per push (0 with queue steering).
func BenchmarkShardsPush64(b *testing.B) {
	for _, n := range []int{1, 2} {
		b.Run(fmt.Sprintf("shards=%d", n), func(b *testing.B) {
			h := testHost(b, HostOptions{})
			name := fmt.Sprintf("sb%d", pairSeq.Add(1))
			var eps [2]*Endpoint
			for i := range eps {
				ep, err := h.Open(fmt.Sprintf("mem:%s/%d", name, i), Options{IP: netip.AddrFrom4([4]byte{198, 18, 0, byte(1 + i)}), Shards: n, Idle: IdleBusy})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = ep.Close() })
				eps[i] = ep
			}
			l, err := eps[1].Listen(ConnOptions{})
			if err != nil {
				b.Fatal(err)
			}
			conns := make([]*Conn, 2*n)
			for k := range conns {
				conns[k], _ = dialAccept(b, eps[0], eps[1], l, ConnOptions{})
			}
			remote, err := eps[1].Register(make([]byte, 64*len(conns)), RemoteWrite)
			if err != nil {
				b.Fatal(err)
			}
			local, err := eps[0].Register(make([]byte, 64*len(conns)), 0)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			var wg sync.WaitGroup
			errs := make(chan error, len(conns))
			for k, c := range conns {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := k; i < b.N; i += len(conns) {
						if err := c.Push(ctx, local, 64*k, 64, remote.Remote(uint64(64*k))); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
			var steered uint64
			for _, ep := range eps {
				for _, s := range ep.ShardStats() {
					steered += s.SteeredOut + s.HandoffDropped
				}
			}
			b.ReportMetric(float64(steered)/float64(b.N), "steered/op")
		})
	}
}

// shardSpec never panics, and a spec it returns parses and asks for a
// queue per shard (and, on afxdp with udp_port, the shards' CID bits).
func FuzzShardSpec(f *testing.F) {
	for _, s := range []string{"mem:x/0", "mem:x/0?", "mem:x/0?steer=hash&", "afxdp:eth1?udp_port=4791&shard_bits=1", "afpacket:eth0?queues=2", "null:", "x", "mem:a/0?queues=2&queues=3"} {
		f.Add(s, uint8(2))
	}
	f.Fuzz(func(t *testing.T, spec string, n uint8) {
		shards := 1 + int(n)%8
		out, err := shardSpec(spec, shards)
		if err != nil {
			return
		}
		s, err := pmd.ParseSpec(out)
		if err != nil {
			t.Fatalf("%q -> %q: %v", spec, out, err)
		}
		if q := s.Params.Get("queues"); q != strconv.Itoa(shards) {
			t.Fatalf("%q -> %q: queues=%q for %d shards", spec, out, q, shards)
		}
		if s.Driver == "afxdp" && s.Params.Has("udp_port") && s.Params.Get("shard_bits") != strconv.Itoa(int(shard.Bits(shards))) {
			t.Fatalf("%q -> %q: shard_bits=%q for %d shards", spec, out, s.Params.Get("shard_bits"), shards)
		}
	})
}
