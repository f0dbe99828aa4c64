package host

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/peregrine-net/peregrine"
	"github.com/peregrine-net/peregrine/host/ctl"
	"github.com/peregrine-net/peregrine/host/shm"
	"github.com/peregrine-net/peregrine/internal/inloop"
)

// Quota bounds what one application may hold. Zero fields take defaults.
type Quota struct {
	// Channels is how many channels (attachments) one user may hold at
	// once, by the peer credentials of the socket (default 16).
	Channels int
	// Buffers is the most buffers one channel may have (default 1024).
	Buffers int
	// BufSize is the largest buffer (default 8 MiB), and so the longest
	// message through the sidecar.
	BufSize int
	// Conns is how many connections one channel may hold open (default 64).
	Conns int
	// Ring is the largest ring, and so the most operations one channel
	// has in flight (default 1024).
	Ring int
	// Regions is how many regions one channel may hold registered
	// (default 16), RegionBytes how many bytes they may hold in all
	// (default 1 GiB).
	Regions     int
	RegionBytes int
}

// Options configure New.
type Options struct {
	// Socket is the Unix socket's path; a stale socket file there is
	// replaced.
	Socket string
	// Mode is the socket file's mode (default 0660).
	Mode os.FileMode
	// UID and GID, when not -1, become the socket file's owner and group
	// (0 is root: pass -1 to leave either as created).
	UID, GID int
	// Endpoint carries every application's connections.
	Endpoint *peregrine.Endpoint
	// Quota bounds each application.
	Quota Quota
	// Default is the layout an attach that asks for nothing gets (default
	// 256 buffers of 64 KiB, rings of 256).
	Default shm.Layout
	// Batch bounds the descriptors Poll takes from one channel per call
	// (default 32).
	Batch int
}

func (o *Options) defaults() error {
	if o.Socket == "" {
		return fmt.Errorf("host: %w: no socket path", peregrine.ErrInvalid)
	}
	if o.Endpoint == nil {
		return fmt.Errorf("host: %w: no endpoint", peregrine.ErrInvalid)
	}
	if o.Mode == 0 {
		o.Mode = 0o660
	}
	q := &o.Quota
	q.Channels = cmp0(q.Channels, 16)
	q.Buffers = cmp0(q.Buffers, 1024)
	q.BufSize = cmp0(q.BufSize, 8<<20)
	q.Conns = cmp0(q.Conns, 64)
	q.Ring = cmp0(q.Ring, 1024)
	q.Regions = cmp0(q.Regions, 16)
	q.RegionBytes = cmp0(q.RegionBytes, 1<<30)
	d := &o.Default
	d.Buffers = cmp0(d.Buffers, min(256, q.Buffers))
	d.BufSize = cmp0(d.BufSize, min(64<<10, q.BufSize))
	d.RingSize = cmp0(d.RingSize, min(256, q.Ring))
	o.Batch = cmp0(o.Batch, 32)
	if err := d.Check(); err != nil {
		return fmt.Errorf("host: default layout: %w", err)
	}
	return nil
}

func cmp0(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}

// Server is the appliance's side of the sidecar.
type Server struct {
	opts Options
	ep   *peregrine.Endpoint
	ln   *net.UnixListener
	addr peregrine.Addr

	mu     sync.Mutex
	apps   map[*app]struct{}
	byUser map[uint32]int
	lst    *peregrine.Listener // the endpoint's one listener, and its owner
	lstApp *app
	nextID uint64
	closed bool
	// polled is apps as a list for Poll, replaced (under mu) whenever
	// apps changes: Poll reads it without the lock, and a map's range
	// costs Poll a random start every call.
	polled atomic.Pointer[[]*app]

	attached, detached, refused atomic.Uint64
	wg                          sync.WaitGroup

	// The endpoint's loop's sleep, when another process can end it
	// (inloop.Bell; nil otherwise): loopAsleep is mirrored into every
	// channel's header by the poll on the loop, and each application's
	// bell is an eventfd wakeOn watches.
	loopAsleep func() bool
	wakeOn     func(fd int) (remove func(), err error)
}

