package host

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/peregrine-net/peregrine"
	"github.com/peregrine-net/peregrine/host/ctl"
	"github.com/peregrine-net/peregrine/host/shm"
	"golang.org/x/sys/unix"
)

// app is one attached channel and everything it holds.
type app struct {
	s        *Server
	id       uint64
	uid      uint32
	pid      int32
	sock     *net.UnixConn
	wmu      sync.Mutex // one reply on the socket at a time
	ch       *shm.Channel
	ctx      context.Context
	cancel   context.CancelFunc
	reqs     sync.WaitGroup // control requests running
	maxConns int

	// mu guards what control requests and Poll share: the connection
	// table, dead, and the op slots (with inflight and bufs).
	mu       sync.Mutex
	dead     bool
	conns    []*peregrine.Conn // index id-1
	regions  []*appRegion      // index id-1
	regBytes int               // bytes of the regions held
	ops      []peregrine.Op
	slots    []slot
	free     []int32
	inflight int
	bufs     int // pool buffers the ops in flight span: the appliance writes into them until they complete

	// bell is the eventfd the application writes to wake the endpoint's
	// loop (-1: none, see Server.wakeOn); unwake stops the loop watching it.
	bell   int
	unwake func()

	// Poll's own.
	shownAsleep bool // what the channel's header says of the loop's sleep
	sub         *shm.Consumer[shm.Desc]
	comp        *shm.Producer[shm.Comp]
	cq          *peregrine.CompletionQueue
	descs       []shm.Desc
	comps       []shm.Comp
	reaped      []*peregrine.Op

	stats AppCounters
}

// slot is the appliance's record of one op of the application in flight.
type slot struct {
	cookie uint64
	busy   bool
	recv   bool
	ahead  bool       // a Recv posted ahead (shm.FlagAhead)
	bufs   int        // pool buffers a send's or a recv's span covers
	region *appRegion // a push's or a pull's, held until it completes
}

// appRegion is a region the application registered: a memfd of its own
// that both map, registered with the endpoint. The mapping stays until the
// region is deregistered and no operation of the application names it
// (the endpoint holds a slice of it while one is in flight).
type appRegion struct {
	mem  *shm.Region
	reg  *peregrine.Region
	refs int  // operations in flight on it
	gone bool // deregistered: unmapped when refs reaches 0
}

func (r *appRegion) unref() {
	r.refs--
	if r.gone && r.refs == 0 {
		r.mem.Close()
	}
}

func newApp(s *Server, c *net.UnixConn, id uint64, uid uint32, pid int32, l shm.Layout) (*app, error) {
	ch, err := shm.Create(fmt.Sprintf("peregrine-app-%d", id), l)
	if err != nil {
		return nil, err
	}
	cq, err := peregrine.NewCompletionQueue(l.RingSize)
	if err != nil {
		ch.Close()
		return nil, err
	}
	a := &app{s: s, id: id, uid: uid, pid: pid, sock: c, ch: ch, maxConns: s.opts.Quota.Conns,
		conns: make([]*peregrine.Conn, s.opts.Quota.Conns), regions: make([]*appRegion, s.opts.Quota.Regions),
		ops: make([]peregrine.Op, l.RingSize), slots: make([]slot, l.RingSize), free: make([]int32, l.RingSize),
		sub: ch.SubmitConsumer(), comp: ch.CompleteProducer(), cq: cq,
		descs: make([]shm.Desc, s.opts.Batch), comps: make([]shm.Comp, max(s.opts.Batch, l.RingSize)),
		reaped: make([]*peregrine.Op, l.RingSize)}
	for i := range a.free {
		a.free[i] = int32(len(a.free) - 1 - i)
		a.ops[i].Tag = uint64(i)
		a.ops[i].CQ = cq
	}
	a.ctx, a.cancel = context.WithCancel(context.Background())
	a.bell = -1
	if s.wakeOn != nil {
		// Best effort: without a bell the application's descriptors wait
		// for the loop's sleep to end, as they would for a poll.
		if fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC); err == nil {
			if a.unwake, err = s.wakeOn(fd); err == nil {
				a.bell = fd
			} else {
				unix.Close(fd)
			}
		}
	}
	return a, nil
}

