// Package txnload is the transaction workload of `peregrine demo` and the
// transport benchmarks: a stage that keeps a window of pushes and pulls
// outstanding on an initiator's connections to a target, checks every
// completion (status, order on ordered connections, the bytes where they
// landed) and measures goodput and latency.
//
// Memory: the initiator registers one source region (what pushes send,
// stamped per operation) and one destination region (where pulls land);
// the target one region whose first half receives pushes and whose second
// half, filled with a fixed pattern, serves pulls. Each operation owns a
// slot of Slot bytes in those regions from posting to completion, so
// operations never overlap. Pulls are verified by the initiator when they
// complete. Pushes are verified where they land: give the target endpoint
// Load.CheckRequest as its OnRequest (it runs on the target's goroutine,
// which owns that memory), and it checks that every stamp in the placed
// span names the same operation — a segment of another operation, or one
// placed at the wrong offset, breaks that.
package txnload

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/hist"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/rt/txn"
	"github.com/peregrine-net/peregrine/core/wire"
)

// Options configure a Load.
type Options struct {
	// Initiator posts the operations; Target (optional, same process) is
	// the peer whose memory pushes land in, for verification.
	Initiator *txn.Endpoint
	Target    *txn.Endpoint
	// TargetRegion is the region the target registered with Target
	// Region(): when Target is nil it must be given (the key, and Len).
	TargetRegion txn.Region
	Peer         rt.PeerAddr
	// Conns connections are opened; even ones ordered, odd ones unordered
	// (default 2).
	Conns int
	// Window is the most operations outstanding at once (default 32).
	Window int
	// Sizes are the message sizes, used in turn (default 512 B, 4 KiB,
	// 64 KiB: unsolicited and solicited pushes).
	Sizes []int
	// PullEvery makes every n-th operation a pull (default 4; negative:
	// no pulls).
	PullEvery int
	// Count stops posting after this many operations (0: until Stop).
	Count uint64
	// OpTimeout is every connection's txn.ConnOptions.OpTimeout (0: none):
	// an operation not completed this long after posting ends with
	// StatusTimeout (Stats.TimedOut).
	OpTimeout time.Duration
	// Parts and Part: the load is part Part of Parts loads (the shards of
	// a sharded initiator) that share one target region: each pushes into
	// its own push area, so concurrent pushes never overlap, and all pull
	// from one pull area after the Parts push areas (TargetMemoryFor).
	// Default 1 and 0.
	Parts, Part int
}

// TargetMemory returns the memory a target should register for a load of
// the given options (RemoteWrite|RemoteRead), with its pull half filled.
func TargetMemory(window int, sizes []int) []byte { return TargetMemoryFor(window, sizes, 1) }

// TargetMemoryLen is len(TargetMemory(window, sizes)): the least target
// region a load of that window and those sizes needs.
func TargetMemoryLen(window int, sizes []int) int { return TargetMemoryLenFor(window, sizes, 1) }

// TargetMemoryFor is TargetMemory for parts loads sharing the region
// (Options.Parts): parts push areas, then the pull area, filled.
func TargetMemoryFor(window int, sizes []int, parts int) []byte {
	mem := make([]byte, TargetMemoryLenFor(window, sizes, parts))
	fillPattern(mem[parts*window*slotSize(sizes):])
	return mem
}

// TargetMemoryLenFor is len(TargetMemoryFor(window, sizes, parts)).
func TargetMemoryLenFor(window int, sizes []int, parts int) int {
	return (max(parts, 1) + 1) * window * slotSize(sizes)
}

func slotSize(sizes []int) int {
	m := 0
	for _, s := range sizes {
		m = max(m, s)
	}
	return m
}

func fillPattern(b []byte) {
	for i := range b {
		b[i] = pullByte(i)
	}
}

// stampEvery is the stride of the operation stamps a push carries.
const stampEvery = 256

// Stats are the load's counters, readable from any goroutine.
type Stats struct {
	Posted, Completed, Failed, Busy uint64
	Bytes                           uint64 // bytes of operations completed OK
	BadData                         uint64 // completed OK but the bytes are wrong
	Checked                         uint64 // pushes the target checked (CheckRequest)
	OutOfOrder                      uint64 // ordered completions out of posting order
	// Failed, by why: the target refused the remote region (by the check
	// that failed: no such key, no access, too small, or unsaid), a packet
	// ran out of retries, or the connection failed.
	RefusedUnregistered, RefusedAccess, RefusedTooSmall, RefusedOther uint64
	Abandoned, ConnFailed                                             uint64
	TimedOut                                                          uint64 // Options.OpTimeout passed
	// SlowestFailed is the longest a failed operation took from posting
	// to its completion: with OpTimeout set, within it (plus a poll's
	// lateness) whatever the peer does.
	SlowestFailed time.Duration
}