// New listens on opts.Socket and starts accepting applications; Poll must
// be called for their data to move.
func New(opts Options) (*Server, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	if fi, err := os.Lstat(opts.Socket); err == nil && fi.Mode()&os.ModeSocket != 0 {
		os.Remove(opts.Socket)
	}
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: opts.Socket, Net: "unixpacket"})
	if err != nil {
		return nil, fmt.Errorf("host: listen on %s: %w", opts.Socket, err)
	}
	ln.SetUnlinkOnClose(true)
	if err := os.Chmod(opts.Socket, opts.Mode); err != nil {
		ln.Close()
		return nil, fmt.Errorf("host: chmod %s: %w", opts.Socket, err)
	}
	if opts.UID != -1 || opts.GID != -1 {
		if err := os.Lchown(opts.Socket, opts.UID, opts.GID); err != nil {
			ln.Close()
			return nil, fmt.Errorf("host: chown %s to %d:%d: %w", opts.Socket, opts.UID, opts.GID, err)
		}
	}
	s := &Server{opts: opts, ep: opts.Endpoint, ln: ln, addr: opts.Endpoint.Addr(),
		apps: map[*app]struct{}{}, byUser: map[uint32]int{}}
	if asleep, wakeOn, err := inloop.Bell(s.ep); err == nil {
		s.loopAsleep, s.wakeOn = asleep, wakeOn
	}
	s.wg.Add(1)
	go s.acceptLoop()
	return s, nil
}

func (s *Server) acceptLoop() {
	defer s.wg.Done()
	for {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			return
		}
		s.wg.Add(1)
		go s.serveApp(c)
	}
}

// Close stops accepting, detaches every application (as if it had died)
// and waits for their goroutines. The Endpoint stays open.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	err := s.ln.Close()
	s.mu.Lock()
	for a := range s.apps {
		a.sock.Close() // its control goroutine sees the end and detaches it
	}
	s.mu.Unlock()
	s.wg.Wait()
	return err
}

// Poll moves data for every attached channel: a bounded batch each, never
// blocking. It returns the descriptors and completions it handled. One
// goroutine calls Poll (Run, or a test's).
func (s *Server) Poll() int { return s.poll(false, false) }

// poll is Poll; with try it also never waits for a lock: an application
// whose control request holds its state is skipped this round (on the
// endpoint's loop, which must never wait for another goroutine).
// asleep: the loop polling says it sleeps next unless this poll finds work.
func (s *Server) poll(try, asleep bool) int {
	list := s.polled.Load()
	if list == nil {
		return 0
	}
	work := 0
	for _, a := range *list {
		work += a.poll(try, asleep)
	}
	return work
}

// listApps renews the list Poll reads (s.mu held). A detached app may be
// polled once more by a Poll that loaded the old list: it is marked dead
// first, and its poll does nothing.
func (s *Server) listApps() {
	list := make([]*app, 0, len(s.apps))
	for a := range s.apps {
		list = append(list, a)
	}
	s.polled.Store(&list)
}

// Run polls the channels until ctx ends. On an endpoint with a poll loop
// of its own (every in-process endpoint) the loop runs the channels' poll
// after its own, so that descriptors, the transport and completions meet
// on one goroutine and no hand-off between threads costs a wake-up; the
// loop's idle policy counts the channels' work. Otherwise Run polls on the
// calling goroutine, spinning while there is work and backing off (yield,
// then sleeps up to 50 µs) while there is none.
func (s *Server) Run(ctx context.Context) {
	if detach, err := inloop.Attach(s.ep, s.pollLoop); err == nil {
		<-ctx.Done()
		detach()
		return
	}
	idle := 0
	for ctx.Err() == nil {
		if s.Poll() > 0 {
			idle = 0
			continue
		}
		idle++
		switch {
		case idle < 256:
		case idle < 1024:
			time.Sleep(0)
		default:
			time.Sleep(50 * time.Microsecond)
		}
	}
}