// closeBell stops the loop watching the application's bell and closes it.
func (a *app) closeBell() {
	if a.bell >= 0 {
		a.unwake()
		unix.Close(a.bell)
		a.bell = -1
	}
}

func (a *app) reply(m *ctl.Msg, fd int) error { return sendMsg(a.sock, &a.wmu, m, fd) }

// poll is one channel's share of Server.Poll (try: see Server.poll).
// asleep: the loop says it sleeps next unless this poll finds work; the
// header says so before the submit ring is read (see package shm).
func (a *app) poll(try, asleep bool) int {
	if try {
		if !a.mu.TryLock() {
			return 0
		}
	} else {
		a.mu.Lock()
	}
	defer a.mu.Unlock()
	if a.dead {
		return 0
	}
	if asleep != a.shownAsleep {
		a.ch.SetAsleep(asleep)
		a.shownAsleep = asleep
	}
	work := 0
	// Completions first: they free op slots and ring room.
	nc := 0
	n := a.cq.Poll(a.reaped)
	for _, op := range a.reaped[:n] {
		a.comps[nc] = a.finish(op)
		nc++
	}
	a.post(a.comps[:nc])
	work += n
	// Take no more descriptors than the completion ring can answer on top
	// of the operations already owed an answer.
	room := min(a.comp.Free()-a.inflight, len(a.descs))
	if room <= 0 {
		return work
	}
	nd, bad := a.sub.Dequeue(a.descs[:room])
	if bad {
		a.stats.BadRingIndex.Add(1)
	}
	nc = 0
	for i := range a.descs[:nd] {
		if c, answer := a.start(&a.descs[i]); answer {
			a.comps[nc] = c
			nc++
		}
	}
	a.post(a.comps[:nc])
	return work + nd
}

func (a *app) post(c []shm.Comp) {
	if len(c) == 0 {
		return
	}
	if n, bad := a.comp.Enqueue(c); bad || n < len(c) {
		// Room was reserved: only an application that wrote an impossible
		// consumer index loses completions, its own.
		a.stats.BadRingIndex.Add(1)
		a.stats.LostCompletions.Add(uint64(len(c) - n))
	}
}

// finish turns a completed op into its completion and frees its slot.
func (a *app) finish(op *peregrine.Op) shm.Comp {
	i := op.Tag
	n, _ := op.Result()
	st := op.Status()
	sl := &a.slots[i]
	c := shm.Comp{Cookie: sl.cookie, Status: uint32(st), Len: uint32(n)}
	if st == peregrine.StatusOK {
		a.stats.OpsOK.Add(1)
		if sl.recv {
			a.stats.BytesReceived.Add(uint64(n))
		} else {
			a.stats.BytesSent.Add(uint64(n))
		}
	} else if sl.ahead {
		a.stats.OpsUnused.Add(1)
	} else {
		a.stats.OpsFailed.Add(1)
	}
	if sl.region != nil {
		sl.region.unref()
	}
	a.bufs -= sl.bufs
	*sl = slot{}
	a.free = append(a.free, int32(i))
	a.inflight--
	return c
}

