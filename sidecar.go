package peregrine

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/peregrine-net/peregrine/host/ctl"
	"github.com/peregrine-net/peregrine/host/shm"
	"github.com/peregrine-net/peregrine/internal/sidecar"
)

// The second door: an Endpoint attached to a running appliance (peregrine
// serve) over its Unix socket. Control calls (dial, listen, accept, close,
// register) are requests on the socket; data operations are descriptors on
// the shared-memory channel's submit ring, answered on its completion
// ring (internal/sidecar carries both).
//
// Every data operation is an Op, as in-process: a blocking call starts one
// of the endpoint's spare ops and waits for it. Starting an op takes an
// operation slot (its cookie names the slot and the start's generation)
// and, for a Send or a Recv, a run of consecutive buffers of the channel's
// pool big enough for the whole message. Whoever reaps the channel's
// completion ring finishes it: the caller waiting for an op reaps the ring
// itself, on its own goroutine, so that its completion needs no hand-off
// from another goroutine (a wake-up of a parked thread, tens of
// microseconds where threads park); the client's completion goroutine
// reaps for the ops nobody waits on (internal/sidecar).
//
// Where bytes are copied, and why:
//   - Send copies msg into its run when it starts: the caller's memory is
//     on its own heap, which the appliance cannot map. The appliance sends
//     from the run without a copy (its transport reads the shared mapping
//     as each packet goes out, resends too). msg is the caller's again as
//     soon as the start returned, before the op completes.
//   - Recv: the appliance's transport places the message's packets in its
//     own receive slot by delivery index and copies it into the run (the
//     in-process asynchronous Recv's copy); whoever reaps the completion
//     (the waiting caller, most often) then copies it out of the run into
//     buf (the caller's heap, again). A blocking Recv posted ahead
//     (sidecar_ahead.go) keeps its run until a call takes it, which then
//     copies it out.
//   - Push and Pull copy nothing in the appliance or here: the region is a
//     memfd both sides map, the transport reads and writes it in place.

type sidecarEP struct {
	cl    *sidecar.Client
	pub   *Endpoint
	addr  Addr
	slots []sidecarSlot
	free  chan uint32 // free operation slots
	spare spareOps

	// life: starters hold it shared while they touch the channel; Close
	// takes it to unmap.
	life sync.RWMutex

	rmu     sync.Mutex
	regions map[uint32]*Region // registered, by the appliance's id

	// aheadBufs: the channel's buffers that Recvs posted ahead hold.
	aheadBufs atomic.Int64

	// Tests' hooks (nil otherwise): each poll of the ring by a waiter, and
	// each park of a waiter that found nothing for a while.
	onWaitPoll func(*Op)
	onIdlePark func(*Op)
}

// sidecarSlot is one operation in flight: the op, claimed exactly once by
// whoever swaps it out (its completion, or the appliance's death), and the
// cookie its descriptor carries.
type sidecarSlot struct {
	op     atomic.Pointer[Op]
	cookie atomic.Uint64
	gen    atomic.Uint32
}

type sidecarConn struct {
	s      *sidecarEP
	id     uint32
	closed atomic.Bool

	// The Recv posted ahead of the next call (one at most): ahead while
	// nobody took it, posted or ended; aheadOut from its post until the
	// Recv that took it (or the close) released it.
	amu      sync.Mutex
	ahead    *Op
	aheadOut bool
}

type sidecarListener struct {
	s      *sidecarEP
	closed atomic.Bool
}

type sidecarRegion struct {
	id  uint32
	mem *shm.Region
}

