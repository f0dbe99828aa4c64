package roce

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/core/qpx"
	"github.com/peregrine-net/peregrine/core/wire"
)

// Defaults of Options.
const (
	DefaultBurst = 32
	DefaultPMTU  = 1024
)

// Options configure New.
type Options struct {
	// Name labels the stage ("roce" by default).
	Name string
	// Net is the network side (global QPNs), Host the host side (local QP
	// numbers). Either may be receive-only or transmit-only (a pcap file):
	// a direction whose input yields nothing simply idles.
	Net, Host           port.Port
	NetQueue, HostQueue int
	// Pool is the frames' pool; Cache the loop's cache (nil: one of the
	// stage's own).
	Pool  *mbuf.Pool
	Cache *mbuf.Cache
	// Table is the CAM and the local contexts (required). The stage
	// translates through it and updates its contexts' PSNs.
	Table *qpx.Table
	// Burst is the frames per burst (1..256, default 32).
	Burst int
	// UDPPort is RoCEv2's UDP port (default wire.RoCEv2Port, 4791).
	UDPPort uint16
	// PMTU is the path MTU that sizes an RDMA READ's responses, for the
	// PSNs its request occupies (256..4096, default 1024).
	PMTU int
	// StrictPSN drops requests whose PSN is ahead of the expected one
	// instead of counting them and passing them on, and leaves the
	// expectation where it was, so the requester's go-back-N resend of the
	// missing PSN is in order and a forged far-ahead PSN moves nothing.
	// Duplicates (behind) still pass: the responder must see them to
	// acknowledge again when its acknowledgement was lost.
	StrictPSN bool
}

// Counter indexes of one direction.
const (
	cReceived = iota
	cForwarded
	cPassedOther
	cDropMalformed
	cDropICRC
	cDropRetired
	cDropUnknown
	cDropAccess
	cDropStrictPSN
	cDropUnsupported
	cDropTxFull
	cOutOfSequence
	cDuplicate
	nCounters
)

// DirStats are the counters of one direction.
type DirStats struct {
	Received  uint64 // frames taken from the input
	Forwarded uint64 // frames the output accepted (RoCEv2 and other)
	// PassedOther counts frames that are not RoCEv2 (passed untouched).
	PassedOther uint64
	// Drops, by reason: a malformed RoCEv2 frame (lengths, TVer, an
	// opcode IBA does not define); a bad ICRC; a destination QPN that is
	// retired (a stale packet) or never handed out (toward the host), or a
	// local number with no live QP (toward the network); an opcode the
	// context's access forbids; a PSN ahead under StrictPSN; a RoCEv2
	// datagram the stage cannot locate (IPv6 extension headers before the
	// UDP header), which it never passes on untranslated; the output
	// refusing the frame.
	DropMalformed, DropICRC, DropRetired, DropUnknown, DropAccess, DropStrictPSN, DropUnsupported, DropTxFull uint64
	// OutOfSequence and Duplicate count requests whose PSN was ahead of or
	// behind the context's expectation (passed unless StrictPSN).
	OutOfSequence, Duplicate uint64
}

// Dropped sums every drop.
func (d DirStats) Dropped() uint64 {
	return d.DropMalformed + d.DropICRC + d.DropRetired + d.DropUnknown + d.DropAccess + d.DropStrictPSN + d.DropUnsupported + d.DropTxFull
}

func (d DirStats) String() string {
	return fmt.Sprintf("rx=%d fwd=%d other=%d drop{malformed=%d icrc=%d retired_qpn=%d unknown_qpn=%d access=%d strict_psn=%d unsupported=%d tx_full=%d} psn{out_of_seq=%d dup=%d}",
		d.Received, d.Forwarded, d.PassedOther, d.DropMalformed, d.DropICRC, d.DropRetired, d.DropUnknown, d.DropAccess, d.DropStrictPSN, d.DropUnsupported, d.DropTxFull, d.OutOfSequence, d.Duplicate)
}

// Stats are the stage's counters: each direction's, and the CAM's.
type Stats struct {
	ToHost, ToNet DirStats
	QPX           qpx.Stats
}

type counters [nCounters]uint64

func (c *counters) dir() DirStats {
	return DirStats{
		Received: c[cReceived], Forwarded: c[cForwarded], PassedOther: c[cPassedOther],
		DropMalformed: c[cDropMalformed], DropICRC: c[cDropICRC], DropRetired: c[cDropRetired],
		DropUnknown: c[cDropUnknown], DropAccess: c[cDropAccess], DropStrictPSN: c[cDropStrictPSN],
		DropUnsupported: c[cDropUnsupported], DropTxFull: c[cDropTxFull], OutOfSequence: c[cOutOfSequence], Duplicate: c[cDuplicate],
	}
}

// Stage is the translation stage (an lcore.Stage).
type Stage struct {
	opts  Options
	cache *mbuf.Cache
	tb    *qpx.Table
	in    []mbuf.Handle
	out   []mbuf.Handle
	drop  []mbuf.Handle
	own   [2]counters // toHost, toNet: the loop's own
	pub   [2][nCounters]atomic.Uint64
	mu    sync.Mutex // guards qpxP
	qpxP  qpx.Stats
	view  wire.RoCEView
	icrc  *wire.ICRCUpdater
	dirty bool
}

