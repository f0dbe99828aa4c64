// Package sidecar is the application's side of the sidecar's wire: attach
// to an appliance's Unix socket, map the shared-memory channel it passes,
// run control requests and carry descriptors and completions on the
// channel's rings. It knows nothing of the public package above it, which
// turns its calls into peregrine's Endpoint, Conn, Listener, Region and Op
// (peregrine.Attach): statuses cross here as the numbers the appliance
// sends, and the public package gives them their errors.
//
// # Who owns a buffer
//
// The channel's pool is the client's: its free map lives here, never in
// the appliance. A caller takes a run of consecutive buffers (Alloc) for
// one operation, names it in a descriptor, and frees it once the
// operation's completion came back (or the channel died). The appliance
// reads or writes a run only between the descriptor and its completion.
//
// # Completions
//
// Whoever holds the reaper token reads the completion ring and hands each
// completion to the callback given to Start, on its own goroutine: a caller
// waiting for an operation (TryReap, between Watch and Unwatch) or, while
// no caller watches, the completion goroutine. A waiter that reaps its own
// completion takes it without a hand-off between goroutines, which on a
// machine whose threads park costs a thread's wake-up. The completion
// goroutine polls only while operations are in flight (Begin, End) and no
// caller watches, and parks otherwise, so an idle client costs no CPU.
// The ring's consumer is single-consumer: the token is what lets several
// goroutines take turns at it.
//
// # When the appliance goes away
//
// The socket's end of file marks the client dead: Dead is closed, control
// calls and submissions fail with ErrGone, and the callback given to Start
// for the death runs once, after the completion goroutine has stopped and
// taken the reaper token for good (a reaper's batch in progress ends
// first, and no reaper starts another), so that the layer above can end
// every operation still in flight and no completion comes after.
package sidecar

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/peregrine-net/peregrine/host/ctl"
	"github.com/peregrine-net/peregrine/host/shm"
)

// ErrGone: the appliance is gone (or the client was closed).
var ErrGone = errors.New("the appliance is gone")

// Refusal is a control request the appliance answered with an error: the
// status (a peregrine.Status) and its text.
type Refusal struct {
	Status uint8
	Text   string
}

func (r *Refusal) Error() string { return "appliance: " + r.Text }

// Options are the channel's geometry to ask for; zero fields take the
// appliance's defaults.
type Options struct {
	Buffers  int
	BufSize  int
	RingSize int
}

// Client is one attachment: a control socket and a channel.
type Client struct {
	Ch  *shm.Channel
	IP  netip.Addr
	MAC [6]byte

	sock     *net.UnixConn
	bell     int // the channel's bell (UseBell), -1 without
	dead     atomic.Bool
	deadCh   chan struct{}
	deadOnce sync.Once
	closed   atomic.Bool

	// control
	wmu     sync.Mutex
	pmu     sync.Mutex
	pending map[uint32]chan reply
	nextReq uint32
	// An accept whose caller gave up still waits in the appliance, and
	// takes the next connection: forgot remembers it, and the connection
	// it returns waits in accepted for the next Accept.
	forgot   map[uint32]struct{}
	accepted chan ctl.Msg

	// data
	smu  sync.Mutex
	sub  *shm.Producer[shm.Desc]
	one  [1]shm.Desc
	busy atomic.Int64 // operations in flight
	kick chan struct{}
	wg   sync.WaitGroup

	// The reaper token: held by whoever reads the completion ring. The
	// consumer and the batch are the holder's alone; the CAS that takes
	// the token and the store that gives it back order one holder's
	// reads and writes before the next's. After death the completion
	// goroutine keeps it, so no completion is taken after death's sweep
	// and nothing reads the ring once it may be unmapped. parked counts
	// waiters parked for the token, woken through tokenFree; reapers the
	// callers watching the ring (the completion goroutine polls while
	// there are none).
	token     atomic.Bool
	parked    atomic.Int32
	tokenFree chan struct{}
	reapers   atomic.Int32
	cc        *shm.Consumer[shm.Comp]
	comps     []shm.Comp
	onComp    func(shm.Comp)

	// The pool's free map: bit i set while buffer i is taken.
	amu   sync.Mutex
	taken []uint64
	wake  chan struct{} // closed by the next Free, while Alloc waits
}

