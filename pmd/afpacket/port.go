package afpacket

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/pmd/internal/portstat"
)

// etherHeaderLen is what a frame carries beyond the interface's MTU.
const etherHeaderLen = 14

// rxLookGap is how long after finding its block still with the kernel a
// queue reads the block's status again. A block holds tens of full-size
// frames to hundreds of small ones, so it fills in more than ten
// microseconds even at line rate on veth. (Measured in vs-testpmd rxonly,
// 1518-byte frames, 4 rounds each: 1 µs gave 1.24-1.27 Mpps every round,
// 4 µs 0.82-1.23.)
const rxLookGap = time.Microsecond

// Port is an AF_PACKET port. It implements port.Port.
type Port struct {
	pool   *mbuf.Pool
	info   port.Info
	clock  clock.Clock
	queues []queue
	stats  *portstat.Counters
	closed atomic.Bool
	// mu serialises Stats (which reads the sockets) with Close.
	mu sync.Mutex
}

var _ port.Port = (*Port)(nil)

// queue is one socket's state. The receive fields belong to the goroutine
// calling RxBurst, the transmit fields to the one calling TxBurst.
type queue struct {
	ring ring

	// Receive side.
	rxCache    *mbuf.Cache // where RxBurst allocates: rxOwn or the caller's (UseCaches)
	rxOwn      *mbuf.Cache // the port's own; Close closes it
	rxRing     []byte
	blockSize  int
	blockCount int
	rxBlock    int // the block being read, or awaited from the kernel
	rxLeft     int // frames of rxBlock not yet read; 0 when not holding it
	rxOff      int // offset of the next frame in rxBlock
	room       int // largest frame an mbuf takes
	headroom   uint16
	rxLook     time.Time // when an empty queue reads its block status again
	v3         bool      // the rings are TPACKET_V3; else V2
	rxSlot     int       // V2: the slot read next
	rxSlots    int       // V2: slots in the receive ring

	_ [128]byte // keep the two sides' fields on different cache lines

	// Transmit side.
	txCache  *mbuf.Cache // where TxBurst frees copied mbufs: txOwn or the caller's
	txOwn    *mbuf.Cache
	txRing   []byte
	slotSize int
	slots    int
	txHead   int
	txMax    int // largest untagged frame sent: MTU + Ethernet header, capped by the slot
	slotRoom int // data bytes a slot holds
	// Where a transmit slot's fields are: they differ between V2 and V3.
	txData, txStatusOff, txLenOff, txSnapOff int
	kickPending                              bool
	txBatch                                  int // Options.TxBatch
	txHeld                                   int // frames marked for sending since the last kick

	stats *portstat.Queue
	_     [128]byte
}

// New opens an AF_PACKET port on Options.Interface, receiving into mbufs
// from pool.
func New(pool *mbuf.Pool, opts Options) (*Port, error) {
	if pool == nil {
		return nil, errors.New("afpacket: New: pool is nil (pass the pool received frames are copied into)")
	}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if opts.Clock == nil {
		opts.Clock = clock.NewReal()
	}
	lk, rings, err := openRings(&opts)
	if err != nil {
		return nil, err
	}
	p := &Port{
		pool:  pool,
		clock: opts.Clock,
		info: port.Info{
			Name:   opts.Name,
			Driver: DriverName,
			Queues: opts.Queues,
			MTU:    lk.mtu,
			MAC:    lk.mac,
			Caps:   port.CapRxTimestamp,
		},
		queues: make([]queue, opts.Queues),
		stats:  portstat.New(opts.Queues),
	}
	if len(p.info.MAC) == 0 {
		p.info.MAC = nil
	}
	rxLen := opts.BlockSize * opts.BlockCount
	v3 := opts.Ring == RingV3
	txData, txStatusOff, txLenOff, txSnapOff := tpacket2HdrLen, v2StatusOff, v2LenOff, v2SnapOff
	if v3 {
		txData, txStatusOff, txLenOff, txSnapOff = tpacket3HdrLen, hdrStatusOff, hdrLenOff, hdrSnapOff
	}
	for i, r := range rings {
		rxOwn, txOwn := pool.NewCache(), pool.NewCache()
		p.queues[i] = queue{
			v3:          v3,
			rxSlots:     rxLen / opts.FrameSize,
			txData:      txData,
			txStatusOff: txStatusOff,
			txLenOff:    txLenOff,
			txSnapOff:   txSnapOff,
			ring:        r,
			rxCache:     rxOwn,
			rxOwn:       rxOwn,
			rxRing:      r.mem[:rxLen:rxLen],
			blockSize:   opts.BlockSize,
			blockCount:  opts.BlockCount,
			room:        pool.FrameSize() - pool.Headroom(),
			headroom:    uint16(pool.Headroom()),
			txCache:     txOwn,
			txOwn:       txOwn,
			txRing:      r.mem[rxLen:],
			txBatch:     opts.TxBatch,
			slotSize:    opts.FrameSize,
			slots:       len(r.mem[rxLen:]) / opts.FrameSize,
			txMax:       min(lk.mtu+etherHeaderLen, opts.FrameSize-txData-vnetHdrLen),
			slotRoom:    opts.FrameSize - txData - vnetHdrLen,
			stats:       p.stats.Queue(i),
		}
	}
	return p, nil
}

