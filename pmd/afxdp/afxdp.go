package afxdp

import (
	"cmp"
	"errors"
	"fmt"
	"math/bits"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/pmd/afxdp/internal/xsk"
	"github.com/peregrine-net/peregrine/pmd/internal/portstat"
)

// xdpPacketHeadroom is the headroom the kernel always leaves in front of a
// received frame (XDP_PACKET_HEADROOM), on top of the UMEM headroom.
const xdpPacketHeadroom = unix.XDP_PACKET_HEADROOM

// Port is an AF_XDP port: one socket per queue over a UMEM that is the
// pool's arena. It implements port.Port.
type Port struct {
	pool     *mbuf.Pool
	info     port.Info
	opts     Options
	queues   []queue
	stats    *portstat.Counters
	att      *attachment
	zeroCopy bool
	closed   atomic.Bool

	// mu guards the sockets and the XDP program's map against Close while
	// Stats and Missteered read their counters, and final and finalMiss,
	// those counters read just before Close.
	mu        sync.Mutex
	final     []KernelStats
	finalMiss []uint64
}

var _ port.Port = (*Port)(nil)

// queue is one socket and its two halves. RX and TX may be driven by
// different goroutines (one lcore receives on a queue while another sends
// on it), so each half has its own rings, cache and ownership record, on
// cache lines of its own.
type queue struct {
	sock *xsk.Socket
	rx   rxQueue
	tx   txQueue
}

// KernelStats are the kernel's counters of one queue's socket
// (XDP_STATISTICS).
type KernelStats struct {
	RxDropped            uint64 // no chunk to receive into, or frame larger than a chunk
	RxInvalidDescs       uint64 // invalid addresses on the fill ring
	TxInvalidDescs       uint64 // invalid TX descriptors
	RxRingFull           uint64 // dropped because the RX ring was full
	RxFillRingEmptyDescs uint64 // times the kernel found the fill ring empty
	TxRingEmptyDescs     uint64 // times the kernel found the TX ring empty (not an error)
}