const (
	toHost = 0
	toNet  = 1
)

// New validates opts and builds the stage.
func New(opts Options) (*Stage, error) {
	if opts.Name == "" {
		opts.Name = "roce"
	}
	if opts.Net == nil || opts.Host == nil || opts.Pool == nil || opts.Table == nil {
		return nil, errors.New("roce: Options.Net, Host, Pool and Table are required")
	}
	if opts.Burst == 0 {
		opts.Burst = DefaultBurst
	}
	if opts.Burst < 1 || opts.Burst > 256 {
		return nil, fmt.Errorf("roce: Options.Burst %d out of range (use 1..256)", opts.Burst)
	}
	if opts.UDPPort == 0 {
		opts.UDPPort = wire.RoCEv2Port
	}
	if opts.PMTU == 0 {
		opts.PMTU = DefaultPMTU
	}
	if opts.PMTU < 256 || opts.PMTU > 4096 || opts.PMTU&(opts.PMTU-1) != 0 {
		return nil, fmt.Errorf("roce: Options.PMTU %d is not an IBA MTU (use 256, 512, 1024, 2048 or 4096)", opts.PMTU)
	}
	for _, q := range []struct {
		name string
		p    port.Port
		i    int
	}{{"NetQueue", opts.Net, opts.NetQueue}, {"HostQueue", opts.Host, opts.HostQueue}} {
		if n := q.p.Info().Queues; q.i < 0 || q.i >= n {
			return nil, fmt.Errorf("roce: Options.%s %d out of range: port %s has %d queues", q.name, q.i, q.p.Info().Name, n)
		}
	}
	cache := opts.Cache
	if cache == nil {
		cache = opts.Pool.NewCache()
	}
	s := &Stage{opts: opts, cache: cache, tb: opts.Table,
		in: make([]mbuf.Handle, opts.Burst), out: make([]mbuf.Handle, opts.Burst), drop: make([]mbuf.Handle, opts.Burst),
		icrc: wire.NewICRCUpdater(opts.Pool.FrameSize())}
	s.qpxP = s.tb.Stats()
	return s, nil
}

// Name implements lcore.Stage.
func (s *Stage) Name() string { return s.opts.Name }

// Poll moves at most one burst each way.
func (s *Stage) Poll(clock.Time) int {
	n := s.direction(toHost, s.opts.Net, s.opts.NetQueue, s.opts.Host, s.opts.HostQueue)
	n += s.direction(toNet, s.opts.Host, s.opts.HostQueue, s.opts.Net, s.opts.NetQueue)
	if s.dirty {
		s.publish()
	}
	return n
}

func (s *Stage) direction(dir int, in port.Port, inQ int, out port.Port, outQ int) int {
	n := in.RxBurst(inQ, s.in)
	if n == 0 {
		port.FlushTx(out, outQ)
		return 0
	}
	s.dirty = true
	c := &s.own[dir]
	c[cReceived] += uint64(n)
	kept, dropped := s.out[:0], s.drop[:0]
	for _, h := range s.in[:n] {
		if s.process(dir, c, s.opts.Pool.Data(h)) {
			kept = append(kept, h)
		} else {
			dropped = append(dropped, h)
		}
	}
	if len(dropped) > 0 {
		s.cache.Free(dropped)
	}
	if len(kept) == 0 {
		return n
	}
	sent := out.TxBurst(outQ, kept)
	c[cForwarded] += uint64(sent)
	if rest := kept[sent:]; len(rest) > 0 {
		c[cDropTxFull] += uint64(len(rest))
		s.cache.Free(rest)
	}
	return n
}

// ProcessToHost runs the network-to-host step on one frame in place, as
// Poll does for each frame it receives: true means it goes on (rewritten,
// or untouched when not RoCEv2), false that it is dropped and counted.
// Benchmarks and tests measure the stage's work with it, without ports.
// Call it on the stage's goroutine; counters publish at the next Poll or
// Stop.
func (s *Stage) ProcessToHost(frame []byte) bool {
	s.dirty = true
	s.own[toHost][cReceived]++
	if s.process(toHost, &s.own[toHost], frame) {
		s.own[toHost][cForwarded]++
		return true
	}
	return false
}

// ProcessToNet is ProcessToHost for the host-to-network step.
func (s *Stage) ProcessToNet(frame []byte) bool {
	s.dirty = true
	s.own[toNet][cReceived]++
	if s.process(toNet, &s.own[toNet], frame) {
		s.own[toNet][cForwarded]++
		return true
	}
	return false
}