func attach(socket string, opts AttachOptions) (*Endpoint, error) {
	if opts.Buffers < 0 || opts.BufSize < 0 || opts.RingSize < 0 {
		return nil, &Error{Op: "attach", Status: StatusInvalid, Cause: invalidf("AttachOptions %+v must not be negative", opts)}
	}
	cl, err := sidecar.Attach(socket, sidecar.Options{Buffers: opts.Buffers, BufSize: opts.BufSize, RingSize: opts.RingSize})
	if err != nil {
		return nil, sidecarErr("attach", err)
	}
	l := cl.Ch.Layout
	s := &sidecarEP{cl: cl, addr: Addr{IP: cl.IP, MAC: cl.MAC}, slots: make([]sidecarSlot, l.RingSize),
		free: make(chan uint32, l.RingSize), regions: map[uint32]*Region{}}
	for i := range l.RingSize {
		s.free <- uint32(i)
	}
	if s.spare, err = newSpareOps(l.RingSize); err != nil {
		cl.Close()
		cl.CloseChannel()
		return nil, &Error{Op: "attach", Status: StatusInvalid, Cause: err}
	}
	s.pub = &Endpoint{sc: s}
	cl.Start(s.complete, s.died)
	ctx, cancel := context.WithTimeout(context.Background(), attachBellTimeout)
	defer cancel()
	if err := cl.UseBell(ctx); err != nil {
		return nil, errors.Join(sidecarErr("attach", err), s.close())
	}
	return s.pub, nil
}

// attachBellTimeout bounds Attach's one control request after the
// attach itself: an appliance that answers no request is gone.
const attachBellTimeout = 10 * time.Second

// sidecarErr turns an error of internal/sidecar into the vocabulary.
func sidecarErr(op string, err error) error {
	var r *sidecar.Refusal
	switch {
	case err == nil:
		return nil
	case errors.As(err, &r):
		return &Error{Op: op, Status: Status(r.Status), Cause: errors.New(r.Error())}
	case errors.Is(err, sidecar.ErrGone):
		return &Error{Op: op, Status: StatusClosed, Cause: err}
	}
	return &Error{Op: op, Status: StatusCancelled, Cause: err} // the context's cause
}

func (s *sidecarEP) goneErr(op string) error {
	if s.cl.Closed() {
		return &Error{Op: op, Status: StatusClosed, Cause: errors.New("the endpoint is closed")}
	}
	return &Error{Op: op, Status: StatusClosed, Cause: sidecar.ErrGone}
}

func (s *sidecarEP) close() error {
	err := s.cl.Close() // the goroutines stop; died ends every op in flight
	s.life.Lock()       // every starter has left the channel
	defer s.life.Unlock()
	s.rmu.Lock()
	for id, r := range s.regions {
		r.r.sc.mem.Close()
		delete(s.regions, id)
	}
	s.rmu.Unlock()
	if cerr := s.cl.CloseChannel(); err == nil {
		err = cerr
	}
	if err != nil {
		return &Error{Op: "close", Status: StatusClosed, Cause: err}
	}
	return nil
}

// complete finishes the op a completion names (on the goroutine that holds
// the client's reaper token).
func (s *sidecarEP) complete(c shm.Comp) {
	i := uint32(c.Cookie)
	if uint64(i) >= uint64(len(s.slots)) {
		return
	}
	sl := &s.slots[i]
	if sl.cookie.Load() != c.Cookie {
		return // not an op of ours in flight: the appliance answers only what it was asked
	}
	op := sl.op.Swap(nil)
	if op == nil {
		return
	}
	o := &op.o
	s.uncount(o)
	n, st := int(c.Len), Status(c.Status)
	ahead, gen := o.ahead, o.gen.Load() // read before the op is the taker's again
	var why error
	switch {
	case st == StatusOK && o.kind == opRecv:
		room := len(o.buf)
		if ahead != nil {
			room = o.aheadLen
		}
		if n > room || n > o.nrun*s.cl.Ch.Layout.BufSize {
			st, why = StatusLocalLength, fmt.Errorf("the appliance reported a %d-byte message for a %d-byte buffer", n, room)
			n = 0
			break
		}
		if ahead == nil {
			copy(o.buf, s.cl.Ch.Bytes(o.run, 0, uint32(n)))
		} // else the Recv that takes it copies it out of the run
	case st == StatusCancelled:
		why = o.causeOf()
	case st == StatusLocalLength:
		why = fmt.Errorf("%w: the message is longer than the %d-byte buffer (it stays queued)", ErrTooLarge, len(o.buf))
	case st != StatusOK:
		why = errors.New("through the appliance")
	}
	if o.nrun > 0 && (ahead == nil || st != StatusOK) {
		s.cl.Free(o.run, o.nrun)
		o.nrun = 0
	}
	s.free <- i
	op.complete(n, st, why)
	if ahead != nil {
		ahead.aheadEnded(op, gen)
	}
}