// New opens an AF_XDP port on opts.Interface whose frames live in pool. It
// registers the pool's arena as the UMEM, attaches the XDP program (or
// joins the one in opts.Attachments) and fills every fill ring, so the port
// holds Queues*FillLevel frames of the pool until Close.
func New(pool *mbuf.Pool, opts Options) (*Port, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: pool is nil (pass the mbuf pool whose arena becomes the UMEM)", ErrInvalidOptions)
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	geo := geometryOf(pool)
	if need := opts.Queues * opts.FillLevel; pool.Available() < need {
		return nil, fmt.Errorf("%w: pool %q has %d free frames; the fill rings of %d queue(s) holding %d frames each need %d (use a bigger pool, or a smaller RingSize or FillLevel)",
			ErrInvalidOptions, pool.Name(), pool.Available(), opts.Queues, opts.FillLevel, need)
	}
	p := &Port{pool: pool, opts: opts, stats: portstat.New(opts.Queues)}
	where, nsName := "the current network namespace", ""
	if opts.Namespace != nil {
		nsName = opts.Namespace.Name
		where = fmt.Sprintf("network namespace %q", nsName)
	}
	inNamespace := func(fn func() error) error {
		if opts.Namespace == nil {
			return fn()
		}
		return opts.Namespace.Do(fn)
	}
	err = inNamespace(func() error {
		if err := xsk.Probe(); err != nil {
			return socketError(opts.Interface, opts.Queue, opts.ZeroCopy, err)
		}
		li, err := lookupLink(opts.Interface, where)
		if err != nil {
			return err
		}
		if opts.Queue+opts.Queues > li.Queues {
			return fmt.Errorf("%w: %s in %s has %d queue(s) (0..%d); queue=%d queues=%d asks for %d..%d (create the interface with more queues, e.g. ethtool -L or veth numrxqueues)",
				ErrNoQueue, li.Name, where, li.Queues, li.Queues-1, opts.Queue, opts.Queues, opts.Queue, opts.Queue+opts.Queues-1)
		}
		if maxFrame := li.MTU + ethHeaderLen; maxFrame > geo.rxRoom {
			return fmt.Errorf("%w: %s has MTU %d, so frames of up to %d bytes, but pool %q frames hold at most %d received bytes (FrameSize %d minus %d headroom); lower the MTU to %d or use a larger FrameSize (up to 16384: frames above a page travel as several UMEM chunks)",
				ErrFrameTooSmall, li.Name, li.MTU, maxFrame, pool.Name(), geo.rxRoom, pool.FrameSize(), pool.FrameSize()-geo.rxRoom, geo.rxRoom-ethHeaderLen)
		}
		p.info = port.Info{
			Name:   opts.Name,
			Driver: DriverName,
			Queues: opts.Queues,
			MTU:    li.MTU,
			MAC:    slices.Clone(li.MAC),
			Caps:   port.CapZeroCopy,
		}
		if geo.sg() && opts.Queues > 1 {
			return fmt.Errorf("%w: pool %q has %d-byte frames, which an AF_XDP port carries as several chunks (multi-buffer), on one queue only for now (use queues=1, or FrameSize 4096)",
				ErrInvalidOptions, pool.Name(), pool.FrameSize())
		}
		att, err := acquire(opts.Attachments, attachKey{nsName, li.Index}, li, opts, geo.sg(), opts.Logger)
		if err != nil {
			return err
		}
		p.att = att
		p.queues = make([]queue, opts.Queues)
		for i := range p.queues {
			if err := p.openQueue(i, li, geo); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		p.teardown()
		return nil, fmt.Errorf("afxdp: open %s in %s: %w", opts.Interface, where, err)
	}
	return p, nil
}

// geometry is how the pool's frames map onto UMEM chunks.
type geometry struct {
	frames       int
	shift        uint   // log2(FrameSize): frame = addr >> shift
	chunkShift   uint   // log2(UMEM chunk size): FrameSize, at most a page
	umemHeadroom uint32 // so that received data starts at the pool's headroom
	rxRoom       int    // largest frame the kernel can receive into a pool frame
}

// sg reports whether frames span several chunks (multi-buffer).
func (g geometry) sg() bool { return g.chunkShift < g.shift }

func geometryOf(pool *mbuf.Pool) geometry {
	// The kernel puts a received frame at chunk + UMEM headroom +
	// XDP_PACKET_HEADROOM; choosing the UMEM headroom as the pool's
	// headroom minus that puts it exactly where AllocBulk would. A pool
	// headroom below XDP_PACKET_HEADROOM cannot be met: frames then start
	// at 256 and DataOff says so.
	start := max(pool.Headroom(), xdpPacketHeadroom)
	shift := uint(bits.TrailingZeros(uint(pool.FrameSize())))
	return geometry{
		frames:       pool.Frames(),
		shift:        shift,
		chunkShift:   min(shift, uint(bits.TrailingZeros(uint(os.Getpagesize())))),
		umemHeadroom: uint32(start - xdpPacketHeadroom),
		rxRoom:       pool.FrameSize() - start,
	}
}

// openQueue binds the socket of port queue i and fills its fill ring. The
// first socket registers the UMEM; the others share it (XDP_SHARED_UMEM)
// with fill and completion rings of their own.
func (p *Port) openQueue(i int, li linkInfo, geo geometry) error {
	ifQueue := p.opts.Queue + i
	cfg := xsk.Config{
		Ifindex:   li.Index,
		Queue:     ifQueue,
		RingSize:  uint32(p.opts.RingSize),
		UMEM:      p.pool.Arena(),
		ChunkSize: uint32(1) << geo.chunkShift,
		Headroom:  geo.umemHeadroom,
		BusyPoll: xsk.BusyPoll{
			Usec: int(p.opts.BusyPoll / time.Microsecond), Budget: p.opts.BusyBudget, Prefer: !p.opts.NoPreferBusy,
		},
	}
	var sock *xsk.Socket
	var err error
	if i > 0 {
		cfg.Shared = p.queues[0].sock
		sock, err = openSocket(cfg)
	} else {
		sock, err = p.openFirstSocket(cfg, li, geo.sg())
	}
	if err != nil {
		return socketError(li.Name, ifQueue, p.opts.ZeroCopy, err)
	}
	if i == 0 {
		p.zeroCopy = sock.ZeroCopy()
	}
	q := &p.queues[i]
	q.sock = sock
	if err := sock.SetTxBudget(p.opts.RingSize); err != nil {
		p.opts.Logger.Debug("afxdp: kernel keeps the default TX budget of 32 frames per sendto", "interface", li.Name, "queue", ifQueue, "reason", err)
	}
	qs := p.stats.Queue(i)
	q.rx = rxQueue{
		ring: sock.RX, fill: sock.Fill, sock: sock, pool: p.pool,
		lent:      make([]uint64, (geo.frames+63)/64),
		stage:     make([]mbuf.Handle, min(p.opts.RingSize, refillStage)),
		shift:     geo.shift,
		queue:     uint16(i),
		refillMin: uint32(min(refillBatch, p.opts.FillLevel/2)),
		lendMax:   uint32(p.opts.FillLevel),
		busyPoll:  p.opts.BusyPoll > 0,
		stats:     qs,
		sg:        geo.sg(),
	}
	q.rx.own = p.pool.NewCache()
	q.rx.cache = q.rx.own
	q.tx = txQueue{
		ring: sock.TX, comp: sock.Comp, sock: sock, pool: p.pool,
		lent:   make([]uint64, (geo.frames+63)/64),
		stage:  make([]mbuf.Handle, min(p.opts.RingSize, reclaimStage)),
		shift:  geo.shift,
		maxLen: uint32(min(p.info.MTU+ethHeaderLen+vlanHeaderLen, p.pool.FrameSize())),
		frame:  uint32(p.pool.FrameSize()),
		stats:  qs,
		batch:  uint32(p.opts.TxBatch),
		sg:     geo.sg(), chunkShift: geo.chunkShift,
	}
	q.tx.own = p.pool.NewCache()
	q.tx.cache = q.tx.own
	if !sock.ZeroCopy() {
		q.tx.arena = p.pool.Arena()
	}
	for q.rx.lentRx < q.rx.lendMax {
		if !q.rx.stock(q.rx.lendMax - q.rx.lentRx) {
			return fmt.Errorf("%w: pool %q ran out of frames filling the fill ring of queue %d (use a bigger pool, or a smaller RingSize or FillLevel)",
				ErrInvalidOptions, p.pool.Name(), ifQueue)
		}
	}
	return p.att.setSocket(ifQueue, sock.FD())
}

func (p *Port) openFirstSocket(cfg xsk.Config, li linkInfo, sg bool) (*xsk.Socket, error) {
	wake := uint16(unix.XDP_USE_NEED_WAKEUP)
	if sg {
		wake |= unix.XDP_USE_SG
	}
	switch p.opts.ZeroCopy {
	case ZeroCopyOn:
		cfg.BindFlags = wake | unix.XDP_ZEROCOPY
	case ZeroCopyOff:
		cfg.BindFlags = wake | unix.XDP_COPY
	default:
		cfg.BindFlags = wake | unix.XDP_ZEROCOPY
		sock, err := openSocket(cfg)
		if err == nil {
			return sock, nil
		}
		var op *xsk.OpError
		if !errors.As(err, &op) || op.Step != xsk.StepBind || errors.Is(err, unix.EBUSY) {
			return nil, err
		}
		p.opts.Logger.Debug("afxdp: zero-copy bind refused, using copy mode", "interface", li.Name, "queue", cfg.Queue, "reason", err)
		cfg.BindFlags = wake | unix.XDP_COPY
	}
	return openSocket(cfg)
}

// releaseWait bounds how long an open waits for a queue that the kernel
// still counts as bound: it frees a closed AF_XDP socket's buffer pool,
// and with it the queue, from a deferred work item, which a loaded machine
// runs late. Seen with a CPU hog on each core: a port opened on the queue
// of one just closed was refused with EBUSY.
const releaseWait = time.Second

// openSocket opens an AF_XDP socket, trying the bind again while the
// kernel answers EBUSY, for up to releaseWait; a queue that another live
// socket holds is still refused, once that time has passed.
func openSocket(cfg xsk.Config) (*xsk.Socket, error) {
	deadline := time.Now().Add(releaseWait)
	pause := time.Millisecond
	for {
		sock, err := xsk.Open(cfg)
		var op *xsk.OpError
		if err == nil || !errors.As(err, &op) || op.Step != xsk.StepBind || !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			return sock, err
		}
		time.Sleep(pause)
		pause = min(2*pause, 50*time.Millisecond)
	}
}

// socketError explains a failed socket setup.
func socketError(ifname string, queue int, zc ZeroCopy, err error) error {
	var op *xsk.OpError
	if !errors.As(err, &op) {
		return fmt.Errorf("AF_XDP socket for %s queue %d: %w", ifname, queue, err)
	}
	switch {
	case errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES):
		return fmt.Errorf("%w: AF_XDP %s for %s queue %d: %w", ErrPermission, op.Step, ifname, queue, err)
	case op.Step == xsk.StepSocket && errors.Is(err, unix.EAFNOSUPPORT):
		return fmt.Errorf("%w: this kernel has no AF_XDP (CONFIG_XDP_SOCKETS): %w", ErrNotSupported, err)
	case op.Step == xsk.StepUMEM && errors.Is(err, unix.ENOMEM):
		return fmt.Errorf("%w: registering the pool as UMEM failed: the locked-memory limit is too low (ulimit -l; needs CAP_IPC_LOCK or root): %w", ErrPermission, err)
	case op.Step == xsk.StepBind && errors.Is(err, unix.EBUSY):
		return fmt.Errorf("%w: queue %d of %s is in use by another AF_XDP socket: %w", ErrQueueBusy, queue, ifname, err)
	case op.Step == xsk.StepBind && zc == ZeroCopyOn && errors.Is(err, unix.EOPNOTSUPP):
		return fmt.Errorf("%w: %s refuses zero-copy AF_XDP (veth supports copy mode only); use zerocopy=auto or off: %w", ErrNotSupported, ifname, err)
	default:
		return fmt.Errorf("AF_XDP socket for %s queue %d: %w", ifname, queue, err)
	}
}

