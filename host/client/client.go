// Package client is the application's side of the sidecar (host): attach
// to a running appliance's Unix socket and use the transport with the calls
// of the in-process package, so switching doors is the line that makes the
// endpoint:
//
//	ep, err := h.Open("afxdp:eth1", peregrine.Options{IP: ip})        // in-process
//	ep, err := client.Attach("/run/peregrine.sock", client.Options{}) // through the appliance
//
// Endpoint, Listener and Conn have peregrine's method names and
// signatures (Addr, Dial, Listen, Accept, Send, Recv, RemoteAddr, Ordered,
// Close), take peregrine's Addr and ConnOptions, and fail with peregrine's
// errors: an *peregrine.Error whose Status matches the same sentinel
// (errors.Is(err, peregrine.ErrClosed)…). The one-sided operations
// (Register, Push, Pull) and the asynchronous forms are not carried by the
// sidecar yet.
//
// # Who owns a buffer
//
// The channel's buffers are the client's: a free list here, never in the
// appliance. Send takes a free buffer, copies msg into it and names it in a
// descriptor; the appliance sends it from there without a copy and the
// buffer is free again when the completion comes back. Recv names a free
// buffer for the appliance to place the next message in and copies the
// message into the caller's buf. A message is at most one buffer long
// (Options.BufSize; the appliance's quota bounds it).
//
// # Completions
//
// One goroutine reads the completion ring and wakes the call waiting for
// each (a one-slot channel per operation slot, made once). It spins while
// operations are in flight and parks when none are, so an idle client
// costs no CPU. Blocking calls allocate nothing per call.
//
// # When the appliance goes away
//
// The socket's end of file marks the endpoint dead: every waiting call
// returns an error matching peregrine.ErrClosed, and so does every later
// one. A call never waits for an appliance that is gone.
package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/peregrine-net/peregrine"
	"github.com/peregrine-net/peregrine/host/ctl"
	"github.com/peregrine-net/peregrine/host/shm"
)

// Options configure Attach. Zero fields take the appliance's defaults.
type Options struct {
	Buffers  int // buffers in the channel's pool
	BufSize  int // bytes per buffer: the longest message
	RingSize int // descriptors per ring: the most operations in flight
}

// Endpoint is an attachment to an appliance: one channel. Its calls may be
// made from any goroutine.
type Endpoint struct {
	sock *net.UnixConn
	ch   *shm.Channel
	addr peregrine.Addr

	life     sync.RWMutex // calls hold it shared; Close takes it to unmap
	dead     atomic.Bool
	deadCh   chan struct{}
	deadOnce sync.Once
	closed   atomic.Bool

	// control
	wmu     sync.Mutex
	pmu     sync.Mutex
	pending map[uint32]chan ctl.Msg
	nextReq uint32

	// data
	smu      sync.Mutex
	sub      *shm.Producer[shm.Desc]
	one      [1]shm.Desc
	bufs     chan uint32 // the free list of buffers
	slotFree chan uint32 // the free list of operation slots
	slots    []opSlot
	busy     atomic.Int64 // operations in flight
	kick     chan struct{}
	done     sync.WaitGroup
}

type opSlot struct {
	// gen tells a completion of this start from a stale one; atomic
	// because the completion goroutine reads it while a call starts the
	// slot again (the ring between them is shared memory the race
	// detector does not see).
	gen    atomic.Uint32
	done   chan struct{}
	status uint32
	n      uint32
}