// uncount ends the client's count of an op in flight, once whoever ends
// it (its completion, the appliance's death, a failed submit).
func (s *sidecarEP) uncount(o *opState) {
	if o.counted.Swap(2) == 1 {
		s.cl.End()
	}
}

// died ends every op still in flight once the appliance is gone (after
// the last completion was handled).
func (s *sidecarEP) died() {
	for i := range s.slots {
		if op := s.slots[i].op.Swap(nil); op != nil {
			s.uncount(&op.o)
			op.complete(0, StatusClosed, s.goneErr(op.o.kind.String()))
		}
	}
}

// check validates a data op's arguments on the caller's goroutine.
func (sc *sidecarConn) check(kind opKind, buf []byte, r *Region, off int, remote RemoteAddr) error {
	s := sc.s
	if sc.closed.Load() {
		return &Error{Op: kind.String(), Status: StatusClosed, Cause: errors.New("closed by this side")}
	}
	if s.cl.IsDead() {
		return s.goneErr(kind.String())
	}
	l := s.cl.Ch.Layout
	switch kind {
	case opSend, opRecv:
		if len(buf) > l.Buffers*l.BufSize {
			st := StatusRemoteInvalid
			if kind == opRecv {
				st = StatusInvalid
			}
			return &Error{Op: kind.String(), Status: st, Cause: fmt.Errorf("%w: %d bytes, more than the channel's pool holds (%d buffers of %d bytes: AttachOptions)", ErrTooLarge, len(buf), l.Buffers, l.BufSize)}
		}
	case opPush, opPull:
		if r == nil || r.r.sc == nil || r.r.ep != s.pub {
			return &Error{Op: kind.String(), Status: StatusInvalid, Cause: invalidf("the local region is not registered with this connection's endpoint")}
		}
		if off < 0 || remote.n < 0 || off > len(r.r.mem) || remote.n > len(r.r.mem)-off {
			return &Error{Op: kind.String(), Status: StatusInvalid, Cause: invalidf("span [%d, +%d) is outside the %d-byte local region", off, remote.n, len(r.r.mem))}
		}
	}
	return nil
}

// blocking runs a data op with a spare op and waits for it.
func (sc *sidecarConn) blocking(ctx context.Context, kind opKind, buf []byte, r *Region, off int, remote RemoteAddr) (int, error) {
	if kind == opRecv {
		return sc.recv(ctx, buf)
	}
	return sc.run(ctx, kind, buf, r, off, remote)
}

// run starts a data op with a spare op and waits for it.
func (sc *sidecarConn) run(ctx context.Context, kind opKind, buf []byte, r *Region, off int, remote RemoteAddr) (int, error) {
	s := sc.s
	op := s.spare.take()
	if err := sc.start(ctx, op, kind, buf, r, off, remote, true); err != nil {
		s.spare.put(op)
		return 0, err
	}
	n, err := s.wait(ctx, op, true)
	s.spare.put(op)
	return n, err
}

// A waiter that reaps and finds nothing parks after sidecarIdlePolls
// polls or sidecarSpin of them, whichever comes first, and leaves its op to
// the completion goroutine: a round trip through the appliance ends well
// within either, and a long wait (a Recv with no sender) keeps no CPU.
const (
	sidecarIdlePolls = 1 << 14
	sidecarSpin      = 200 * time.Microsecond
)