// UseCaches makes queue's receive half stock its fill ring from rx and its
// transmit half free completed frames to tx, instead of the port's own
// caches; nil keeps (or restores) the port's own. Like DPDK's per-lcore
// mempool cache, this lets frames cycle through the cache of the goroutine
// that drives the queue and that allocates and frees its packets, so the
// kernel copies into and out of frames still in the CPU cache: measured
// here, +25% transmit rate for 1518-byte frames.
//
// rx must be owned by the goroutine that calls RxBurst(queue), tx by the
// one that calls TxBurst(queue) (they may be one cache if one goroutine
// does both), both must come from the port's pool, and the half must not
// be running while UseCaches changes it. The caches may be closed before
// the port: Close returns the frames it held through its own caches.
func (p *Port) UseCaches(queue int, rx, tx *mbuf.Cache) error {
	if uint(queue) >= uint(len(p.queues)) {
		return fmt.Errorf("%w: UseCaches: queue %d out of range (the port has %d)", ErrInvalidOptions, queue, len(p.queues))
	}
	if p.closed.Load() {
		return fmt.Errorf("%w: UseCaches on closed port %s", ErrInvalidOptions, p.opts.Name)
	}
	q := &p.queues[queue]
	q.rx.cache, q.tx.cache = cmp.Or(rx, q.rx.own), cmp.Or(tx, q.tx.own)
	return nil
}

