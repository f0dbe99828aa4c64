package host

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/peregrine-net/peregrine"
	"github.com/peregrine-net/peregrine/host/shm"
)

var fuzzSeq atomic.Int64

// consumerRig is a Server over a real endpoint and one real connection to
// a peer that accepts and drains, for driving one app's poll by hand.
type consumerRig struct {
	s    *Server
	conn *peregrine.Conn
	peer *peregrine.Endpoint
}

// With echo the peer sends every message back; without, it drains them.
func newConsumerRig(t testing.TB, echo bool) *consumerRig {
	t.Helper()
	h, err := peregrine.NewHost(peregrine.HostOptions{})
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("fz%d", fuzzSeq.Add(1))
	a, err := h.Open("mem:"+name+"/0", peregrine.Options{IP: netip.MustParseAddr("198.18.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	b, err := h.Open("mem:"+name+"/1", peregrine.Options{IP: netip.MustParseAddr("198.18.0.2")})
	if err != nil {
		t.Fatal(err)
	}
	l, err := b.Listen(peregrine.ConnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	go func() { // drain whatever the fuzzer manages to send
		c, err := l.Accept(context.Background())
		if err != nil {
			return
		}
		buf := make([]byte, 64<<10)
		for {
			n, err := c.Recv(context.Background(), buf)
			if err != nil || (echo && c.Send(context.Background(), buf[:n]) != nil) {
				return
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := a.Dial(ctx, b.Addr(), peregrine.ConnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{Socket: filepath.Join(t.TempDir(), "f.sock"), Endpoint: a, UID: -1, GID: -1,
		Default: shm.Layout{RingSize: 16, Buffers: 4, BufSize: 4096}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close()
		conn.Close()
		a.Close()
		b.Close()
		h.Close()
	})
	return &consumerRig{s: s, conn: conn, peer: b}
}

// fuzzRegion is the size of the one region (id 1) the fuzzed app holds.
const fuzzRegion = 8192

// valid is the test's own statement of a descriptor the appliance must
// accept for an app owning connection 1 and region 1 alone: a send or a
// receive names a span that starts in a buffer of the pool and ends by the
// pool's end (a long message runs over the following buffers), a push or a
// pull a span of the region.
func valid(d shm.Desc, l shm.Layout) bool {
	if d.Conn != 1 {
		return false
	}
	switch d.Op {
	case shm.OpSend, shm.OpRecv:
		return uint64(d.Buf) < uint64(l.Buffers) && uint64(d.Off) < uint64(l.BufSize) &&
			uint64(d.Buf)*uint64(l.BufSize)+uint64(d.Off)+uint64(d.Len) <= uint64(l.Buffers)*uint64(l.BufSize)
	case shm.OpPush, shm.OpPull:
		return d.Buf == 1 && uint64(d.Off)+uint64(d.Len) <= fuzzRegion
	}
	return false
}

// consume writes descs (and, when hostile, an impossible producer index)
// into a fresh app's submit ring as a hostile application would, polls
// until the ring is empty and every started op has been cancelled and
// completed, and checks the completions.
func (r *consumerRig) consume(t *testing.T, descs []shm.Desc, hostileIndex uint64) {
	a, err := newApp(r.s, nil, 1, 0, 0, r.s.opts.Default)
	if err != nil {
		t.Fatal(err)
	}
	defer a.ch.Close()
	a.conns[0] = r.conn
	sm, err := shm.CreateRegion("fuzz", fuzzRegion)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := r.s.ep.Register(sm.Bytes(), peregrine.RemoteWrite|peregrine.RemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	a.regions[0] = &appRegion{mem: sm, reg: reg}
	defer func() { // every op has completed: nothing holds the region
		r.s.ep.Deregister(reg)
		sm.Close()
	}()
	l := a.ch.Layout
	prod := a.ch.SubmitProducer()
	comps := a.ch.CompleteConsumer()
	var got []shm.Comp
	buf := make([]shm.Comp, l.RingSize)
	reap := func() {
		n, _ := comps.Dequeue(buf)
		got = append(got, buf[:n]...)
	}
	wantBad := 0
	for _, d := range descs {
		if !valid(d, l) && d.Op != shm.OpCancel {
			wantBad++
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	rest := descs
	if hostileIndex != 0 {
		// A producer index far ahead: the consumer reads a ring's worth of
		// whatever the slots hold, checks each, and goes on.
		raw := a.ch.Raw()
		binary.LittleEndian.PutUint64(raw[4096:], hostileIndex)
		a.poll(false, false)
		reap()
		if a.stats.BadRingIndex.Load() == 0 && hostileIndex > uint64(l.RingSize) {
			t.Fatalf("producer index %d past a ring of %d not counted", hostileIndex, l.RingSize)
		}
		return
	}
	for len(rest) > 0 || a.inflight > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("stuck: %d descriptors left, %d in flight", len(rest), a.inflight)
		}
		n, _ := prod.Enqueue(rest)
		rest = rest[n:]
		a.poll(false, false)
		for i := range a.slots {
			if a.slots[i].busy {
				a.ops[i].Cancel()
			}
		}
		reap()
	}
	bad := a.stats.BadOp.Load() + a.stats.BadConn.Load() + a.stats.BadBuffer.Load() + a.stats.BadRegion.Load()
	if int(bad) != wantBad {
		t.Fatalf("%d descriptors refused, want %d (%+v)", bad, wantBad, descs)
	}
	answered := 0
	for _, d := range descs {
		if d.Op != shm.OpCancel {
			answered++
		}
	}
	if len(got) != answered {
		t.Fatalf("%d completions for %d descriptors that each owe one", len(got), answered)
	}
	invalid := 0
	for _, c := range got {
		if peregrine.Status(c.Status) == peregrine.StatusInvalid {
			invalid++
		}
	}
	if invalid < wantBad {
		t.Fatalf("%d completions say invalid, %d descriptors were bad", invalid, wantBad)
	}
	if len(a.free) != len(a.ops) {
		t.Fatalf("%d op slots free after the drain, want %d", len(a.free), len(a.ops))
	}
	if rg := a.regions[0]; rg.refs != 0 {
		t.Fatalf("the region holds %d references after the drain", rg.refs)
	}
}

func descsOf(b []byte) []shm.Desc {
	var ds []shm.Desc
	for len(b) >= 21 {
		d := shm.Desc{Op: b[0] % 7, Conn: binary.LittleEndian.Uint32(b[1:]) % 4, Buf: binary.LittleEndian.Uint32(b[5:]),
			Off: binary.LittleEndian.Uint32(b[9:]), Len: binary.LittleEndian.Uint32(b[13:]),
			Cookie: uint64(binary.LittleEndian.Uint32(b[17:]))}
		// Any flags, known (FlagAhead) or not: they change no check.
		d.Flags = b[1] >> 2
		// The peer's side of a push or a pull is the peer's to check: any
		// key and offset, mostly ones it does not have.
		d.Key, d.Addr = uint32(d.Cookie), uint64(d.Off)<<3
		if b[0]&0x80 != 0 { // half the time, small values that are often in range
			d.Buf %= 6
			d.Off %= 5000
			d.Len %= 5000
		}
		ds = append(ds, d)
		b = b[21:]
	}
	return ds
}

func TestConsumerRefusesBadDescriptors(t *testing.T) {
	r := newConsumerRig(t, false)
	l := r.s.opts.Default
	r.consume(t, []shm.Desc{
		{Op: 0, Conn: 1, Cookie: 1},                                      // unknown op
		{Op: 9, Conn: 1, Cookie: 2},                                      // unknown op
		{Op: shm.OpSend, Conn: 0, Len: 1, Cookie: 3},                     // no connection 0
		{Op: shm.OpSend, Conn: 2, Len: 1, Cookie: 4},                     // not this app's
		{Op: shm.OpSend, Conn: 1 << 31, Len: 1, Cookie: 5},               // far out
		{Op: shm.OpSend, Conn: 1, Buf: 4, Len: 1, Cookie: 6},             // buffer past the pool
		{Op: shm.OpRecv, Conn: 1, Buf: 3, Off: 4000, Len: 97, Cookie: 7}, // span leaves the pool
		{Op: shm.OpRecv, Conn: 1, Off: ^uint32(0), Len: 2, Cookie: 8},
		{Op: shm.OpRecv, Conn: 1, Off: 4096, Len: 2, Cookie: 10},                   // offset past its buffer
		{Op: shm.OpSend, Conn: 1, Buf: 3, Off: 4095, Len: 1, Cookie: 9},            // the last byte: fine
		{Op: shm.OpSend, Conn: 1, Buf: 1, Off: 100, Len: 3*4096 - 100, Cookie: 11}, // a run to the pool's end: fine
		{Op: shm.OpPush, Conn: 1, Buf: 0, Len: 1, Cookie: 20},                      // no region 0
		{Op: shm.OpPull, Conn: 1, Buf: 2, Len: 1, Cookie: 21},                      // not this app's
		{Op: shm.OpPush, Conn: 1, Buf: 1, Off: fuzzRegion - 1, Len: 2, Cookie: 22}, // past the region
		{Op: shm.OpPull, Conn: 1, Buf: 1, Off: ^uint32(0), Len: 2, Cookie: 23},
		{Op: shm.OpPush, Conn: 2, Buf: 1, Len: 1, Cookie: 24},                                 // not this app's connection
		{Op: shm.OpPull, Conn: 1, Buf: 1, Off: fuzzRegion - 16, Len: 16, Cookie: 25, Key: 77}, // fine here; the peer refuses the key
		{Op: shm.OpCancel, Cookie: 12345},
	}, 0)
	for _, idx := range []uint64{uint64(l.RingSize) + 1, 1 << 63, ^uint64(0)} {
		r.consume(t, nil, idx)
	}
}

func FuzzConsumer(f *testing.F) {
	f.Add([]byte("\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x10\x00\x00\x00\x07\x00\x00\x00"), uint64(0))
	f.Add(make([]byte, 21*20), uint64(0))
	f.Add([]byte{0x82, 1, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 16, 0, 0, 1, 0, 0, 0}, uint64(17))
	f.Add([]byte{0x84, 1, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 2, 0, 0, 0}, uint64(0))  // a push of region 1
	f.Add([]byte{0x85, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0, 3, 0, 0, 0}, uint64(0)) // a pull
	r := newConsumerRig(f, false)
	f.Fuzz(func(t *testing.T, b []byte, hostile uint64) {
		if len(b) > 21*64 {
			b = b[:21*64]
		}
		r.consume(t, descsOf(b), hostile)
	})
}