// wait waits for op, started on this endpoint, reaping the completion ring
// itself while it holds the client's token; while another goroutine holds
// it (and reaps for everyone), it looks at the op (yielding) and then
// parks until the op completes or the token is free. watching: the caller
// watches the ring already (start's watch).
func (s *sidecarEP) wait(ctx context.Context, op *Op, watching bool) (int, error) {
	o := &op.o
	cl := s.cl
	if !watching {
		cl.Watch()
	}
	done := ctx.Done()
	misses, idle := 0, 0
	var spun time.Time
	for o.state.Load() != stateDone {
		select {
		case <-done:
			op.cancelWith(ctx)
			done = nil // the op ends Cancelled, or as it was ending
		default:
		}
		if n, ok := cl.TryReap(); ok {
			if s.onWaitPoll != nil {
				s.onWaitPoll(op)
			}
			misses = 0
			if n != 0 {
				idle = 0
				continue
			}
			if idle++; idle&31 != 0 {
				continue
			}
			if idle == 32 {
				spun = time.Now()
			} else if idle >= sidecarIdlePolls || time.Since(spun) >= sidecarSpin {
				cl.Unwatch() // the completion goroutine polls from here on
				if s.onIdlePark != nil {
					s.onIdlePark(op)
				}
				if op.park(ctx, done, nil) {
					done = nil
				}
				if o.state.Load() == stateDone {
					return op.result()
				}
				cl.Watch()
				idle = 0
				continue
			}
			runtime.Gosched()
			continue
		}
		if misses++; misses < spinChecks {
			runtime.Gosched()
			continue
		}
		misses = 0
		if !cl.ParkForToken() {
			continue
		}
		if op.park(ctx, done, cl.TokenFree()) {
			done = nil
		}
		cl.Unpark()
	}
	cl.PassWake()
	cl.Unwatch()
	return op.result()
}

// start begins a data op; with a nil ctx (an *Async call) it does not wait
// for a free slot or buffers, and fails with ErrBusy instead. conn.start
// has checked op. watch: when start succeeds the caller watches the
// completion ring (Client.Watch), from before the op is counted in flight,
// so that the completion goroutine is not woken for it; not before, for a
// wait for a slot or buffers needs the completions someone else reaps.
func (sc *sidecarConn) start(ctx context.Context, op *Op, kind opKind, buf []byte, r *Region, off int, remote RemoteAddr, watch bool) error {
	if err := sc.check(kind, buf, r, off, remote); err != nil {
		return err
	}
	s := sc.s
	s.life.RLock()
	defer s.life.RUnlock()
	if s.cl.IsDead() {
		// Close marks the client dead before it waits for this lock: past
		// it the channel may be unmapped.
		return s.goneErr(kind.String())
	}
	o := &op.o
	o.kind, o.buf, o.region, o.off, o.remote, o.n = kind, buf, r, off, remote, remote.n
	o.e, o.sc = nil, s
	want := len(buf)
	if o.ahead != nil {
		want = o.aheadLen // no caller's buffer yet
	}
	// A slot, then the buffers.
	var i uint32
	select {
	case i = <-s.free:
	default:
		if ctx == nil {
			return &Error{Op: kind.String(), Status: StatusBusy, Cause: fmt.Errorf("%d operations in flight, the channel's ring (AttachOptions.RingSize)", len(s.slots))}
		}
		select {
		case i = <-s.free:
		case <-s.cl.Dead():
			return s.goneErr(kind.String())
		case <-ctx.Done():
			return cancelled(kind.String(), ctx)
		}
	}
	d := shm.Desc{Op: shm.OpSend, Conn: sc.id, Len: uint32(want)}
	switch kind {
	case opSend, opRecv:
		k := s.cl.Buffers(want)
		first, ok := s.cl.TryAlloc(k)
		if !ok {
			if ctx == nil {
				s.free <- i
				return &Error{Op: kind.String(), Status: StatusBusy, Cause: fmt.Errorf("no run of %d free buffers in the channel's pool now", k)}
			}
			var err error
			if first, err = s.cl.Alloc(ctx, k); err != nil {
				s.free <- i
				return sidecarErr(kind.String(), err)
			}
		}
		o.run, o.nrun = first, k
		d.Buf = first
		if kind == opSend {
			copy(s.cl.Ch.Bytes(first, 0, uint32(len(buf))), buf)
			o.n = len(buf)
		} else {
			d.Op = shm.OpRecv
			if o.ahead != nil {
				d.Flags = shm.FlagAhead
			}
		}
	case opPush, opPull:
		d.Op = shm.OpPush
		if kind == opPull {
			d.Op = shm.OpPull
		}
		d.Buf, d.Off, d.Len, d.Key, d.Addr = r.r.sc.id, uint32(off), uint32(remote.n), remote.Key, remote.Addr
	}
	if err := op.prepare(); err != nil {
		if o.nrun > 0 {
			s.cl.Free(o.run, o.nrun)
			o.nrun = 0
		}
		s.free <- i
		return err
	}
	if q := op.CQ; q != nil {
		q.q.reaps(s)
	}
	sl := &s.slots[i]
	d.Cookie = uint64(sl.gen.Add(1))<<32 | uint64(i)
	o.cookie = d.Cookie
	sl.cookie.Store(d.Cookie)
	o.state.Store(statePosted)
	if watch {
		s.cl.Watch()
	}
	// Counted in flight before anyone can end it; a Recv posted ahead is
	// not (nobody waits for it yet: the completion goroutine need not
	// reap for it) until a Recv takes it.
	if o.ahead == nil {
		o.counted.Store(1)
		s.cl.Begin()
	} else {
		o.counted.Store(0)
	}
	sl.op.Store(op)
	if !s.cl.Submit(&d) || s.cl.IsDead() {
		// The appliance is gone: whoever swaps the op out (here, or the
		// death's sweep) ends it.
		if sl.op.Swap(nil) == op {
			s.uncount(o)
			op.complete(0, StatusClosed, s.goneErr(kind.String()))
		}
	}
	return nil
}