// start checks one descriptor and starts its operation. answer says
// whether c must be posted now (a refusal); a started op is answered when
// it completes, a cancel never.
func (a *app) start(d *shm.Desc) (c shm.Comp, answer bool) {
	refuse := func(ctr *atomic.Uint64) (shm.Comp, bool) {
		ctr.Add(1)
		a.stats.OpsFailed.Add(1)
		return shm.Comp{Cookie: d.Cookie, Status: uint32(peregrine.StatusInvalid)}, true
	}
	if !shm.KnownOp(d.Op) {
		return refuse(&a.stats.BadOp)
	}
	if d.Op == shm.OpCancel {
		for i := range a.slots {
			if a.slots[i].busy && a.slots[i].cookie == d.Cookie {
				a.ops[i].Cancel()
				return shm.Comp{}, false
			}
		}
		return shm.Comp{}, false // finished already: its completion says how
	}
	cn := a.conn(d.Conn)
	if cn == nil {
		return refuse(&a.stats.BadConn)
	}
	var mem []byte
	var rg *appRegion
	nbufs := 0
	switch d.Op {
	case shm.OpSend, shm.OpRecv:
		// The span may run over several buffers of the pool (a long
		// message): Bytes checks it lies within the pool.
		if mem = a.ch.Bytes(d.Buf, d.Off, d.Len); mem == nil {
			return refuse(&a.stats.BadBuffer)
		}
		// Off lies within the first buffer (Bytes checked); an empty span
		// still names, and holds, one.
		nbufs = (int(d.Off)+max(int(d.Len), 1)-1)/a.ch.Layout.BufSize + 1
	default:
		if rg = a.region(d.Buf); rg == nil || uint64(d.Off)+uint64(d.Len) > uint64(len(rg.mem.Bytes())) {
			return refuse(&a.stats.BadRegion)
		}
	}
	if len(a.free) == 0 {
		// Cannot happen while room is reserved by ring size; kept so a
		// bug here is a refusal, not a panic.
		return refuse(&a.stats.BadOp)
	}
	i := a.free[len(a.free)-1]
	a.free = a.free[:len(a.free)-1]
	op := &a.ops[i]
	var err error
	switch d.Op {
	case shm.OpSend:
		err = cn.SendAsync(op, mem)
	case shm.OpRecv:
		err = cn.RecvAsync(op, mem)
	case shm.OpPush:
		err = cn.PushAsync(op, rg.reg, int(d.Off), int(d.Len), peregrine.RemoteAddr{Key: d.Key, Addr: d.Addr})
	default:
		err = cn.PullAsync(op, rg.reg, int(d.Off), int(d.Len), peregrine.RemoteAddr{Key: d.Key, Addr: d.Addr})
	}
	if err != nil {
		a.free = append(a.free, i)
		st := peregrine.StatusInvalid
		var pe *peregrine.Error
		if errors.As(err, &pe) {
			st = pe.Status
		}
		a.stats.OpsFailed.Add(1)
		return shm.Comp{Cookie: d.Cookie, Status: uint32(st)}, true
	}
	if rg != nil {
		rg.refs++
	}
	recv := d.Op == shm.OpRecv
	a.slots[i] = slot{cookie: d.Cookie, busy: true, recv: recv, ahead: recv && d.Flags&shm.FlagAhead != 0, bufs: nbufs, region: rg}
	a.inflight++
	a.bufs += nbufs
	return shm.Comp{}, false
}

// handle runs one control request (on its own goroutine) and returns the
// reply, and the fd to pass with it (-1: none).
func (a *app) handle(m *ctl.Msg) (*ctl.Msg, int) {
	switch m.Type {
	case ctl.TRegister:
		return a.register(m)
	case ctl.TDeregister:
		return a.deregister(m), -1
	case ctl.TBell:
		if a.bell < 0 {
			return &ctl.Msg{Type: ctl.RError, ID: m.ID, Status: uint8(peregrine.StatusInvalid),
				Text: "no bell: the endpoint's callers poll (PollCaller), and its loop sleeps on no bell"}, -1
		}
		return &ctl.Msg{Type: ctl.ROK, ID: m.ID}, a.bell
	}
	return a.control(m), -1
}