// Attach connects to the appliance at socket and maps the channel it gives.
func Attach(socket string, opts Options) (*Endpoint, error) {
	c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: socket, Net: "unixpacket"})
	if err != nil {
		return nil, &peregrine.Error{Op: "attach", Status: peregrine.StatusClosed, Cause: err}
	}
	req := ctl.Msg{Type: ctl.TAttach, ID: 1, A: uint32(opts.Buffers), B: uint32(opts.BufSize), C: uint32(opts.RingSize)}
	var b [ctl.MaxLen + 1]byte
	if _, _, err := c.WriteMsgUnix(req.Encode(b[:0]), nil, nil); err != nil {
		c.Close()
		return nil, &peregrine.Error{Op: "attach", Status: peregrine.StatusClosed, Cause: err}
	}
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := c.ReadMsgUnix(b[:], oob)
	if err != nil {
		c.Close()
		return nil, &peregrine.Error{Op: "attach", Status: peregrine.StatusClosed, Cause: err}
	}
	fd := -1
	if cms, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
		for _, cm := range cms {
			if fds, err := unix.ParseUnixRights(&cm); err == nil {
				for _, f := range fds {
					if fd < 0 {
						fd = f
					} else {
						unix.Close(f)
					}
				}
			}
		}
	}
	var rep ctl.Msg
	if err := rep.Decode(b[:n]); err != nil || (rep.Type != ctl.RAttach && rep.Type != ctl.RError) {
		closeFd(fd)
		c.Close()
		return nil, &peregrine.Error{Op: "attach", Status: peregrine.StatusInvalid, Cause: fmt.Errorf("bad reply from the appliance: %v", err)}
	}
	if rep.Type == ctl.RError {
		closeFd(fd)
		c.Close()
		return nil, replyErr("attach", &rep)
	}
	if fd < 0 {
		c.Close()
		return nil, &peregrine.Error{Op: "attach", Status: peregrine.StatusInvalid, Cause: errors.New("the appliance sent no channel")}
	}
	ch, err := shm.Open(fd)
	if err != nil {
		unix.Close(fd)
		c.Close()
		return nil, &peregrine.Error{Op: "attach", Status: peregrine.StatusInvalid, Cause: err}
	}
	l := ch.Layout
	ep := &Endpoint{sock: c, ch: ch, addr: peregrine.Addr{IP: rep.Addr(), MAC: rep.MAC},
		deadCh: make(chan struct{}), pending: map[uint32]chan ctl.Msg{}, nextReq: 1,
		sub: ch.SubmitProducer(), bufs: make(chan uint32, l.Buffers), slotFree: make(chan uint32, l.RingSize),
		slots: make([]opSlot, l.RingSize), kick: make(chan struct{}, 1)}
	for i := range l.Buffers {
		ep.bufs <- uint32(i)
	}
	for i := range ep.slots {
		ep.slots[i].done = make(chan struct{}, 1)
		ep.slotFree <- uint32(i)
	}
	ep.done.Add(2)
	go ep.readLoop()
	go ep.completeLoop(ch.CompleteConsumer())
	return ep, nil
}

func closeFd(fd int) {
	if fd >= 0 {
		unix.Close(fd)
	}
}

func replyErr(op string, m *ctl.Msg) error {
	return &peregrine.Error{Op: op, Status: peregrine.Status(m.Status), Cause: fmt.Errorf("appliance: %s", m.Text)}
}

func (ep *Endpoint) closedErr(op string) error {
	cause := errors.New("the appliance is gone")
	if ep.closed.Load() {
		cause = errors.New("the endpoint is closed")
	}
	return &peregrine.Error{Op: op, Status: peregrine.StatusClosed, Cause: cause}
}

func (ep *Endpoint) die() {
	ep.deadOnce.Do(func() {
		ep.dead.Store(true)
		close(ep.deadCh)
	})
}

// Addr returns the appliance's endpoint address, for peers' Dial.
func (ep *Endpoint) Addr() peregrine.Addr { return ep.addr }

// Close detaches: the appliance closes the endpoint's connections and ends
// its operations; calls waiting return ErrClosed. Idempotent.
func (ep *Endpoint) Close() error {
	if ep.closed.Swap(true) {
		return nil
	}
	ep.die()
	err := ep.sock.Close()
	ep.done.Wait()
	ep.life.Lock() // every call has left the channel
	ep.ch.Close()
	ep.life.Unlock()
	return err
}