// Info describes the port.
func (p *Port) Info() port.Info {
	info := p.info
	info.MAC = slices.Clone(p.info.MAC)
	return info
}

// Mode returns how the XDP program is attached: ModeNative or ModeGeneric.
func (p *Port) Mode() Mode { return p.att.mode }

// ZeroCopy reports whether the sockets are bound in zero-copy mode (false:
// the kernel copies frames between its buffers and the pool).
func (p *Port) ZeroCopy() bool { return p.zeroCopy }

// Stats returns the port's counters with the kernel's socket counters folded
// in: RxDropped includes frames the kernel dropped for lack of a chunk, a
// full RX ring or a frame too large; RxNoBuf counts the times the kernel
// found a fill ring empty; Errors includes invalid descriptors.
func (p *Port) Stats() port.Stats {
	s := p.stats.Snapshot()
	for q, k := range p.KernelStats() {
		drop := k.RxDropped + k.RxRingFull
		s.Queues[q].RxDropped += drop
		s.RxDropped += drop
		s.RxNoBuf += k.RxFillRingEmptyDescs
		s.Errors += k.RxInvalidDescs + k.TxInvalidDescs
	}
	return s
}

// Missteered returns, per port queue, how many datagrams the XDP program
// saw arrive there whose CID names another queue's shard (all zero unless
// Options.ShardBits is set). The frames were delivered on the queue they
// arrived on; a sharded transport hands them over in software. After
// Close it returns the counts read at Close (the program, which may have
// been detached, holds them no longer).
func (p *Port) Missteered() []uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.finalMiss != nil {
		return slices.Clone(p.finalMiss)
	}
	return p.readMissteered()
}