type reply struct {
	m  ctl.Msg
	fd int
}

// Attach connects to the appliance at socket and maps the channel it gives.
func Attach(socket string, opts Options) (*Client, error) {
	c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: socket, Net: "unixpacket"})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrGone, err)
	}
	req := ctl.Msg{Type: ctl.TAttach, ID: 1, A: uint32(opts.Buffers), B: uint32(opts.BufSize), C: uint32(opts.RingSize)}
	var b [ctl.MaxLen + 1]byte
	if _, _, err := c.WriteMsgUnix(req.Encode(b[:0]), nil, nil); err != nil {
		c.Close()
		return nil, fmt.Errorf("%w: %v", ErrGone, err)
	}
	rep, fd, err := readMsg(c, b[:])
	if err != nil {
		c.Close()
		return nil, err
	}
	if rep.Type == ctl.RError {
		closeFd(fd)
		c.Close()
		return nil, &Refusal{Status: rep.Status, Text: rep.Text}
	}
	if rep.Type != ctl.RAttach || fd < 0 {
		closeFd(fd)
		c.Close()
		return nil, &Refusal{Status: statusInvalid, Text: fmt.Sprintf("bad attach reply (type %d, channel fd %d)", rep.Type, fd)}
	}
	ch, err := shm.Open(fd)
	if err != nil {
		unix.Close(fd)
		c.Close()
		return nil, &Refusal{Status: statusInvalid, Text: err.Error()}
	}
	cl := &Client{Ch: ch, IP: rep.Addr(), MAC: rep.MAC, sock: c, deadCh: make(chan struct{}),
		pending: map[uint32]chan reply{}, nextReq: 1, forgot: map[uint32]struct{}{}, accepted: make(chan ctl.Msg, 64), sub: ch.SubmitProducer(), kick: make(chan struct{}, 1), bell: -1,
		taken:     make([]uint64, (ch.Layout.Buffers+63)/64),
		tokenFree: make(chan struct{}, 1), cc: ch.CompleteConsumer(), comps: make([]shm.Comp, 64)}
	return cl, nil
}

// statusInvalid is peregrine.StatusInvalid's number, for a reply this side
// cannot read.
const statusInvalid = 35

// readMsg reads one control message and the fd it carries, if any.
func readMsg(c *net.UnixConn, b []byte) (ctl.Msg, int, error) {
	oob := make([]byte, unix.CmsgSpace(4*4))
	n, oobn, _, _, err := c.ReadMsgUnix(b, oob)
	if err != nil {
		return ctl.Msg{}, -1, fmt.Errorf("%w: %v", ErrGone, err)
	}
	fd := -1
	if cms, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
		for _, cm := range cms {
			fds, err := unix.ParseUnixRights(&cm)
			if err != nil {
				continue
			}
			for _, f := range fds {
				if fd < 0 {
					fd = f
				} else {
					unix.Close(f) // one fd a message: the rest are not ours to keep
				}
			}
		}
	}
	var m ctl.Msg
	if err := m.Decode(b[:n]); err != nil {
		closeFd(fd)
		return ctl.Msg{}, -1, &Refusal{Status: statusInvalid, Text: err.Error()}
	}
	return m, fd, nil
}

func closeFd(fd int) {
	if fd >= 0 {
		unix.Close(fd)
	}
}

// Start runs the client's goroutines: onComp receives every completion (on
// the goroutine of the token's holder), onDead runs once when the
// appliance is gone or the client closed, after the last onComp.
func (c *Client) Start(onComp func(shm.Comp), onDead func()) {
	c.wg.Add(1)
	go c.readLoop()
	c.startCompletions(onComp, onDead)
}

// startCompletions runs the completion goroutine.
func (c *Client) startCompletions(onComp func(shm.Comp), onDead func()) {
	c.onComp = onComp
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.completeLoop()
		// Keep the token from here on: a reaper in the middle of a batch
		// finishes it first, and none starts another.
		for !c.token.CompareAndSwap(false, true) {
			runtime.Gosched()
		}
		onDead()
	}()
}