// readLoop reads the control replies until the socket ends.
func (ep *Endpoint) readLoop() {
	defer ep.done.Done()
	defer ep.die()
	buf := make([]byte, ctl.MaxLen+1)
	for {
		n, err := ep.sock.Read(buf)
		if err != nil {
			return
		}
		var m ctl.Msg
		if m.Decode(buf[:n]) != nil {
			continue
		}
		ep.pmu.Lock()
		w, ok := ep.pending[m.ID]
		delete(ep.pending, m.ID)
		ep.pmu.Unlock()
		if ok {
			w <- m
		} else if m.Type == ctl.RConn {
			// A dial or accept whose caller gave up: close what it made.
			go ep.call(context.Background(), &ctl.Msg{Type: ctl.TClose, Conn: m.Conn})
		}
	}
}

// call sends a control request and waits for its reply.
func (ep *Endpoint) call(ctx context.Context, m *ctl.Msg) (ctl.Msg, error) {
	w := make(chan ctl.Msg, 1)
	ep.pmu.Lock()
	ep.nextReq++
	m.ID = ep.nextReq
	ep.pending[m.ID] = w
	ep.pmu.Unlock()
	forget := func() {
		ep.pmu.Lock()
		delete(ep.pending, m.ID)
		ep.pmu.Unlock()
	}
	if ep.dead.Load() {
		forget()
		return ctl.Msg{}, errClosedMarker
	}
	var b [ctl.MaxLen]byte
	ep.wmu.Lock()
	_, err := ep.sock.Write(m.Encode(b[:0]))
	ep.wmu.Unlock()
	if err != nil {
		forget()
		return ctl.Msg{}, errClosedMarker
	}
	select {
	case r := <-w:
		return r, nil
	case <-ep.deadCh:
		forget()
		return ctl.Msg{}, errClosedMarker
	case <-ctx.Done():
		forget()
		return ctl.Msg{}, ctx.Err()
	}
}

var errClosedMarker = errors.New("closed")

func (ep *Endpoint) ctlErr(op string, ctx context.Context, err error) error {
	if err == errClosedMarker {
		return ep.closedErr(op)
	}
	return &peregrine.Error{Op: op, Status: peregrine.StatusCancelled, Cause: context.Cause(ctx)}
}

// completeLoop hands each completion to the call waiting for it.
func (ep *Endpoint) completeLoop(cc *shm.Consumer[shm.Comp]) {
	defer ep.done.Done()
	comps := make([]shm.Comp, 64)
	idle := 0
	for !ep.dead.Load() {
		n, _ := cc.Dequeue(comps)
		for _, c := range comps[:n] {
			i := uint32(c.Cookie)
			if uint64(i) >= uint64(len(ep.slots)) || ep.slots[i].gen.Load() != uint32(c.Cookie>>32) {
				continue // not ours: the appliance answers only what we asked
			}
			s := &ep.slots[i]
			s.status, s.n = c.Status, c.Len
			s.done <- struct{}{}
		}
		if n > 0 {
			idle = 0
			continue
		}
		if ep.busy.Load() > 0 {
			idle++
			if idle < 512 {
				runtime.Gosched()
			} else {
				time.Sleep(20 * time.Microsecond)
			}
			continue
		}
		idle = 0
		select {
		case <-ep.kick:
		case <-ep.deadCh:
		}
	}
}

// submit publishes one descriptor, waiting for ring room (cancels may
// fill it for a moment) unless the appliance is gone.
func (ep *Endpoint) submit(d shm.Desc) bool {
	ep.smu.Lock()
	defer ep.smu.Unlock()
	ep.one[0] = d
	for {
		if n, _ := ep.sub.Enqueue(ep.one[:]); n == 1 {
			return true
		}
		if ep.dead.Load() {
			return false
		}
		runtime.Gosched()
	}
}