func (a *app) control(m *ctl.Msg) *ctl.Msg {
	copts := peregrine.ConnOptions{Ordered: m.Flag&1 != 0, RecvSlots: int(m.A), MaxMessage: int(m.B),
		Timeout: time.Duration(m.Timeout)}
	switch m.Type {
	case ctl.TDial:
		id, err := a.reserveConn()
		if err != nil {
			return errMsg(m.ID, err)
		}
		c, err := a.s.ep.Dial(a.ctx, peregrine.Addr{IP: m.Addr(), MAC: m.MAC}, copts)
		return a.bind(m.ID, id, c, err)
	case ctl.TListen:
		// The listener is claimed under the lock and made outside it: Poll
		// takes the same lock and must not wait for the endpoint.
		a.s.mu.Lock()
		if a.s.lstApp != nil {
			a.s.mu.Unlock()
			return errMsg(m.ID, fmt.Errorf("%w: another application listens on this endpoint", peregrine.ErrBusy))
		}
		a.s.lstApp = a
		a.s.mu.Unlock()
		l, err := a.s.ep.Listen(copts)
		a.s.mu.Lock()
		defer a.s.mu.Unlock()
		if err != nil {
			a.s.lstApp = nil
			return errMsg(m.ID, err)
		}
		a.s.lst = l
		return &ctl.Msg{Type: ctl.ROK, ID: m.ID}
	case ctl.TUnlisten:
		a.s.mu.Lock()
		var l *peregrine.Listener
		if a.s.lstApp == a && a.s.lst != nil {
			l, a.s.lst, a.s.lstApp = a.s.lst, nil, nil
		}
		a.s.mu.Unlock()
		if l == nil {
			return errMsg(m.ID, fmt.Errorf("%w: this application does not listen", peregrine.ErrInvalid))
		}
		if err := l.Close(); err != nil {
			return errMsg(m.ID, err)
		}
		return &ctl.Msg{Type: ctl.ROK, ID: m.ID}
	case ctl.TAccept:
		a.s.mu.Lock()
		l := a.s.lst
		mine := a.s.lstApp == a && l != nil
		a.s.mu.Unlock()
		if !mine {
			return errMsg(m.ID, fmt.Errorf("%w: this application does not listen", peregrine.ErrInvalid))
		}
		id, err := a.reserveConn()
		if err != nil {
			return errMsg(m.ID, err)
		}
		c, err := l.Accept(a.ctx)
		return a.bind(m.ID, id, c, err)
	case ctl.TClose:
		a.mu.Lock()
		c := a.conn(m.Conn)
		if c != nil {
			a.conns[m.Conn-1] = nil
		}
		a.mu.Unlock()
		if c == nil {
			return errMsg(m.ID, fmt.Errorf("%w: no connection %d", peregrine.ErrInvalid, m.Conn))
		}
		a.stats.Conns.Add(-1)
		if err := c.Close(); err != nil {
			return errMsg(m.ID, err)
		}
		return &ctl.Msg{Type: ctl.ROK, ID: m.ID}
	}
	a.stats.BadControl.Add(1)
	return errMsg(m.ID, fmt.Errorf("%w: message type %d is not a request", peregrine.ErrInvalid, m.Type))
}

// conn returns connection id, or nil when the application has none by
// that id (a dial or accept still running has none yet). a.mu is held.
func (a *app) conn(id uint32) *peregrine.Conn {
	if id == 0 || uint64(id) > uint64(len(a.conns)) {
		return nil
	}
	if c := a.conns[id-1]; c != reserved {
		return c
	}
	return nil
}

// reserved marks a connection id taken by a dial or accept in progress.
var reserved = new(peregrine.Conn)

func (a *app) reserveConn() (uint32, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, c := range a.conns {
		if c == nil {
			a.conns[i] = reserved
			return uint32(i + 1), nil
		}
	}
	a.stats.QuotaRefused.Add(1)
	return 0, quotaErr("%d connections open, at most %d a channel", len(a.conns), a.maxConns)
}

func (a *app) bind(reqID, id uint32, c *peregrine.Conn, err error) *ctl.Msg {
	a.mu.Lock()
	if err != nil || a.dead {
		a.conns[id-1] = nil
		a.mu.Unlock()
		if err == nil {
			c.Close()
			err = fmt.Errorf("%w: the application detached", peregrine.ErrClosed)
		}
		return errMsg(reqID, err)
	}
	a.conns[id-1] = c
	a.mu.Unlock()
	a.stats.Conns.Add(1)
	r := &ctl.Msg{Type: ctl.RConn, ID: reqID, Conn: id, MAC: c.RemoteAddr().MAC}
	r.SetAddr(c.RemoteAddr().IP)
	if c.Ordered() {
		r.Flag = 1
	}
	return r
}