// Dead is closed once the appliance is gone.
func (c *Client) Dead() <-chan struct{} { return c.deadCh }

// IsDead reports whether the appliance is gone.
func (c *Client) IsDead() bool { return c.dead.Load() }

// Closed reports whether Close was called.
func (c *Client) Closed() bool { return c.closed.Load() }

func (c *Client) die() {
	c.deadOnce.Do(func() {
		c.dead.Store(true)
		close(c.deadCh)
	})
}

// Close detaches: the appliance closes the connections and ends the
// operations; the client's goroutines stop. The channel stays mapped: the
// caller unmaps it (CloseChannel) once nothing of its uses it.
func (c *Client) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	c.die()
	err := c.sock.Close()
	c.wg.Wait()
	return err
}

// CloseChannel unmaps the channel and closes its bell (after Close).
func (c *Client) CloseChannel() error {
	closeFd(c.bell)
	c.bell = -1
	return c.Ch.Close()
}

// readLoop reads the control replies until the socket ends.
func (c *Client) readLoop() {
	defer c.wg.Done()
	defer c.die()
	buf := make([]byte, ctl.MaxLen+1)
	for {
		m, fd, err := readMsg(c.sock, buf)
		if errors.Is(err, ErrGone) {
			return
		}
		if err != nil {
			continue
		}
		c.pmu.Lock()
		w, ok := c.pending[m.ID]
		delete(c.pending, m.ID)
		_, acc := c.forgot[m.ID]
		delete(c.forgot, m.ID)
		c.pmu.Unlock()
		if acc && m.Type == ctl.RConn {
			closeFd(fd)
			select {
			case c.accepted <- m:
				continue
			default: // nobody has accepted 64 of them: let this one go
			}
		}
		switch {
		case ok:
			w <- reply{m, fd}
		case m.Type == ctl.RConn:
			// A dial or accept whose caller gave up: close what it made.
			closeFd(fd)
			go c.Call(context.Background(), &ctl.Msg{Type: ctl.TClose, Conn: m.Conn})
		case m.Type == ctl.RRegion:
			closeFd(fd)
			go c.Call(context.Background(), &ctl.Msg{Type: ctl.TDeregister, Conn: m.Conn})
		default:
			closeFd(fd)
		}
	}
}

// Call sends a control request and waits for its reply: the reply (an
// RError is a *Refusal), ErrGone, or the context's cause.
func (c *Client) Call(ctx context.Context, m *ctl.Msg) (ctl.Msg, error) {
	r, fd, err := c.CallFd(ctx, m)
	closeFd(fd)
	return r, err
}

// CallFd is Call for a reply that carries an fd (-1 if none), which the
// caller then owns.
func (c *Client) CallFd(ctx context.Context, m *ctl.Msg) (ctl.Msg, int, error) {
	r, fd, _, err := c.call(ctx, m, nil)
	return r, fd, err
}

// Accept asks the appliance for the next connection dialled to the
// listener. An earlier Accept whose caller gave up may have taken it: its
// connection is taken here first, or while this one waits (which then
// leaves its own for the next Accept).
func (c *Client) Accept(ctx context.Context) (ctl.Msg, error) {
	select {
	case m := <-c.accepted:
		return m, nil
	default:
	}
	r, fd, _, err := c.call(ctx, &ctl.Msg{Type: ctl.TAccept}, c.accepted)
	closeFd(fd)
	return r, err
}

// Unaccepted returns a connection an abandoned Accept took, if any (to
// close when the listener closes).
func (c *Client) Unaccepted() (ctl.Msg, bool) {
	select {
	case m := <-c.accepted:
		return m, true
	default:
		return ctl.Msg{}, false
	}
}