// do runs one data operation on buffer buf and waits for its completion.
func (ep *Endpoint) do(ctx context.Context, op uint8, conn, buf uint32, n int) (uint32, peregrine.Status, error) {
	var i uint32
	select {
	case i = <-ep.slotFree:
	case <-ep.deadCh:
		return 0, peregrine.StatusClosed, nil
	case <-ctx.Done():
		return 0, peregrine.StatusCancelled, context.Cause(ctx)
	}
	s := &ep.slots[i]
	cookie := uint64(s.gen.Add(1))<<32 | uint64(i)
	if ep.busy.Add(1) == 1 {
		select {
		case ep.kick <- struct{}{}:
		default:
		}
	}
	defer ep.busy.Add(-1)
	if !ep.submit(shm.Desc{Op: op, Conn: conn, Buf: buf, Len: uint32(n), Cookie: cookie}) {
		return 0, peregrine.StatusClosed, nil
	}
	var cause error
	select {
	case <-s.done:
	case <-ep.deadCh:
		return 0, peregrine.StatusClosed, nil // the slot stays taken: the channel is dead
	case <-ctx.Done():
		cause = context.Cause(ctx)
		ep.submit(shm.Desc{Op: shm.OpCancel, Cookie: cookie})
		select {
		case <-s.done:
		case <-ep.deadCh:
			return 0, peregrine.StatusClosed, nil
		}
	}
	st, got := peregrine.Status(s.status), s.n
	ep.slotFree <- i
	if st == peregrine.StatusCancelled && cause != nil {
		return got, st, cause
	}
	return got, st, nil
}

func (ep *Endpoint) getBuf(ctx context.Context) (uint32, error) {
	select {
	case b := <-ep.bufs:
		return b, nil
	default:
	}
	select {
	case b := <-ep.bufs:
		return b, nil
	case <-ep.deadCh:
		return 0, errClosedMarker
	case <-ctx.Done():
		return 0, context.Cause(ctx)
	}
}

// Listener accepts the connections peers dial to the appliance's endpoint
// for this application (one application listens on an endpoint at a time).
type Listener struct {
	ep   *Endpoint
	done atomic.Bool
}

// Listen makes the appliance accept connections for this application.
func (ep *Endpoint) Listen(opts peregrine.ConnOptions) (*Listener, error) {
	m := ctl.Msg{Type: ctl.TListen, A: uint32(opts.RecvSlots), B: uint32(opts.MaxMessage), Timeout: uint64(opts.Timeout)}
	if err := ep.request("listen", &m); err != nil {
		return nil, err
	}
	return &Listener{ep: ep}, nil
}

// Accept waits for the next connection a peer dialled.
func (l *Listener) Accept(ctx context.Context) (*Conn, error) {
	if l.done.Load() {
		return nil, &peregrine.Error{Op: "accept", Status: peregrine.StatusClosed, Cause: errors.New("the listener is closed")}
	}
	return l.ep.connect(ctx, "accept", &ctl.Msg{Type: ctl.TAccept})
}

// Close stops accepting; connections accepted already stay open, and
// another application may listen.
func (l *Listener) Close() error {
	if l.done.Swap(true) {
		return nil
	}
	return l.ep.request("close", &ctl.Msg{Type: ctl.TUnlisten})
}

// request runs a control request whose answer is ROK or an error.
func (ep *Endpoint) request(op string, m *ctl.Msg) error {
	ep.life.RLock()
	defer ep.life.RUnlock()
	r, err := ep.call(context.Background(), m)
	if err != nil {
		return ep.ctlErr(op, context.Background(), err)
	}
	if r.Type != ctl.ROK {
		return replyErr(op, &r)
	}
	return nil
}

// Dial opens a connection to peer through the appliance.
func (ep *Endpoint) Dial(ctx context.Context, peer peregrine.Addr, opts peregrine.ConnOptions) (*Conn, error) {
	m := ctl.Msg{Type: ctl.TDial, MAC: peer.MAC, A: uint32(opts.RecvSlots), B: uint32(opts.MaxMessage), Timeout: uint64(opts.Timeout)}
	m.SetAddr(peer.IP)
	if opts.Ordered {
		m.Flag = 1
	}
	return ep.connect(ctx, "dial", &m)
}