// Add returns the sum of two loads' counters (the shards of a sharded
// initiator); SlowestFailed is the larger.
func (s Stats) Add(o Stats) Stats {
	s.Posted += o.Posted
	s.Completed += o.Completed
	s.Failed += o.Failed
	s.Busy += o.Busy
	s.Bytes += o.Bytes
	s.BadData += o.BadData
	s.Checked += o.Checked
	s.OutOfOrder += o.OutOfOrder
	s.RefusedUnregistered += o.RefusedUnregistered
	s.RefusedAccess += o.RefusedAccess
	s.RefusedTooSmall += o.RefusedTooSmall
	s.RefusedOther += o.RefusedOther
	s.Abandoned += o.Abandoned
	s.ConnFailed += o.ConnFailed
	s.TimedOut += o.TimedOut
	s.SlowestFailed = max(s.SlowestFailed, o.SlowestFailed)
	return s
}

type slotState struct {
	busy  bool
	conn  int
	kind  txn.OpKind
	size  int
	id    uint64
	order uint64 // posting sequence on its connection
}

// Load is the workload stage.
type Load struct {
	opts    Options
	conns   []*txn.Conn
	slot    int
	src     []byte
	dst     []byte
	rSrc    txn.Region
	rDst    txn.Region
	slots   []slotState
	free    []int
	cq      []txn.Completion
	nextOp  uint64
	posted  []uint64 // per connection: operations posted
	doneSeq []uint64 // per connection: next expected completion sequence
	stopped atomic.Bool
	closing bool        // the connections were asked to close (loop goroutine)
	closed  atomic.Bool // every connection is closed
	down    atomic.Bool // every connection ended before the load closed it (Down)
	checked atomic.Uint64
	Latency hist.Histogram // ns from posting to completion (read after the loop stops)
	// Sends, when set, gets the completions of Sends on the same
	// initiator (sendload.go).
	Sends *SendLoad
	cnt   [numCounters]atomic.Uint64
}

// Indices of Load.cnt.
const (
	cPosted = iota
	cCompleted
	cFailed
	cBusy
	cBytes
	cBadData
	cOutOfOrder
	cRefusedUnregistered
	cRefusedAccess
	cRefusedTooSmall
	cRefusedOther
	cAbandoned
	cConnFailed
	cTimedOut
	cSlowestFailed // ns, a maximum
	numCounters
)

// New registers the memory and opens the connections.
func New(opts Options, targetMem []byte) (*Load, error) {
	if opts.Initiator == nil {
		return nil, errors.New("txnload: Options.Initiator is required")
	}
	if opts.Conns == 0 {
		opts.Conns = 2
	}
	if opts.Window == 0 {
		opts.Window = 32
	}
	if len(opts.Sizes) == 0 {
		opts.Sizes = []int{512, 4 << 10, 64 << 10}
	}
	if opts.PullEvery == 0 {
		opts.PullEvery = 4
	}
	for _, s := range opts.Sizes {
		if s < 16 || s > txn.MaxMessage {
			return nil, fmt.Errorf("txnload: size %d out of range (16..%d)", s, txn.MaxMessage)
		}
	}
	l := &Load{opts: opts, slot: slotSize(opts.Sizes), cq: make([]txn.Completion, 64)}
	l.src = make([]byte, opts.Window*l.slot)
	l.dst = make([]byte, opts.Window*l.slot)
	var err error
	if l.rSrc, err = opts.Initiator.Register(l.src, 0); err != nil {
		return nil, err
	}
	if l.rDst, err = opts.Initiator.Register(l.dst, 0); err != nil {
		return nil, err
	}
	if opts.Target != nil {
		if targetMem == nil {
			return nil, errors.New("txnload: with Options.Target, pass the target's memory (TargetMemory)")
		}
		if opts.TargetRegion, err = opts.Target.Register(targetMem, txn.RemoteWrite|txn.RemoteRead); err != nil {
			return nil, err
		}
	}
	if opts.Parts == 0 {
		opts.Parts = 1
	}
	if opts.Part < 0 || opts.Part >= opts.Parts {
		return nil, fmt.Errorf("txnload: Options.Part %d is out of range for Parts %d (use 0..%d)", opts.Part, opts.Parts, opts.Parts-1)
	}
	if opts.TargetRegion.Len < (opts.Parts+1)*opts.Window*l.slot {
		return nil, fmt.Errorf("txnload: target region of %d bytes is smaller than (parts %d + 1) × window %d × slot %d", opts.TargetRegion.Len, opts.Parts, opts.Window, l.slot)
	}
	l.opts = opts
	l.slots = make([]slotState, opts.Window)
	for i := opts.Window - 1; i >= 0; i-- {
		l.free = append(l.free, i)
	}
	l.posted = make([]uint64, opts.Conns)
	l.doneSeq = make([]uint64, opts.Conns)
	for i := range opts.Conns {
		c, err := opts.Initiator.Open(opts.Peer, txn.ConnOptions{Ordered: i%2 == 0, OpTimeout: opts.OpTimeout})
		if err != nil {
			return nil, err
		}
		l.conns = append(l.conns, c)
	}
	return l, nil
}