// call sends m and waits for its reply, or for a message on alt (then the
// request is abandoned: an accept's connection goes to accepted).
func (c *Client) call(ctx context.Context, m *ctl.Msg, alt <-chan ctl.Msg) (ctl.Msg, int, bool, error) {
	w := make(chan reply, 1)
	c.pmu.Lock()
	c.nextReq++
	m.ID = c.nextReq
	c.pending[m.ID] = w
	c.pmu.Unlock()
	// forget abandons the request; false when readLoop has taken its
	// reply already (it is in w, or about to be).
	forget := func() bool {
		c.pmu.Lock()
		defer c.pmu.Unlock()
		_, had := c.pending[m.ID]
		delete(c.pending, m.ID)
		if had && m.Type == ctl.TAccept {
			c.forgot[m.ID] = struct{}{}
		}
		return had
	}
	if c.dead.Load() {
		forget()
		return ctl.Msg{}, -1, false, ErrGone
	}
	var b [ctl.MaxLen]byte
	c.wmu.Lock()
	_, err := c.sock.Write(m.Encode(b[:0]))
	c.wmu.Unlock()
	if err != nil {
		forget()
		return ctl.Msg{}, -1, false, ErrGone
	}
	got := func(r reply) (ctl.Msg, int, bool, error) {
		if r.m.Type == ctl.RError {
			closeFd(r.fd)
			return r.m, -1, false, &Refusal{Status: r.m.Status, Text: r.m.Text}
		}
		return r.m, r.fd, false, nil
	}
	select {
	case r := <-w:
		return got(r)
	case a := <-alt:
		if !forget() {
			// This request's own connection came too: it is for the next
			// Accept (there is room: a was just taken out).
			if r := <-w; r.m.Type == ctl.RConn {
				c.accepted <- r.m
			}
		}
		return a, -1, true, nil
	case <-c.deadCh:
		forget()
		return ctl.Msg{}, -1, false, ErrGone
	case <-ctx.Done():
		if !forget() {
			return got(<-w) // answered already: the answer stands
		}
		return ctl.Msg{}, -1, false, context.Cause(ctx)
	}
}

// completeLoop reaps for the operations nobody watches: while some are in
// flight and no caller reaps, it polls (yielding, then sleeping); else it
// parks until Begin or the last Unwatch kicks it.
func (c *Client) completeLoop() {
	idle := 0
	for !c.dead.Load() {
		if c.reapers.Load() == 0 {
			if n, _ := c.TryReap(); n > 0 {
				idle = 0
				continue
			}
		}
		if c.busy.Load() > 0 && c.reapers.Load() == 0 {
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
		case <-c.kick:
		case <-c.deadCh:
		}
	}
}

// TryReap takes a batch of completions off the ring and hands each to
// onComp, if the token is free: ok false when another goroutine holds it
// or the client is dead (then nobody reaps again).
func (c *Client) TryReap() (n int, ok bool) {
	if !c.token.CompareAndSwap(false, true) {
		return 0, false
	}
	if c.dead.Load() {
		c.release()
		return 0, false
	}
	n, _ = c.cc.Dequeue(c.comps)
	for i := range c.comps[:n] {
		c.onComp(c.comps[i])
	}
	c.release()
	return n, true
}

// release gives the token back and wakes a waiter parked for it.
func (c *Client) release() {
	c.token.Store(false)
	if c.parked.Load() > 0 {
		select {
		case c.tokenFree <- struct{}{}:
		default:
		}
	}
}

// Watch marks a caller that reaps until its operation completed (or it
// parks: Unwatch first), so the completion goroutine need not poll. A
// blocking call watches before Begin, which then wakes nobody.
func (c *Client) Watch() { c.reapers.Add(1) }

// Unwatch ends a Watch; the last one hands the operations still in flight
// to the completion goroutine.
func (c *Client) Unwatch() {
	if c.reapers.Add(-1) == 0 && c.busy.Load() > 0 {
		c.kickLoop()
	}
}

func (c *Client) kickLoop() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// ParkForToken announces a waiter about to park until the token is free
// (TokenFree): false when it is free already, and the waiter should try
// again instead. A true is paired with Unpark. Once the client is dead the
// token stays taken: the waiter parks until death's sweep ends its
// operation.
func (c *Client) ParkForToken() bool {
	// Announce before the last look: a holder that releases after the
	// look sees parked and wakes a parker.
	c.parked.Add(1)
	if !c.token.Load() && !c.dead.Load() {
		c.parked.Add(-1)
		return false
	}
	return true
}

