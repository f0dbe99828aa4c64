package shm

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

func TestLayoutChecks(t *testing.T) {
	for _, l := range []Layout{
		{RingSize: 3, Buffers: 1, BufSize: 64},
		{RingSize: 1, Buffers: 1, BufSize: 64},
		{RingSize: MaxRing * 2, Buffers: 1, BufSize: 64},
		{RingSize: 2, Buffers: 0, BufSize: 64},
		{RingSize: 2, Buffers: 1, BufSize: 65},
		{RingSize: 2, Buffers: MaxBuffers, BufSize: MaxBufSize},
	} {
		if err := l.Check(); !errors.Is(err, ErrLayout) {
			t.Errorf("%+v: Check = %v, want ErrLayout", l, err)
		}
	}
	l := Layout{RingSize: 4, Buffers: 3, BufSize: 128}
	for _, c := range []struct {
		buf, off, n uint32
		ok          bool
	}{
		{0, 0, 128, true}, {2, 127, 1, true}, {2, 0, 0, true},
		{3, 0, 1, false}, {0, 128, 1, false}, {0, ^uint32(0), 2, false}, {^uint32(0), 0, 1, false},
		// A span runs on over the following buffers, to the pool's end.
		{0, 1, 128, true}, {0, 0, 384, true}, {1, 10, 246, true},
		{0, 0, 385, false}, {2, 1, 128, false}, {1, 0, 257, false}, {0, 0, ^uint32(0), false},
	} {
		if _, ok := l.Span(c.buf, c.off, c.n); ok != c.ok {
			t.Errorf("Span(%d, %d, %d) ok = %v, want %v", c.buf, c.off, c.n, ok, c.ok)
		}
	}
}

// Rings wrap, fill exactly and empty exactly; a second mapping of the
// same memfd (the application's) sees what the first wrote.
func TestRingsAcrossMappings(t *testing.T) {
	app, err := Create("test", Layout{RingSize: 4, Buffers: 2, BufSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	fd, err := unix.Dup(app.Fd())
	if err != nil {
		t.Fatal(err)
	}
	other, err := Open(fd)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	p, c := app.SubmitProducer(), other.SubmitConsumer()
	out := make([]Desc, 8)
	cookie := uint64(0)
	for round := range 5 {
		in := make([]Desc, 6)
		for i := range in {
			cookie++
			in[i] = Desc{Op: OpSend, Cookie: cookie}
		}
		if n, bad := p.Enqueue(in); n != 4 || bad {
			t.Fatalf("round %d: enqueued %d (bad %v) into a ring of 4", round, n, bad)
		}
		if p.Free() != 0 {
			t.Fatal("a full ring has room")
		}
		n, bad := c.Dequeue(out[:3])
		if n != 3 || bad || out[0].Cookie != cookie-5 || out[2].Cookie != cookie-3 {
			t.Fatalf("round %d: dequeued %d %+v", round, n, out[:n])
		}
		if n, _ := c.Dequeue(out); n != 1 || out[0].Cookie != cookie-2 {
			t.Fatalf("round %d: rest %d %+v", round, n, out[:n])
		}
		if n, _ := c.Dequeue(out); n != 0 {
			t.Fatal("an empty ring gave items")
		}
		cookie -= 2 // the two that did not fit are enqueued again next round
	}
	// Buffers are shared too.
	copy(app.Buffer(1), "hello")
	if string(other.Bytes(1, 0, 5)) != "hello" {
		t.Fatal("the second mapping does not see the first's buffer")
	}
	if other.Bytes(2, 0, 1) != nil || other.Bytes(1, 60, 5) != nil || other.Bytes(0, 64, 1) != nil {
		t.Fatal("Bytes gave a span outside the pool")
	}
	if b := other.Bytes(0, 60, 8); len(b) != 8 {
		t.Fatal("Bytes refused a span running from one buffer into the next")
	}
}

func TestOpenRefusesForeignFd(t *testing.T) {
	fd, err := unix.MemfdCreate("junk", 0)
	if err != nil {
		t.Fatal(err)
	}
	unix.Ftruncate(fd, 8192)
	if _, err := Open(fd); !errors.Is(err, ErrLayout) {
		t.Fatalf("Open of a memfd without a header = %v, want ErrLayout", err)
	}
	unix.Close(fd)
}