// cancel asks the appliance to stop op (started with this cookie).
func (s *sidecarEP) cancel(op *Op) {
	o := &op.o
	d := shm.Desc{Op: shm.OpCancel, Cookie: o.cookie}
	s.life.RLock()
	defer s.life.RUnlock()
	if s.cl.IsDead() {
		return // died ends it
	}
	s.cl.Submit(&d)
}

// Control.

func (s *sidecarEP) dial(ctx context.Context, peer Addr, opts ConnOptions) (*Conn, error) {
	if err := checkConnOptions(&opts); err != nil {
		return nil, &Error{Op: "dial", Status: StatusInvalid, Cause: err}
	}
	if !peer.IP.IsValid() {
		return nil, &Error{Op: "dial", Status: StatusInvalid, Cause: invalidf("the peer's IP is required")}
	}
	m := ctl.Msg{Type: ctl.TDial, MAC: peer.MAC, A: uint32(opts.RecvSlots), B: uint32(opts.MaxMessage), Timeout: uint64(opts.Timeout)}
	m.SetAddr(peer.IP)
	if opts.Ordered {
		m.Flag = 1
	}
	return s.connect(ctx, "dial", &m)
}

func (s *sidecarEP) connect(ctx context.Context, op string, m *ctl.Msg) (*Conn, error) {
	r, err := s.cl.Call(ctx, m)
	return s.conn(op, r, err)
}

// conn makes the Conn of an RConn reply.
func (s *sidecarEP) conn(op string, r ctl.Msg, err error) (*Conn, error) {
	if err != nil {
		return nil, sidecarErr(op, err)
	}
	if r.Type != ctl.RConn {
		return nil, &Error{Op: op, Status: StatusInvalid, Cause: fmt.Errorf("the appliance answered type %d", r.Type)}
	}
	pub := &Conn{}
	pub.c.pub = pub
	pub.c.peer = Addr{IP: r.Addr(), MAC: r.MAC}
	pub.c.ordered = r.Flag&1 != 0
	pub.c.sc = &sidecarConn{s: s, id: r.Conn}
	return pub, nil
}

func (s *sidecarEP) request(op string, m *ctl.Msg) error {
	r, err := s.cl.Call(contextBackground, m)
	if err != nil {
		return sidecarErr(op, err)
	}
	if r.Type != ctl.ROK {
		return &Error{Op: op, Status: StatusInvalid, Cause: fmt.Errorf("the appliance answered type %d", r.Type)}
	}
	return nil
}

func (s *sidecarEP) listen(opts ConnOptions) (*Listener, error) {
	if err := checkConnOptions(&opts); err != nil {
		return nil, &Error{Op: "listen", Status: StatusInvalid, Cause: err}
	}
	if opts.Ordered {
		return nil, &Error{Op: "listen", Status: StatusNotSupported, Cause: errors.New("ConnOptions.Ordered on a listener: an accepted connection is ordered when its peer dials it ordered")}
	}
	m := ctl.Msg{Type: ctl.TListen, A: uint32(opts.RecvSlots), B: uint32(opts.MaxMessage), Timeout: uint64(opts.Timeout)}
	if err := s.request("listen", &m); err != nil {
		return nil, err
	}
	l := &Listener{}
	l.l.sc = &sidecarListener{s: s}
	return l, nil
}