// pollLoop is poll on the endpoint's loop.
func (s *Server) pollLoop() int {
	return s.poll(true, s.loopAsleep != nil && s.loopAsleep())
}

// Attached returns how many applications are attached now.
func (s *Server) Attached() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.apps)
}

func peerCred(c *net.UnixConn) (uid uint32, pid int32) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, 0
	}
	var cred *unix.Ucred
	raw.Control(func(fd uintptr) {
		cred, _ = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	})
	if cred == nil {
		return 0, 0
	}
	return cred.Uid, cred.Pid
}

// serveApp runs one application's control socket: the attach first, then
// requests until the socket ends, then the detach.
func (s *Server) serveApp(c *net.UnixConn) {
	defer s.wg.Done()
	defer c.Close()
	uid, pid := peerCred(c)
	buf := make([]byte, ctl.MaxLen+1)
	var m ctl.Msg
	n, err := c.Read(buf)
	if err != nil {
		return
	}
	if err := m.Decode(buf[:n]); err != nil || m.Type != ctl.TAttach {
		s.refused.Add(1)
		reply(c, nil, &ctl.Msg{Type: ctl.RError, ID: m.ID, Status: uint8(peregrine.StatusInvalid),
			Text: fmt.Sprintf("the first message must be a valid attach: %v", err)})
		return
	}
	a, err := s.attach(c, uid, pid, &m)
	if err != nil {
		s.refused.Add(1)
		reply(c, nil, errMsg(m.ID, err))
		return
	}
	defer s.detach(a)
	ok := ctl.Msg{Type: ctl.RAttach, ID: m.ID, A: uint32(a.ch.Layout.Buffers), B: uint32(a.ch.Layout.BufSize),
		C: uint32(a.ch.Layout.RingSize), MAC: s.addr.MAC}
	ok.SetAddr(s.addr.IP)
	if err := a.reply(&ok, a.ch.Fd()); err != nil {
		return
	}
	for {
		n, err := c.Read(buf)
		if err != nil {
			return // the application is gone (or the server closing)
		}
		var req ctl.Msg
		if err := req.Decode(buf[:n]); err != nil {
			a.stats.BadControl.Add(1)
			a.reply(&ctl.Msg{Type: ctl.RError, ID: req.ID, Status: uint8(peregrine.StatusInvalid), Text: err.Error()}, -1)
			continue
		}
		a.reqs.Add(1)
		go func() { // dial and accept wait on the network
			defer a.reqs.Done()
			a.reply(a.handle(&req))
		}()
	}
}

func reply(c *net.UnixConn, mu *sync.Mutex, m *ctl.Msg) error {
	return sendMsg(c, mu, m, -1)
}

func sendMsg(c *net.UnixConn, mu *sync.Mutex, m *ctl.Msg, fd int) error {
	var b [ctl.MaxLen]byte
	out := m.Encode(b[:0])
	var oob []byte
	if fd >= 0 {
		oob = unix.UnixRights(fd)
	}
	if mu != nil {
		mu.Lock()
		defer mu.Unlock()
	}
	_, _, err := c.WriteMsgUnix(out, oob, nil)
	return err
}

func errMsg(id uint32, err error) *ctl.Msg {
	st := peregrine.StatusInvalid
	var pe *peregrine.Error
	switch {
	case errors.As(err, &pe):
		st = pe.Status
	case errors.Is(err, peregrine.ErrBusy):
		st = peregrine.StatusBusy
	case errors.Is(err, peregrine.ErrClosed):
		st = peregrine.StatusClosed
	}
	return &ctl.Msg{Type: ctl.RError, ID: id, Status: uint8(st), Text: err.Error()}
}