// Info describes the port.
func (p *Port) Info() port.Info { return p.info }

// UseCaches makes queue's RxBurst allocate the mbufs it copies received
// frames into from rx, and its TxBurst free the mbufs it has copied to tx,
// instead of the port's own caches; nil keeps (or restores) the port's own.
// Given the cache of the goroutine that drives the queue (the one its
// stages allocate from and free to), frames cycle through one LIFO stack on
// that CPU: a forwarder's RX copy then writes into the frame its TX copy
// just read, still in the CPU cache, instead of into one that went round
// the pool's shared ring.
//
// rx must be owned by the goroutine that calls RxBurst(queue), tx by the
// one that calls TxBurst(queue) (one cache if one goroutine does both),
// both must come from the port's pool, and neither half may be running
// while UseCaches changes it. The caches are the caller's to flush and
// close; the port holds no mbufs in them between calls.
func (p *Port) UseCaches(queue int, rx, tx *mbuf.Cache) error {
	if uint(queue) >= uint(len(p.queues)) {
		return fmt.Errorf("afpacket: UseCaches: queue %d out of range (the port has %d)", queue, len(p.queues))
	}
	if p.closed.Load() {
		return fmt.Errorf("afpacket: UseCaches on closed port %s", p.info.Name)
	}
	q := &p.queues[queue]
	q.rxCache, q.txCache = cmp.Or(rx, q.rxOwn), cmp.Or(tx, q.txOwn)
	return nil
}

func (q *queue) block(i int) []byte {
	off := i * q.blockSize
	return q.rxRing[off : off+q.blockSize : off+q.blockSize]
}

// releaseBlock hands the current block back to the kernel and moves on.
func (q *queue) releaseBlock() {
	storeStatus(q.block(q.rxBlock), blockStatusOff, unix.TP_STATUS_KERNEL)
	q.rxLeft = 0
	if q.rxBlock++; q.rxBlock == q.blockCount {
		q.rxBlock = 0
	}
}

// rxReady reports whether a frame can be read without waiting.
func (q *queue) rxReady() bool {
	if !q.v3 {
		return loadStatus(q.slot(q.rxSlot), v2StatusOff)&tpStatusUser != 0
	}
	return q.rxLeft > 0 || loadStatus(q.block(q.rxBlock), blockStatusOff)&tpStatusUser != 0
}