// process checks and rewrites one frame in place; false drops it.
func (s *Stage) process(dir int, c *counters, b []byte) bool {
	v := &s.view
	if err := wire.ParseRoCE(b, s.opts.UDPPort, v); err != nil {
		switch err {
		case wire.ErrNotRoCE:
			c[cPassedOther]++
			return true
		case wire.ErrRoCEUnsupported:
			c[cDropUnsupported]++
			return false
		}
		c[cDropMalformed]++
		return false
	}
	if !v.CheckICRC(b) {
		c[cDropICRC]++
		return false
	}
	var ctx *qpx.Context
	old := binary.BigEndian.Uint64(b[v.BTHOff:])
	if dir == toHost {
		local, ok := s.tb.Translate(v.DestQP)
		if !ok {
			if s.tb.Issued(v.DestQP) {
				c[cDropRetired]++
			} else {
				c[cDropUnknown]++
			}
			return false
		}
		ctx = s.tb.Context(local)
		if need := accessOf(v.Opcode); need != 0 && ctx.Access&need == 0 {
			c[cDropAccess]++
			return false
		}
		if isRequest(v.Opcode) {
			if !s.psn(c, &ctx.ExpectedPSN, v.PSN, s.span(b)) {
				return false
			}
		}
		v.SetDestQP(b, uint32(local))
	} else {
		local := int(v.DestQP)
		if local >= s.tb.Slots() || !s.tb.Live(local) {
			c[cDropUnknown]++
			return false
		}
		ctx = s.tb.Context(local)
		if isRequest(v.Opcode) {
			if !s.psn(c, &ctx.NextPSN, v.PSN, s.span(b)) {
				return false
			}
		}
		v.SetDestQP(b, ctx.DestQPN)
		v.SetPKey(b, ctx.PKey)
	}
	// Only the BTH's P_Key and destination QP changed: patch the ICRC
	// (one table lookup per changed byte) rather than a second pass.
	if !s.icrc.Patch(v, b, old) {
		v.PutICRC(b)
	}
	return true
}

// psn places a request's PSN against the context's expectation *exp,
// counts its order and says whether the packet goes on. A packet that goes
// on in order or ahead moves the expectation past the PSNs it occupies
// (span); one behind leaves it. A packet StrictPSN drops moves nothing:
// had it moved, the resends of the PSNs it skipped would all fall behind
// and, with any check on them, the queue pair could never recover.
func (s *Stage) psn(c *counters, exp *uint32, psn, span uint32) bool {
	switch qpx.ComparePSN(*exp, psn) {
	case qpx.PSNInOrder:
	case qpx.PSNAhead:
		c[cOutOfSequence]++
		if s.opts.StrictPSN {
			c[cDropStrictPSN]++
			return false
		}
	default:
		c[cDuplicate]++
		return true
	}
	*exp = qpx.AddPSN(psn, span)
	return true
}

// span is the PSNs a request occupies: one, or one per response packet of
// an RDMA READ.
func (s *Stage) span(b []byte) uint32 {
	v := &s.view
	if v.Opcode&0x1f != 0x0c || v.Ext&wire.IBExtRDMA == 0 {
		return 1
	}
	r, err := wire.DecodeRETH(b[v.ExtOff+wire.IBExtOffset(v.Ext, wire.IBExtRDMA):])
	if err != nil || r.DMALen == 0 {
		return 1
	}
	return (r.DMALen + uint32(s.opts.PMTU) - 1) / uint32(s.opts.PMTU)
}

// isRequest reports whether opcode is a requester's packet (its PSN in the
// requester's sequence), not a response or a CNP.
func isRequest(op uint8) bool {
	if op == 0x81 {
		return false
	}
	low := op & 0x1f
	return low < 0x0d || low > 0x12
}

// accessOf is the access an opcode needs at the responder.
func accessOf(op uint8) qpx.Access {
	if op>>5 == 3 || op == 0x81 { // UD, CNP
		return 0
	}
	switch low := op & 0x1f; {
	case low >= 0x06 && low <= 0x0b:
		return qpx.AccessRemoteWrite
	case low == 0x0c:
		return qpx.AccessRemoteRead
	case low == 0x13 || low == 0x14:
		return qpx.AccessRemoteAtomic
	}
	return 0
}

func (s *Stage) publish() {
	for d := range s.own {
		for i := range s.own[d] {
			s.pub[d][i].Store(s.own[d][i])
		}
	}
	st := s.tb.Stats()
	s.mu.Lock()
	s.qpxP = st
	s.mu.Unlock()
	s.dirty = false
}

// Stats returns the counters as of the last Poll. Safe from any goroutine.
func (s *Stage) Stats() Stats {
	var c [2]counters
	for d := range c {
		for i := range c[d] {
			c[d][i] = s.pub[d][i].Load()
		}
	}
	s.mu.Lock()
	q := s.qpxP
	s.mu.Unlock()
	return Stats{ToHost: c[toHost].dir(), ToNet: c[toNet].dir(), QPX: q}
}

// Stop implements the lcore stop hook: it flushes both outputs, publishes
// the counters and returns the cache's frames to the pool.
func (s *Stage) Stop(clock.Time) {
	port.FlushTx(s.opts.Host, s.opts.HostQueue)
	port.FlushTx(s.opts.Net, s.opts.NetQueue)
	s.publish()
	s.cache.Flush()
}
