package host_test

import (
	"errors"
	"net"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/peregrine-net/peregrine"
	"github.com/peregrine-net/peregrine/host"
	"github.com/peregrine-net/peregrine/host/ctl"
	"github.com/peregrine-net/peregrine/host/shm"
)

func TestSocketMode(t *testing.T) {
	r := newRig(t, host.Quota{})
	fi, err := os.Stat(r.socket)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o660 {
		t.Fatalf("socket mode %v, want a socket with 0660", fi.Mode())
	}
}

func TestQuotas(t *testing.T) {
	r := newRig(t, host.Quota{Channels: 2, Buffers: 8, BufSize: 8192, Conns: 1, Ring: 16})
	for name, o := range map[string]peregrine.AttachOptions{
		"buffers":     {Buffers: 9},
		"buffer size": {BufSize: 16384},
		"ring":        {RingSize: 32},
	} {
		if _, err := peregrine.Attach(r.socket, o); !errors.Is(err, peregrine.ErrBusy) || !strings.Contains(err.Error(), "quota") {
			t.Errorf("%s over quota: Attach = %v, want ErrBusy naming the quota", name, err)
		}
	}
	if _, err := peregrine.Attach(r.socket, peregrine.AttachOptions{RingSize: 3}); !errors.Is(err, peregrine.ErrInvalid) {
		t.Errorf("ring of 3: Attach = %v, want ErrInvalid", err)
	}
	a := attach(t, r, peregrine.AttachOptions{})
	attach(t, r, peregrine.AttachOptions{})
	if _, err := peregrine.Attach(r.socket, peregrine.AttachOptions{}); !errors.Is(err, peregrine.ErrBusy) || !strings.Contains(err.Error(), "channels") {
		t.Fatalf("third channel of one user: Attach = %v, want ErrBusy naming channels", err)
	}
	echo(t, r)
	ctx := ctxT(t)
	if _, err := a.Dial(ctx, r.b.Addr(), peregrine.ConnOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Dial(ctx, r.b.Addr(), peregrine.ConnOptions{}); !errors.Is(err, peregrine.ErrBusy) || !strings.Contains(err.Error(), "connections") {
		t.Fatalf("second connection over a quota of one: Dial = %v, want ErrBusy naming connections", err)
	}
	var refused uint64
	r.srv.Stats(func(s host.AppStats) { refused += s.QuotaRefused })
	if refused != 1 {
		t.Fatalf("QuotaRefused = %d, want 1", refused)
	}
}

// A second application can neither name nor map the first's channel: it
// gets a memfd of its own (another inode), the protocol has no name for a
// channel, and its descriptors naming the first's connection or buffers
// past its own pool are refused.
func TestSecondApplicationCannotReachFirst(t *testing.T) {
	r := newRig(t, host.Quota{})
	echo(t, r)
	ctx := ctxT(t)
	first := attach(t, r, peregrine.AttachOptions{Buffers: 4, BufSize: 4096})
	c1, err := first.Dial(ctx, r.b.Addr(), peregrine.ConnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Register(make([]byte, 4096), peregrine.RemoteRead); err != nil {
		t.Fatal(err)
	}
	// The second application speaks the protocol by hand, as a hostile one
	// would.
	ch2 := rawAttach(t, r.socket)
	ch3 := rawAttach(t, r.socket)
	fd2 := ch2.Fd()
	ino := func(fd int) uint64 {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			t.Fatal(err)
		}
		return st.Ino
	}
	if ino(fd2) == ino(ch3.Fd()) {
		t.Fatal("two applications were given the same memfd")
	}
	// The memfd is sealed: the application cannot shrink it under the
	// appliance.
	if err := unix.Ftruncate(fd2, 0); err == nil {
		t.Fatal("the application could truncate its channel")
	}
	prod := ch2.SubmitProducer()
	comps := ch2.CompleteConsumer()
	l := ch2.Layout
	bad := []shm.Desc{
		{Op: shm.OpSend, Conn: 1, Len: 1, Cookie: 1},                          // the first's connection id
		{Op: shm.OpRecv, Conn: 1, Buf: uint32(l.Buffers), Len: 16, Cookie: 2}, // the buffer after its pool
		{Op: shm.OpRecv, Conn: 1, Buf: ^uint32(0), Len: 16, Cookie: 3},        // far past it
		{Op: shm.OpSend, Conn: 1, Off: uint32(l.BufSize), Len: 1, Cookie: 4},  // past its buffer
		{Op: shm.OpPush, Conn: 1, Buf: 1, Len: 16, Cookie: 5},                 // the first's region id
		{Op: shm.OpCancel, Cookie: 1<<32 | 0, Conn: 1},                        // a cookie of the first: nothing
	}
	if n, _ := prod.Enqueue(bad); n != len(bad) {
		t.Fatal("ring full")
	}
	got := make([]shm.Comp, 8)
	n := 0
	waitFor(t, "the refusals", func() bool { k, _ := comps.Dequeue(got[n:]); n += k; return n >= 5 })
	for _, c := range got[:n] {
		if peregrine.Status(c.Status) != peregrine.StatusInvalid {
			t.Fatalf("completion %+v: want StatusInvalid", c)
		}
	}
	var bc, bb uint64
	r.srv.Stats(func(s host.AppStats) { bc += s.BadConn; bb += s.BadBuffer })
	if bc != 5 || bb != 0 {
		// Connection is checked first: the second app owns none.
		t.Fatalf("BadConn %d BadBuffer %d, want 5 and 0", bc, bb)
	}
	// The first application is unaffected.
	if err := c1.Send(ctx, []byte("still here")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if n, err := c1.Recv(ctx, buf); err != nil || string(buf[:n]) != "still here" {
		t.Fatalf("first application's echo %q %v", buf[:n], err)
	}
}

// rawAttach attaches by hand and maps the channel it is given; the socket
// stays open (the attachment lives) until the test ends.
func rawAttach(t *testing.T, sock string) *shm.Channel {
	t.Helper()
	c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: sock, Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	req := ctl.Msg{Type: ctl.TAttach, ID: 1, A: 4, B: 4096, C: 16}
	if _, err := c.Write(req.Encode(nil)); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, ctl.MaxLen+1)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := c.ReadMsgUnix(b, oob)
	if err != nil {
		t.Fatal(err)
	}
	var rep ctl.Msg
	if err := rep.Decode(b[:n]); err != nil || rep.Type != ctl.RAttach {
		t.Fatalf("attach reply %+v %v", rep, err)
	}
	cms, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(cms) != 1 {
		t.Fatalf("control messages %v %v", cms, err)
	}
	fds, err := unix.ParseUnixRights(&cms[0])
	if err != nil || len(fds) != 1 {
		t.Fatalf("rights %v %v", fds, err)
	}
	ch, err := shm.Open(fds[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ch.Close() })
	return ch
}