// RxBurst copies up to len(bufs) received frames into mbufs; the caller
// owns bufs[:n]. Meta.RxTime is the kernel's receive time on the port's
// clock, Meta.Queue the queue.
func (p *Port) RxBurst(queue int, bufs []mbuf.Handle) int {
	if uint(queue) >= uint(len(p.queues)) || len(bufs) == 0 || p.closed.Load() {
		return 0
	}
	q := &p.queues[queue]
	if !q.v3 {
		return p.rxV2(q, queue, bufs)
	}
	if q.rxLeft == 0 {
		// The status word of the block being filled shares its cache line
		// with the block's frame count and length, which the kernel
		// updates with every frame it adds. Read on every poll of a busy
		// loop, the line left the receiving CPU once per frame (measured in
		// vs-testpmd rxonly, 1518-byte frames: the generator's CPU
		// delivered 1.8-2.1 M frames in some 3 s rounds, 3.5 M in every
		// round once the reads were thinned out). So an empty queue looks
		// again only rxLookGap later, by the clock rather than by a count
		// of polls, so that a loop that sleeps between polls is not slowed.
		now := time.Now()
		if now.Before(q.rxLook) {
			return 0
		}
		if loadStatus(q.block(q.rxBlock), blockStatusOff)&tpStatusUser == 0 {
			q.rxLook = now.Add(rxLookGap)
			return 0
		}
	}
	got := q.getMbufs(bufs)
	if got == 0 {
		return 0
	}
	// One clock reading per burst maps the kernel's wall-clock stamps onto
	// the port's clock.
	nowClock := int64(p.clock.Now())
	nowWall := time.Now().UnixNano()
	n := 0
	var bytes, dropped, malformed uint64
	for n < got {
		if q.rxLeft == 0 {
			block := q.block(q.rxBlock)
			if loadStatus(block, blockStatusOff)&tpStatusUser == 0 {
				break
			}
			count, first, ok := blockFrames(block)
			if !ok {
				malformed++
				q.releaseBlock()
				continue
			}
			if count == 0 {
				q.releaseBlock()
				continue
			}
			q.rxLeft, q.rxOff = count, first
		}
		block := q.block(q.rxBlock)
		f, ok := parseFrame(block, q.rxOff)
		if !ok {
			malformed++
			q.releaseBlock()
			continue
		}
		q.rxLeft--
		q.rxOff += f.next
		if f.next == 0 && q.rxLeft > 0 {
			malformed++ // the chain ends early; skip the rest of the block
			q.rxLeft = 0
		}
		switch {
		case f.outgoing:
		case !q.fits(&f):
			dropped++
		default:
			bytes += uint64(p.fill(bufs[n], &f, block, queue, nowClock, nowWall))
			n++
		}
		if q.rxLeft == 0 {
			q.releaseBlock()
		}
	}
	return q.endRx(bufs, n, got, bytes, dropped, malformed)
}

// getMbufs takes up to len(bufs) mbufs from the receive cache for a
// burst, counting a short one in RxNoBuf. Every frame handed out gets its
// whole Meta written, so a raw get (no metadata reset) will do when the
// cache has a full burst.
func (q *queue) getMbufs(bufs []mbuf.Handle) int {
	got := q.rxCache.GetBulk(bufs)
	if got == 0 {
		got = q.rxCache.AllocBurst(bufs)
	}
	if got < len(bufs) {
		q.stats.RxNoBuf.Add(1)
	}
	return got
}

// fits reports whether a received frame arrived whole and fits an mbuf.
func (q *queue) fits(f *rxFrame) bool {
	size := f.frameLen()
	return f.snapLen >= f.wireLen && size <= q.room && size <= 0xffff
}

// fill copies frame f out of ring memory mem into h and sets its Meta;
// it returns the frame's length.
func (p *Port) fill(h mbuf.Handle, f *rxFrame, mem []byte, queue int, nowClock, nowWall int64) int {
	size := f.frameLen()
	age := nowWall - (int64(f.sec)*1e9 + int64(f.nsec))
	*p.pool.Meta(h) = mbuf.Meta{
		DataOff: p.queues[queue].headroom,
		DataLen: uint16(size),
		Queue:   uint16(queue),
		RxTime:  nowClock - max(age, 0),
	}
	f.copyTo(p.pool.Data(h), mem)
	return size
}

// endRx gives back the mbufs of bufs[n:got] that got no frame and counts
// the burst.
func (q *queue) endRx(bufs []mbuf.Handle, n, got int, bytes, dropped, malformed uint64) int {
	if n < got {
		q.rxCache.Free(bufs[n:got])
	}
	if dropped+malformed > 0 {
		q.stats.RxDropped.Add(dropped + malformed)
		if malformed > 0 {
			q.stats.RxErrors.Add(malformed)
		}
	}
	q.stats.AddRx(n, bytes)
	return n
}

// slot returns receive slot i of a V2 ring.
func (q *queue) slot(i int) []byte {
	off := i * q.slotSize
	return q.rxRing[off : off+q.slotSize : off+q.slotSize]
}