// Name names the stage.
func (l *Load) Name() string { return "txnload" }

// Stop stops posting; outstanding operations still complete.
func (l *Load) Stop() { l.stopped.Store(true) }

// Idle reports, from any goroutine, whether Stop was called and every
// operation posted has completed.
func (l *Load) Idle() bool {
	s := l.Stats()
	return l.stopped.Load() && s.Posted == s.Completed+s.Failed
}

// Stats returns the counters.
func (l *Load) Stats() Stats {
	return Stats{Posted: l.cnt[cPosted].Load(), Completed: l.cnt[cCompleted].Load(), Failed: l.cnt[cFailed].Load(), Busy: l.cnt[cBusy].Load(),
		Bytes: l.cnt[cBytes].Load(), BadData: l.cnt[cBadData].Load(), OutOfOrder: l.cnt[cOutOfOrder].Load(), Checked: l.checked.Load(),
		RefusedUnregistered: l.cnt[cRefusedUnregistered].Load(), RefusedAccess: l.cnt[cRefusedAccess].Load(),
		RefusedTooSmall: l.cnt[cRefusedTooSmall].Load(), RefusedOther: l.cnt[cRefusedOther].Load(),
		Abandoned: l.cnt[cAbandoned].Load(), ConnFailed: l.cnt[cConnFailed].Load(), TimedOut: l.cnt[cTimedOut].Load(),
		SlowestFailed: time.Duration(l.cnt[cSlowestFailed].Load())}
}

// Conns returns the load's connections, for a stage on the loop that
// polls them (their state is read on that goroutine only).
func (l *Load) Conns() []*txn.Conn { return l.conns }

// Down reports, from any goroutine, whether every connection of the load
// ended (failed: the target died or restarted, or refused it) before the
// load closed them: nothing more can be posted, and once every operation
// completed (Idle after Stop) the run is over.
func (l *Load) Down() bool { return l.down.Load() }

// Closed reports, from any goroutine, whether the load stopped, drained and
// closed its connections (the peer was told; it frees its side).
func (l *Load) Closed() bool { return l.closed.Load() }

// Poll completes what finished and posts up to the window. It does not
// poll the endpoints: they are stages of their own. Once stopped and
// drained it closes its connections.
func (l *Load) Poll(now clock.Time) int {
	if l.stopped.Load() && len(l.free) == len(l.slots) && !l.closed.Load() {
		return l.closeConns()
	}
	work := 0
	if !l.closing && !l.down.Load() && l.allDown() {
		l.down.Store(true)
	}
	for {
		n := l.opts.Initiator.Completions(l.cq)
		for i := range l.cq[:n] {
			if l.cq[i].Kind == txn.OpSend && l.Sends != nil {
				l.Sends.Complete(&l.cq[i])
				continue
			}
			l.complete(&l.cq[i], now)
		}
		work += n
		if n < len(l.cq) {
			break
		}
	}
	for !l.stopped.Load() && len(l.free) > 0 && (l.opts.Count == 0 || l.nextOp < l.opts.Count) {
		if !l.post() {
			break
		}
		work++
	}
	return work
}

func (l *Load) post() bool {
	s := l.free[len(l.free)-1]
	id := l.nextOp
	ci := int(id % uint64(len(l.conns)))
	size := l.opts.Sizes[id%uint64(len(l.opts.Sizes))]
	kind := txn.OpPush
	if l.opts.PullEvery > 0 && id%uint64(l.opts.PullEvery) == uint64(l.opts.PullEvery-1) {
		kind = txn.OpPull
	}
	off := uint64(s * l.slot)
	op := txn.Op{Len: size, Tag: uint64(s)}
	var err error
	if kind == txn.OpPush {
		stamp(l.src[off:off+uint64(size)], id)
		op.Local, op.LocalAddr = l.rSrc, off
		op.Remote = wire.RegionRef{Key: l.opts.TargetRegion.Key, Addr: uint64(l.opts.Part*l.opts.Window*l.slot) + off}
		_, err = l.conns[ci].Push(op)
	} else {
		clear(l.dst[off : off+uint64(size)])
		op.Local, op.LocalAddr = l.rDst, off
		op.Remote = wire.RegionRef{Key: l.opts.TargetRegion.Key, Addr: uint64(l.opts.Parts*l.opts.Window*l.slot) + off}
		_, err = l.conns[ci].Pull(op)
	}
	if err != nil {
		l.cnt[cBusy].Add(1)
		return false
	}
	l.free = l.free[:len(l.free)-1]
	l.slots[s] = slotState{busy: true, conn: ci, kind: kind, size: size, id: id, order: l.posted[ci]}
	l.posted[ci]++
	l.nextOp++
	l.cnt[cPosted].Add(1)
	return true
}