// region returns region id, or nil when the application has none by that
// id. a.mu is held.
func (a *app) region(id uint32) *appRegion {
	if id == 0 || uint64(id) > uint64(len(a.regions)) {
		return nil
	}
	if r := a.regions[id-1]; r != reservedRegion {
		return r
	}
	return nil
}

// reservedRegion marks a region id taken by a registration in progress.
var reservedRegion = new(appRegion)

// register makes a region memfd of the size asked, maps it, registers the
// mapping with the endpoint and passes the memfd to the application.
func (a *app) register(m *ctl.Msg) (*ctl.Msg, int) {
	n := int(m.A)
	access := peregrine.Access(m.Flag) & (peregrine.RemoteWrite | peregrine.RemoteRead)
	if n < 1 || m.Flag&^3 != 0 {
		a.stats.BadControl.Add(1)
		return errMsg(m.ID, fmt.Errorf("%w: a region of %d bytes with access %#x", peregrine.ErrInvalid, n, m.Flag)), -1
	}
	q := a.s.opts.Quota
	a.mu.Lock()
	id := -1
	for i, r := range a.regions {
		if r == nil {
			id = i
			break
		}
	}
	if id < 0 || a.regBytes+n > q.RegionBytes {
		held, bytes := len(a.regions), a.regBytes
		a.mu.Unlock()
		a.stats.QuotaRefused.Add(1)
		return errMsg(m.ID, quotaErr("a %d-byte region: %d bytes in regions held, at most %d, and at most %d regions (%d held)", n, bytes, q.RegionBytes, q.Regions, held)), -1
	}
	a.regions[id] = reservedRegion
	a.regBytes += n
	a.mu.Unlock()
	undo := func(err error) (*ctl.Msg, int) {
		a.mu.Lock()
		a.regions[id] = nil
		a.regBytes -= n
		a.mu.Unlock()
		return errMsg(m.ID, err), -1
	}
	sm, err := shm.CreateRegion(fmt.Sprintf("peregrine-app-%d-region-%d", a.id, id+1), n)
	if err != nil {
		return undo(err)
	}
	reg, err := a.s.ep.Register(sm.Bytes(), access)
	if err != nil {
		sm.Close()
		return undo(err)
	}
	a.mu.Lock()
	if a.dead {
		a.mu.Unlock()
		a.s.ep.Deregister(reg)
		sm.Close()
		return undo(fmt.Errorf("%w: the application detached", peregrine.ErrClosed))
	}
	a.regions[id] = &appRegion{mem: sm, reg: reg}
	a.mu.Unlock()
	return &ctl.Msg{Type: ctl.RRegion, ID: m.ID, Conn: uint32(id + 1), A: uint32(n), B: reg.Remote(0).Key}, sm.Fd()
}

// deregister forgets region m.Conn: the endpoint at once (no peer reaches
// it from here on), the mapping once no operation names it.
func (a *app) deregister(m *ctl.Msg) *ctl.Msg {
	a.mu.Lock()
	r := a.region(m.Conn)
	if r == nil {
		a.mu.Unlock()
		return errMsg(m.ID, fmt.Errorf("%w: no region %d", peregrine.ErrInvalid, m.Conn))
	}
	a.regions[m.Conn-1] = nil
	a.regBytes -= len(r.mem.Bytes())
	a.mu.Unlock()
	err := a.s.ep.Deregister(r.reg)
	a.mu.Lock()
	r.gone = true
	if r.refs == 0 {
		r.mem.Close()
	}
	a.mu.Unlock()
	if err != nil {
		return errMsg(m.ID, err)
	}
	return &ctl.Msg{Type: ctl.ROK, ID: m.ID}
}