// rxV2 is RxBurst on a V2 ring: every slot holds one frame, handed back
// to the kernel as soon as it is copied.
func (p *Port) rxV2(q *queue, queue int, bufs []mbuf.Handle) int {
	if loadStatus(q.slot(q.rxSlot), v2StatusOff)&tpStatusUser == 0 {
		return 0
	}
	got := q.getMbufs(bufs)
	if got == 0 {
		return 0
	}
	nowClock := int64(p.clock.Now())
	nowWall := time.Now().UnixNano()
	n := 0
	var bytes, dropped, malformed uint64
	for n < got {
		slot := q.slot(q.rxSlot)
		if loadStatus(slot, v2StatusOff)&tpStatusUser == 0 {
			break
		}
		switch f, ok := parseSlot(slot); {
		case !ok:
			malformed++
		case f.outgoing:
		case !q.fits(&f):
			dropped++
		default:
			bytes += uint64(p.fill(bufs[n], &f, slot, queue, nowClock, nowWall))
			n++
		}
		storeStatus(slot, v2StatusOff, tpStatusKernel)
		if q.rxSlot++; q.rxSlot == q.rxSlots {
			q.rxSlot = 0
		}
	}
	return q.endRx(bufs, n, got, bytes, dropped, malformed)
}

// TxBurst copies up to len(bufs) frames into the transmit ring, frees them
// and has the kernel send them; it returns how many it took. The caller
// keeps bufs[n:] (the ring was full). A frame longer than the MTU allows
// (or empty) is taken, freed and counted as an error, not sent.
func (p *Port) TxBurst(queue int, bufs []mbuf.Handle) int {
	if uint(queue) >= uint(len(p.queues)) || len(bufs) == 0 || p.closed.Load() {
		return 0
	}
	q := &p.queues[queue]
	n := 0
	var bytes uint64
	var sent, rejected int
	for _, h := range bufs {
		off := q.txHead * q.slotSize
		slot := q.txRing[off : off+q.slotSize : off+q.slotSize]
		if loadStatus(slot, q.txStatusOff)&txStatusPending != 0 {
			break // the kernel has not finished with the oldest slot: full
		}
		n++
		data := p.pool.Data(h)
		if len(data) == 0 || len(data) > q.txMax && !q.fitsTagged(data) {
			rejected++
			continue
		}
		vh := slot[q.txData : q.txData+vnetHdrLen]
		clear(vh)
		binary.LittleEndian.PutUint16(vh[2:], uint16(len(data))) // hdr_len: all of it linear
		copy(slot[q.txData+vnetHdrLen:], data)
		if q.v3 {
			binary.NativeEndian.PutUint32(slot[hdrNextOff:], 0)
		}
		binary.NativeEndian.PutUint32(slot[q.txLenOff:], uint32(len(data)+vnetHdrLen))
		binary.NativeEndian.PutUint32(slot[q.txSnapOff:], uint32(len(data)+vnetHdrLen))
		storeStatus(slot, q.txStatusOff, unix.TP_STATUS_SEND_REQUEST)
		if q.txHead++; q.txHead == q.slots {
			q.txHead = 0
		}
		sent++
		bytes += uint64(len(data))
	}
	if n > 0 {
		q.txCache.Free(bufs[:n])
	}
	q.txHeld += sent
	now := q.txHeld >= q.txBatch || len(bufs) < port.FullBurst || n < len(bufs)
	if q.kickPending || now && q.txHeld > 0 {
		q.kick()
	}
	if rejected > 0 {
		q.stats.TxErrors.Add(uint64(rejected))
	}
	q.stats.AddTxDropped(len(bufs) - n)
	q.stats.AddTx(sent, bytes)
	return n
}

// fitsTagged reports whether data, longer than txMax, is a VLAN-tagged
// frame within MTU + header + tag, which the kernel accepts too.
func (q *queue) fitsTagged(data []byte) bool {
	if len(data) > q.txMax+vlanTagLen || len(data) > q.slotRoom || len(data) < etherHeaderLen {
		return false
	}
	et := binary.BigEndian.Uint16(data[12:14])
	return et == etherTypeVLAN || et == etherTypeQinQ
}

// kick asks the kernel to send every slot marked for sending, without
// waiting. A kick the kernel could not finish is retried on the next burst.
//
// It is a raw syscall: sendto with MSG_DONTWAIT never sleeps, and through
// syscall.Syscall a send of a burst outlasted sysmon's 20 µs tick, so the
// poll loop lost its P to another thread and slept until it came back
// (measured in the vs-testpmd io comparison: 6-11 % of the forwarding CPU
// went to other threads). A stop-the-world waits for a kick in progress:
// at most TxSlots frames.
// vnetHdrLen is sizeof(struct virtio_net_hdr), in front of every frame in
// a transmit slot: flags and gso_type 0, hdr_len the frame's length.
const vnetHdrLen = 10