func (sl *sidecarListener) accept(ctx context.Context) (*Conn, error) {
	if sl.closed.Load() {
		return nil, &Error{Op: "accept", Status: StatusClosed, Cause: errors.New("the listener is closed")}
	}
	r, err := sl.s.cl.Accept(ctx)
	return sl.s.conn("accept", r, err)
}

func (sl *sidecarListener) close() error {
	if sl.closed.Swap(true) {
		return nil
	}
	err := sl.s.request("listen", &ctl.Msg{Type: ctl.TUnlisten})
	// Connections abandoned Accepts took and no Accept came for: nobody
	// will take them now.
	for {
		m, ok := sl.s.cl.Unaccepted()
		if !ok {
			break
		}
		sl.s.cl.Call(contextBackground, &ctl.Msg{Type: ctl.TClose, Conn: m.Conn})
	}
	if errors.Is(err, ErrClosed) {
		return nil // the endpoint closed: nothing listens anyway
	}
	return err
}

// closeDrain bounds a close's wait for the appliance to take the
// descriptors submitted before it.
const closeDrain = time.Second

func (sc *sidecarConn) close() error {
	if sc.closed.Swap(true) {
		return nil
	}
	// The descriptors already submitted (the Recv posted ahead, most
	// often) reach the appliance before the close: a descriptor it took
	// after would name a connection it no longer has (refused, a bad
	// connection), or, its id given to a newer one, that one.
	sc.s.cl.WaitConsumed(closeDrain)
	err := sc.s.request("close", &ctl.Msg{Type: ctl.TClose, Conn: sc.id})
	sc.closeAhead()
	if errors.Is(err, ErrClosed) {
		return nil
	}
	return err
}

func (s *sidecarEP) register(mem []byte, access Access) (*Region, error) {
	if len(mem) == 0 || access&^(RemoteWrite|RemoteRead) != 0 {
		return nil, &Error{Op: "register", Status: StatusInvalid, Cause: invalidf("give a non-empty buffer and RemoteWrite, RemoteRead or 0 (%d bytes, access %#x)", len(mem), uint8(access))}
	}
	if uint64(len(mem)) > shm.MaxRegion {
		return nil, &Error{Op: "register", Status: StatusInvalid, Cause: invalidf("a %d-byte region through the sidecar (at most %d)", len(mem), uint64(shm.MaxRegion))}
	}
	id, key, sm, err := s.cl.Register(len(mem), uint8(access))
	if err != nil {
		return nil, sidecarErr("register", err)
	}
	// The region starts as mem's copy; from here on its memory is the
	// shared mapping (Region.Bytes), which the appliance's transport reads
	// and writes in place.
	copy(sm.Bytes(), mem)
	reg := &Region{r: region{key: key, mem: sm.Bytes(), ep: s.pub, sc: &sidecarRegion{id: id, mem: sm}}}
	s.rmu.Lock()
	s.regions[id] = reg
	s.rmu.Unlock()
	return reg, nil
}

func (s *sidecarEP) deregister(r *Region) error {
	if r == nil || r.r.sc == nil || r.r.ep != s.pub {
		return &Error{Op: "deregister", Status: StatusInvalid, Cause: invalidf("the region is not this endpoint's")}
	}
	s.rmu.Lock()
	_, ok := s.regions[r.r.sc.id]
	delete(s.regions, r.r.sc.id)
	s.rmu.Unlock()
	if !ok {
		return &Error{Op: "deregister", Status: StatusInvalid, Cause: invalidf("the region was deregistered already")}
	}
	err := s.request("deregister", &ctl.Msg{Type: ctl.TDeregister, Conn: r.r.sc.id})
	// This side's mapping goes now: the appliance keeps its own until its
	// operations on the region have completed.
	r.r.sc.mem.Close()
	if errors.Is(err, ErrClosed) {
		return nil
	}
	return err
}