// Unpark ends ParkForToken's park.
func (c *Client) Unpark() { c.parked.Add(-1) }

// TokenFree delivers a value when the token was given back while a waiter
// was parked for it.
func (c *Client) TokenFree() <-chan struct{} { return c.tokenFree }

// PassWake passes on a wake-up for the token that its waiter left unused
// (its operation completed meanwhile), so another parked waiter takes it.
func (c *Client) PassWake() {
	if c.parked.Load() > 0 && !c.token.Load() {
		select {
		case c.tokenFree <- struct{}{}:
		default:
		}
	}
}

// Begin counts an operation in flight (before its descriptor is
// submitted): the completion goroutine polls while any is and no caller
// watches.
func (c *Client) Begin() {
	if c.busy.Add(1) == 1 && c.reapers.Load() == 0 {
		c.kickLoop()
	}
}

// End uncounts an operation (its completion came, or it was never
// submitted).
func (c *Client) End() { c.busy.Add(-1) }

// UseBell asks the appliance for the channel's bell (ctl.TBell) and, if it
// has one, rings it after each descriptor published while the channel's
// header says the appliance's loop sleeps. Call it once, after Start and
// before the first Submit; an appliance without a bell is no error.
func (c *Client) UseBell(ctx context.Context) error {
	rep, fd, err := c.CallFd(ctx, &ctl.Msg{Type: ctl.TBell})
	var r *Refusal
	switch {
	case errors.As(err, &r):
		return nil // the appliance's loop has no bell: descriptors wait for its sleep
	case err != nil:
		return err
	case fd < 0:
		return &Refusal{Status: statusInvalid, Text: fmt.Sprintf("bell reply (type %d) without its eventfd", rep.Type)}
	}
	c.bell = fd
	return nil
}

// HasBell reports whether UseBell found a bell.
func (c *Client) HasBell() bool { return c.bell >= 0 }

// ring wakes the appliance's loop if the channel says it sleeps: after a
// descriptor was published (see package shm for why that order).
func (c *Client) ring() {
	if c.bell >= 0 && c.Ch.Asleep() {
		_, _ = unix.Write(c.bell, eventfdOne[:]) // EAGAIN: the counter is full, the loop wakes anyway
	}
}

// eventfdOne is what ring writes: a package variable, because a local
// array passed to unix.Write moves to the heap under the race detector
// (which reads the buffer), one allocation a ring.
var eventfdOne = [8]byte{1}

// Submit publishes one descriptor, waiting for ring room (cancels may fill
// it for a moment); false once the appliance is gone. While it waits it
// reaps: the appliance takes no more descriptors than the completion ring
// can answer, and the caller may be the one watching that ring.
func (c *Client) Submit(d *shm.Desc) bool {
	c.smu.Lock()
	defer c.smu.Unlock()
	c.one[0] = *d
	for {
		if n, _ := c.sub.Enqueue(c.one[:]); n == 1 {
			c.ring()
			return true
		}
		if c.dead.Load() {
			return false
		}
		c.TryReap()
		runtime.Gosched()
	}
}

// WaitConsumed waits until the appliance has taken every descriptor
// submitted before the call, reaping meanwhile so that it has room to, at
// most timeout; false if it has not (or it is gone). A control request
// that must come after them (a connection's close after the Recv posted
// ahead on it) waits for it: the socket and the rings are two paths, and
// the appliance reads them on two goroutines.
func (c *Client) WaitConsumed(timeout time.Duration) bool {
	c.smu.Lock()
	mark := c.sub.Published()
	c.smu.Unlock()
	deadline := time.Now().Add(timeout)
	for !c.sub.Consumed(mark) {
		if c.dead.Load() || time.Now().After(deadline) {
			return false
		}
		c.TryReap()
		runtime.Gosched()
	}
	return true
}