// stamp writes the operation id every stampEvery bytes (and in the last 8).
func stamp(b []byte, id uint64) {
	for i := 0; i+8 <= len(b); i += stampEvery {
		binary.LittleEndian.PutUint64(b[i:], id)
	}
	if len(b) >= 8 {
		binary.LittleEndian.PutUint64(b[len(b)-8:], id)
	}
}

func (l *Load) complete(c *txn.Completion, now clock.Time) {
	s := int(c.Tag)
	st := &l.slots[s]
	if c.Status != txn.StatusOK {
		l.cnt[cFailed].Add(1)
		l.cnt[failureCounter(c)].Add(1)
		if d := uint64(max(c.Latency(), 0)); d > l.cnt[cSlowestFailed].Load() {
			l.cnt[cSlowestFailed].Store(d) // the loop goroutine is the only writer
		}
	} else {
		l.cnt[cCompleted].Add(1)
		l.cnt[cBytes].Add(uint64(st.size))
		l.Latency.Record(uint64(c.Latency()))
		if !l.verify(st, s) {
			l.cnt[cBadData].Add(1)
		}
	}
	if st.conn%2 == 0 {
		if st.order != l.doneSeq[st.conn] {
			l.cnt[cOutOfOrder].Add(1)
		}
		l.doneSeq[st.conn] = st.order + 1
	}
	*st = slotState{}
	l.free = append(l.free, s)
}

func (l *Load) verify(st *slotState, s int) bool {
	off := s * l.slot
	if st.kind == txn.OpPull {
		// The pull half holds fillPattern, so the byte at relative offset
		// j is pullByte(j); sample it (every 61st byte and the last).
		for i := 0; i < st.size; i += 61 {
			if l.dst[off+i] != pullByte(off+i) {
				return false
			}
		}
		return l.dst[off+st.size-1] == pullByte(off+st.size-1)
	}
	// The source must still hold this operation's stamps (nothing reused
	// the slot early).
	want := l.src[off : off+st.size]
	for i := 0; i+8 <= st.size; i += stampEvery {
		if binary.LittleEndian.Uint64(want[i:]) != st.id {
			return false
		}
	}
	return true
}

// CheckRequest is the target ULP of a load (txn.Options.OnRequest): it
// checks a push's placed bytes on the target's goroutine and counts a bad
// one in Stats.BadData.
func (l *Load) CheckRequest(r *txn.Request) {
	if r.Kind != txn.OpPush {
		return
	}
	if !PushIntact(r.Data) {
		l.cnt[cBadData].Add(1)
	}
	l.checked.Add(1)
}

// PushIntact reports whether a push of a load landed whole: every stamp in
// it names the same operation.
func PushIntact(data []byte) bool {
	if len(data) < 8 {
		return true
	}
	id := binary.LittleEndian.Uint64(data)
	if binary.LittleEndian.Uint64(data[len(data)-8:]) != id {
		return false
	}
	for i := 0; i+8 <= len(data); i += stampEvery {
		if binary.LittleEndian.Uint64(data[i:]) != id {
			return false
		}
	}
	return true
}

func pullByte(j int) byte { return byte(j*7 + j>>8) }

// closeConns closes the connections once and notes when all are gone.
func (l *Load) closeConns() int {
	if !l.closing {
		l.closing = true
		for _, c := range l.conns {
			_ = c.Close()
		}
		return 1
	}
	for _, c := range l.conns {
		if c.Transport() != nil && c.Transport().State() != rt.StateClosed {
			return 0
		}
	}
	l.closed.Store(true)
	return 1
}

// allDown reports whether no connection of the load is live.
func (l *Load) allDown() bool {
	for _, c := range l.conns {
		if c.Live() {
			return false
		}
	}
	return true
}

// failureCounter is the counter of a failed completion's cause.
func failureCounter(c *txn.Completion) int {
	switch c.Status {
	case txn.StatusRemoteAccess:
		switch c.Refusal {
		case txn.RefusalUnregistered:
			return cRefusedUnregistered
		case txn.RefusalAccess:
			return cRefusedAccess
		case txn.RefusalTooSmall:
			return cRefusedTooSmall
		}
		return cRefusedOther
	case txn.StatusAbandoned:
		return cAbandoned
	case txn.StatusTimeout:
		return cTimedOut
	}
	return cConnFailed
}