func (ep *Endpoint) connect(ctx context.Context, op string, m *ctl.Msg) (*Conn, error) {
	ep.life.RLock()
	defer ep.life.RUnlock()
	r, err := ep.call(ctx, m)
	if err != nil {
		return nil, ep.ctlErr(op, ctx, err)
	}
	if r.Type != ctl.RConn {
		return nil, replyErr(op, &r)
	}
	return &Conn{ep: ep, id: r.Conn, peer: peregrine.Addr{IP: r.Addr(), MAC: r.MAC}, ordered: r.Flag&1 != 0}, nil
}

// Conn is a connection through the appliance.
type Conn struct {
	ep      *Endpoint
	id      uint32
	peer    peregrine.Addr
	ordered bool
	closed  atomic.Bool
}

// RemoteAddr returns the peer's address.
func (c *Conn) RemoteAddr() peregrine.Addr { return c.peer }

// Ordered reports whether the connection is ordered.
func (c *Conn) Ordered() bool { return c.ordered }

func (c *Conn) fail(op string, st peregrine.Status, cause error) error {
	if st == peregrine.StatusOK {
		return nil
	}
	if st == peregrine.StatusClosed && cause == nil {
		return c.ep.closedErr(op)
	}
	return &peregrine.Error{Op: op, Status: st, Cause: cause}
}

// Send sends msg as one message (at most one buffer long). msg is copied
// into a channel buffer before Send publishes it.
func (c *Conn) Send(ctx context.Context, msg []byte) error {
	ep := c.ep
	ep.life.RLock()
	defer ep.life.RUnlock()
	if ep.dead.Load() {
		return ep.closedErr("send")
	}
	if len(msg) > ep.ch.Layout.BufSize {
		return &peregrine.Error{Op: "send", Status: peregrine.StatusInvalid,
			Cause: fmt.Errorf("%w: %d bytes, the channel's buffers hold %d", peregrine.ErrTooLarge, len(msg), ep.ch.Layout.BufSize)}
	}
	b, err := ep.getBuf(ctx)
	if err != nil {
		return ep.ctlErr("send", ctx, err)
	}
	copy(ep.ch.Buffer(b), msg)
	_, st, cause := ep.do(ctx, shm.OpSend, c.id, b, len(msg))
	ep.bufs <- b
	return c.fail("send", st, cause)
}

// Recv waits for the next message and copies it into buf, returning its
// length. A message longer than buf is an error wrapping ErrTooLarge (the
// message is dropped: unlike the in-process Recv, it is not kept for a
// larger buffer).
func (c *Conn) Recv(ctx context.Context, buf []byte) (int, error) {
	ep := c.ep
	ep.life.RLock()
	defer ep.life.RUnlock()
	if ep.dead.Load() {
		return 0, ep.closedErr("recv")
	}
	b, err := ep.getBuf(ctx)
	if err != nil {
		return 0, ep.ctlErr("recv", ctx, err)
	}
	n, st, cause := ep.do(ctx, shm.OpRecv, c.id, b, ep.ch.Layout.BufSize)
	if st == peregrine.StatusOK {
		if int(n) > len(buf) {
			ep.bufs <- b
			return 0, &peregrine.Error{Op: "recv", Status: peregrine.StatusLocalLength,
				Cause: fmt.Errorf("a message of %d bytes for a buffer of %d", n, len(buf))}
		}
		copy(buf, ep.ch.Bytes(b, 0, n))
	}
	ep.bufs <- b
	return int(n), c.fail("recv", st, cause)
}

// Close closes the connection.
func (c *Conn) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	return c.ep.request("close", &ctl.Msg{Type: ctl.TClose, Conn: c.id})
}