// Buffers returns how many buffers a span of n bytes takes (at least one).
func (c *Client) Buffers(n int) int {
	bs := c.Ch.Layout.BufSize
	return max(1, (n+bs-1)/bs)
}

// TryAlloc takes a run of k consecutive free buffers, first fit; ok false
// when there is none now.
func (c *Client) TryAlloc(k int) (first uint32, ok bool) {
	c.amu.Lock()
	defer c.amu.Unlock()
	return c.alloc(k)
}

func (c *Client) alloc(k int) (uint32, bool) {
	nb := c.Ch.Layout.Buffers
	if k < 1 || k > nb {
		return 0, false
	}
	run := 0
	for i := 0; i < nb; {
		w := c.taken[i/64] >> (i % 64)
		if w == 0 && i%64 == 0 && run+64 < k {
			run += 64 // a whole free word
			i += 64
			continue
		}
		if w&1 != 0 {
			run = 0
			i += bits.TrailingZeros64(^w) // the taken buffers from i on
			continue
		}
		run++
		i++
		if run == k {
			start := i - k
			for j := start; j < i; j++ {
				c.taken[j/64] |= 1 << (j % 64)
			}
			return uint32(start), true
		}
	}
	return 0, false
}

// Alloc takes a run of k buffers, waiting for runs to be freed; it fails
// with ErrGone or the context's cause.
func (c *Client) Alloc(ctx context.Context, k int) (uint32, error) {
	if k > c.Ch.Layout.Buffers {
		return 0, fmt.Errorf("a span of %d buffers in a pool of %d", k, c.Ch.Layout.Buffers)
	}
	for {
		c.amu.Lock()
		b, ok := c.alloc(k)
		if ok {
			c.amu.Unlock()
			return b, nil
		}
		if c.wake == nil {
			c.wake = make(chan struct{}) // only while someone waits
		}
		wake := c.wake
		c.amu.Unlock()
		select {
		case <-wake:
		case <-c.deadCh:
			return 0, ErrGone
		case <-ctx.Done():
			return 0, context.Cause(ctx)
		}
	}
}

// BuffersTaken counts the pool's buffers taken now.
func (c *Client) BuffersTaken() int {
	c.amu.Lock()
	defer c.amu.Unlock()
	n := 0
	for _, w := range c.taken {
		n += bits.OnesCount64(w)
	}
	return n
}

// Busy counts the operations in flight the client counts (Begin, End).
func (c *Client) Busy() int64 { return c.busy.Load() }

// Free gives a run back and wakes Alloc's waiters.
func (c *Client) Free(first uint32, k int) {
	c.amu.Lock()
	for j := int(first); j < int(first)+k; j++ {
		c.taken[j/64] &^= 1 << (j % 64)
	}
	if c.wake != nil {
		close(c.wake)
		c.wake = nil
	}
	c.amu.Unlock()
}

// Register asks the appliance for an n-byte region with access (bit 0:
// peers may write it, bit 1: read it) and maps it: its id in descriptors,
// its key for the peers, and the mapping.
func (c *Client) Register(n int, access uint8) (id, key uint32, r *shm.Region, err error) {
	m := ctl.Msg{Type: ctl.TRegister, A: uint32(n), Flag: access}
	rep, fd, err := c.CallFd(context.Background(), &m)
	if err != nil {
		return 0, 0, nil, err
	}
	if rep.Type != ctl.RRegion || fd < 0 || int(rep.A) != n {
		closeFd(fd)
		c.Call(context.Background(), &ctl.Msg{Type: ctl.TDeregister, Conn: rep.Conn})
		return 0, 0, nil, &Refusal{Status: statusInvalid, Text: fmt.Sprintf("bad register reply (type %d, fd %d, %d bytes)", rep.Type, fd, rep.A)}
	}
	if r, err = shm.OpenRegion(fd, n); err != nil {
		c.Call(context.Background(), &ctl.Msg{Type: ctl.TDeregister, Conn: rep.Conn})
		return 0, 0, nil, &Refusal{Status: statusInvalid, Text: err.Error()}
	}
	return rep.Conn, rep.B, r, nil
}