func quotaErr(format string, args ...any) error {
	return fmt.Errorf("%w: quota: "+format, append([]any{peregrine.ErrBusy}, args...)...)
}

// attach checks the request against the quotas and makes the channel.
func (s *Server) attach(c *net.UnixConn, uid uint32, pid int32, m *ctl.Msg) (*app, error) {
	l := s.opts.Default
	if m.A != 0 {
		l.Buffers = int(m.A)
	}
	if m.B != 0 {
		l.BufSize = int(m.B)
	}
	if m.C != 0 {
		l.RingSize = int(m.C)
	}
	q := s.opts.Quota
	switch {
	case l.Buffers > q.Buffers:
		return nil, quotaErr("%d buffers asked, at most %d a channel", l.Buffers, q.Buffers)
	case l.BufSize > q.BufSize:
		return nil, quotaErr("buffers of %d bytes asked, at most %d", l.BufSize, q.BufSize)
	case l.RingSize > q.Ring:
		return nil, quotaErr("rings of %d asked, at most %d", l.RingSize, q.Ring)
	}
	if err := l.Check(); err != nil {
		return nil, fmt.Errorf("%w: %v", peregrine.ErrInvalid, err)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, fmt.Errorf("%w: the appliance is closing", peregrine.ErrClosed)
	}
	if s.byUser[uid] >= q.Channels {
		s.mu.Unlock()
		return nil, quotaErr("user %d holds %d channels already, at most %d", uid, s.byUser[uid], q.Channels)
	}
	s.byUser[uid]++
	s.nextID++
	id := s.nextID
	s.mu.Unlock()
	a, err := newApp(s, c, id, uid, pid, l)
	if err != nil {
		s.mu.Lock()
		s.byUser[uid]--
		s.mu.Unlock()
		return nil, err
	}
	s.mu.Lock()
	s.apps[a] = struct{}{}
	s.listApps()
	s.mu.Unlock()
	s.attached.Add(1)
	return a, nil
}

// detach ends everything the application had: it no longer polls, its
// operations are cancelled, its connections and listener closed, and once
// its operations have all completed its channel is unmapped.
func (s *Server) detach(a *app) {
	a.cancel() // ends its dials and accepts
	a.reqs.Wait()
	a.mu.Lock()
	a.dead = true // Poll skips it from now on; this goroutine reaps it
	conns := append([]*peregrine.Conn(nil), a.conns...)
	clear(a.conns)
	for i := range a.slots {
		if a.slots[i].busy {
			a.ops[i].Cancel()
		}
	}
	a.mu.Unlock()
	s.mu.Lock()
	var lst *peregrine.Listener
	if s.lstApp == a {
		lst, s.lst, s.lstApp = s.lst, nil, nil
	}
	s.mu.Unlock()
	if lst != nil {
		lst.Close()
	}
	for _, c := range conns {
		if c != nil && c != reserved {
			c.Close()
			a.stats.Conns.Add(-1)
		}
	}
	// The Endpoint holds slices of the channel until every op completed:
	// wait for them before the unmap. Every op completes (a cancel, a
	// closed connection, a closed endpoint all end it).
	out := make([]*peregrine.Op, 64)
	for a.inflight > 0 {
		n, err := a.cq.Wait(context.Background(), out)
		if err != nil {
			break
		}
		for _, op := range out[:n] {
			a.finish(op)
		}
	}
	// Every op completed: the regions go from the endpoint, then their
	// mappings.
	for i, r := range a.regions {
		if r != nil && r != reservedRegion {
			s.ep.Deregister(r.reg)
			r.mem.Close()
		}
		a.regions[i] = nil
	}
	a.ch.Close()
	a.closeBell()
	s.mu.Lock()
	delete(s.apps, a)
	s.listApps()
	s.byUser[a.uid]--
	if s.byUser[a.uid] == 0 {
		delete(s.byUser, a.uid)
	}
	s.mu.Unlock()
	s.detached.Add(1)
}