// RxWaitFD implements port.RxWaiter: queue's packet socket, which poll(2)
// reports readable while its receive ring holds a frame (V2) or a retired
// block (V3).
func (p *Port) RxWaitFD(queue int) int {
	if uint(queue) >= uint(len(p.queues)) || p.closed.Load() {
		return -1
	}
	return p.queues[queue].ring.fd
}

// TxFlush sends the frames queue holds (see Options.TxBatch).
func (p *Port) TxFlush(queue int) {
	if uint(queue) >= uint(len(p.queues)) || p.closed.Load() {
		return
	}
	if q := &p.queues[queue]; q.txHeld > 0 || q.kickPending {
		q.kick()
	}
}

func (q *queue) kick() {
	q.txHeld = 0
	_, _, errno := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(q.ring.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
	switch errno {
	case 0:
		q.kickPending = false
	case unix.EAGAIN, unix.ENOBUFS, unix.EINTR:
		q.kickPending = true
	default:
		q.kickPending = true
		q.stats.TxErrors.Add(1)
	}
}

// WaitRx blocks until queue has a frame to read or timeout passes, for
// callers that would rather sleep than spin on an idle link. It reports
// whether a frame is ready.
func (p *Port) WaitRx(queue int, timeout time.Duration) (bool, error) {
	if uint(queue) >= uint(len(p.queues)) {
		return false, fmt.Errorf("afpacket: WaitRx: queue %d out of range (port has %d)", queue, len(p.queues))
	}
	if p.closed.Load() {
		return false, fmt.Errorf("afpacket: WaitRx on closed port %s", p.info.Name)
	}
	q := &p.queues[queue]
	if q.rxReady() {
		return true, nil
	}
	fds := []unix.PollFd{{Fd: int32(q.ring.fd), Events: unix.POLLIN | unix.POLLERR}}
	_, err := unix.Poll(fds, int(timeout.Milliseconds()))
	if err != nil && !errors.Is(err, unix.EINTR) {
		return false, fmt.Errorf("afpacket: poll: %w", err)
	}
	return q.rxReady(), nil
}

// Wait blocks until any queue has a frame to read or timeout passes. It
// reports whether one is ready.
func (p *Port) Wait(timeout time.Duration) (bool, error) {
	if p.closed.Load() {
		return false, fmt.Errorf("afpacket: Wait on closed port %s", p.info.Name)
	}
	fds := make([]unix.PollFd, len(p.queues))
	for i := range p.queues {
		if p.queues[i].rxReady() {
			return true, nil
		}
		fds[i] = unix.PollFd{Fd: int32(p.queues[i].ring.fd), Events: unix.POLLIN | unix.POLLERR}
	}
	n, err := unix.Poll(fds, int(timeout.Milliseconds()))
	if err != nil && !errors.Is(err, unix.EINTR) {
		return false, fmt.Errorf("afpacket: poll: %w", err)
	}
	return n > 0, nil
}

// Stats returns the port's counters, with the kernel's receive-ring drops
// folded into RxDropped.
func (p *Port) Stats() port.Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed.Load() {
		p.foldKernelDrops()
	}
	return p.stats.Snapshot()
}

// foldKernelDrops adds what PACKET_STATISTICS counted since the last read
// (reading resets it). Call with mu held and the sockets open.
func (p *Port) foldKernelDrops() {
	for i := range p.queues {
		q := &p.queues[i]
		drops, err := q.ring.kernelDrops()
		if err != nil {
			q.stats.RxErrors.Add(1)
			continue
		}
		if drops > 0 {
			q.stats.RxDropped.Add(drops)
		}
	}
}

// Close releases the sockets and rings and flushes the queues' caches. It
// is idempotent. It must not run while RxBurst or TxBurst runs.
func (p *Port) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed.Swap(true) {
		return nil
	}
	p.foldKernelDrops()
	var errs []error
	for i := range p.queues {
		q := &p.queues[i]
		q.rxOwn.Close()
		q.txOwn.Close()
		q.rxRing, q.txRing = nil, nil
		if err := q.ring.close(); err != nil {
			errs = append(errs, fmt.Errorf("queue %d: %w", i, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("afpacket: close %s: %w", p.info.Name, err)
	}
	return nil
}