func (p *Port) readMissteered() []uint64 {
	out := make([]uint64, len(p.queues))
	for i := range out {
		if p.att == nil {
			break
		}
		out[i] = p.att.prog.missteered(p.opts.Queue + i)
	}
	return out
}

// KernelStats returns each queue's socket counters (a syscall per queue;
// control path only). After Close it returns the values read at Close.
func (p *Port) KernelStats() []KernelStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.final != nil {
		return slices.Clone(p.final)
	}
	return p.readKernelStats()
}

func (p *Port) readKernelStats() []KernelStats {
	out := make([]KernelStats, len(p.queues))
	for i := range p.queues {
		if p.queues[i].sock == nil {
			continue
		}
		k, err := p.queues[i].sock.Stats()
		if err != nil {
			continue // the socket is healthy or gone; neither is worth a failure here
		}
		out[i] = KernelStats(k)
	}
	return out
}

// Close detaches the XDP program (unless other ports of the same
// Attachments still use it), closes the sockets and returns to the pool
// every frame the port held: those on the fill and RX rings, those the
// kernel held between them, and those sent but not yet completed. The
// goroutines driving the port must have stopped before Close. Close is
// idempotent.
func (p *Port) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed.Swap(true) {
		return nil
	}
	p.final, p.finalMiss = p.readKernelStats(), p.readMissteered()
	return p.teardown()
}

// teardown releases whatever New set up, also after a failed New.
func (p *Port) teardown() error {
	var errs []error
	if p.att != nil {
		errs = append(errs, p.att.release(p.opts.Queue, p.opts.Queues))
	}
	// Sharing sockets go first; the UMEM lives until the last one closes.
	for i := len(p.queues) - 1; i >= 0; i-- {
		q := &p.queues[i]
		if q.sock == nil {
			continue
		}
		errs = append(errs, q.sock.Close())
	}
	// With every socket closed the kernel holds no frame any more.
	for i := range p.queues {
		q := &p.queues[i]
		if q.rx.own != nil {
			q.rx.reclaimAll()
		}
		if q.tx.own != nil {
			q.tx.reclaimAll()
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("afxdp: close %s: %w", p.opts.Name, err)
	}
	return nil
}
