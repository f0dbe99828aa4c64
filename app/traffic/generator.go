package traffic

import (
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/core/wire"
)

// GeneratorOptions configures a Generator.
type GeneratorOptions struct {
	Port  port.Port
	Queue int
	Pool  *mbuf.Pool
	Burst int   // frames per TxBurst, 1..256 (0 → 32)
	Sizes Sizes // frame lengths (zero value → 60 bytes)
	Flows int   // number of flows (UDP source ports), 1..65535 (0 → 1)
	// Rate limits the generator to this many frames per second; 0 sends as
	// fast as the port accepts.
	Rate float64
	// Count stops the generator after this many frames; 0 means no limit.
	Count uint64
	// SrcMAC/DstMAC default to locally administered 02:00:00:00:00:01/02.
	SrcMAC, DstMAC net.HardwareAddr
	// Addressing sets the IP addresses (v4 or v6), UDP ports and VLAN,
	// with ranges (nil: the defaults).
	Addressing *Addressing
	// Cache is the poll loop's mbuf cache to allocate from; nil makes one.
	// Sharing the loop's cache with its ports keeps frames on one CPU's
	// LIFO stack (see fwd.Options.Cache).
	Cache *mbuf.Cache
}

// Generator is a stage that sends stamped frames on one port queue.
type Generator struct {
	opts     GeneratorOptions
	cache    *mbuf.Cache
	hdr      wire.FrameTemplate
	walk     walker
	l2       int  // 14, or 18 with a VLAN tag
	v6       bool // the template is IPv6
	vlan     uint16
	hdrLen   int // up to the UDP payload, where the stamp goes
	srcPort  int // flow 0's
	flowSeq  []uint64
	flow     int
	sizeIdx  int
	burst    []mbuf.Handle
	pending  []mbuf.Handle // refused by the port; sent first next time
	stopped  atomic.Bool
	done     atomic.Bool
	lastPoll clock.Time
	credit   float64

	sent      atomic.Uint64
	bytes     atomic.Uint64
	noBuf     atomic.Uint64
	sentLocal uint64
}

// NewGenerator validates opts and builds a generator.
func NewGenerator(opts GeneratorOptions) (*Generator, error) {
	if err := checkEndpoint("generator", opts.Port, opts.Pool, opts.Queue, &opts.Burst, &opts.Flows); err != nil {
		return nil, err
	}
	if opts.Rate < 0 {
		return nil, fmt.Errorf("traffic: rate %g must be >= 0 (0 = as fast as possible)", opts.Rate)
	}
	if opts.Sizes.pattern == nil {
		opts.Sizes = FixedSize(MinFrame)
	}
	var addr Addressing
	if opts.Addressing != nil {
		addr = *opts.Addressing
	}
	if err := addr.check(); err != nil {
		return nil, fmt.Errorf("traffic: %w", err)
	}
	room := opts.Pool.FrameSize() - opts.Pool.Headroom()
	if opts.Sizes.Max() > room {
		return nil, fmt.Errorf("traffic: frame size %d exceeds the pool's room of %d bytes per frame (frame size %d - headroom %d)",
			opts.Sizes.Max(), room, opts.Pool.FrameSize(), opts.Pool.Headroom())
	}
	g := &Generator{
		opts:    opts,
		cache:   cacheOr(opts.Cache, opts.Pool),
		flowSeq: make([]uint64, opts.Flows),
		burst:   make([]mbuf.Handle, opts.Burst),
		pending: make([]mbuf.Handle, 0, opts.Burst),
	}
	t := addr.addrs(macOr(opts.SrcMAC, [6]byte{0x02, 0, 0, 0, 0, 1}), macOr(opts.DstMAC, [6]byte{0x02, 0, 0, 0, 0, 2}))
	hdr, err := wire.NewFrameTemplate(&t)
	if err != nil {
		return nil, fmt.Errorf("traffic: %w", err)
	}
	g.hdr, g.v6, g.vlan, g.walk = hdr, t.IPv6(), addr.VLAN, newWalker(&addr, &t)
	g.srcPort = BaseSrcPort
	if addr.SrcPort != 0 {
		g.srcPort = int(addr.SrcPort)
	}
	if g.srcPort+opts.Flows-1 > 65535 {
		return nil, fmt.Errorf("traffic: source ports %d.. for %d flows run past 65535", g.srcPort, opts.Flows)
	}
	g.l2 = ethLen
	if g.vlan != 0 {
		g.l2 += 4
	}
	g.hdrLen = g.l2 + ipv4Len + udpLen
	if g.v6 {
		g.hdrLen = g.l2 + wire.IPv6HeaderLen + udpLen
	}
	if min := addr.MinFrame(); opts.Sizes.Min() < min {
		return nil, fmt.Errorf("traffic: frame size %d is too small for these headers and the stamp: use %d or more", opts.Sizes.Min(), min)
	}
	return g, nil
}

func macOr(m net.HardwareAddr, def [6]byte) [6]byte {
	if len(m) == 6 {
		return [6]byte(m)
	}
	return def
}

// Name implements lcore.Stage.
func (g *Generator) Name() string { return "gen" }

// Poll sends at most one burst. Frames refused by the port are retried
// before new ones are built, so backpressure slows the generator rather than
// losing frames.
func (g *Generator) Poll(now clock.Time) int {
	if len(g.pending) > 0 {
		n := g.send(g.pending, g.lengths(g.pending))
		g.pending = g.pending[:copy(g.pending, g.pending[n:])]
		if len(g.pending) > 0 {
			return n
		}
	}
	if g.stopped.Load() || (g.opts.Count > 0 && g.sentLocal >= g.opts.Count) {
		if !g.done.Load() {
			// The last full bursts may be held by the port (port.TxFlusher).
			port.FlushTx(g.opts.Port, g.opts.Queue)
			g.done.Store(true)
		}
		return 0
	}
	want := g.opts.Burst
	if g.opts.Count > 0 {
		want = int(min(uint64(want), g.opts.Count-g.sentLocal))
	}
	if g.opts.Rate > 0 {
		want = g.allowance(now, want)
		if want == 0 {
			port.FlushTx(g.opts.Port, g.opts.Queue)
			return 0
		}
	}
	bufs := g.burst[:want]
	n := g.cache.AllocBurst(bufs)
	if n < want {
		g.noBuf.Add(1)
	}
	bufs = bufs[:n]
	var total uint64
	for _, h := range bufs {
		total += uint64(g.build(h, now))
	}
	sent := g.send(bufs, total)
	g.pending = append(g.pending, bufs[sent:]...)
	return n
}

// lengths sums the frames' lengths.
func (g *Generator) lengths(bufs []mbuf.Handle) uint64 {
	var total uint64
	for _, h := range bufs {
		total += uint64(g.opts.Pool.Meta(h).DataLen)
	}
	return total
}

// send transmits bufs, whose lengths sum to total, and counts what the port
// took. The total comes from before TxBurst: once the port owns a frame its
// metadata is not ours to read.
func (g *Generator) send(bufs []mbuf.Handle, total uint64) int {
	n := g.opts.Port.TxBurst(g.opts.Queue, bufs)
	if n == 0 {
		return 0
	}
	for _, h := range bufs[n:] {
		total -= uint64(g.opts.Pool.Meta(h).DataLen)
	}
	g.sentLocal += uint64(n)
	g.sent.Add(uint64(n))
	g.bytes.Add(total)
	return n
}

// rateCatchUp is how far behind its rate a rate-limited generator may fall
// and still catch up.
const rateCatchUp = time.Millisecond

func (g *Generator) allowance(now clock.Time, want int) int {
	if g.lastPoll == 0 {
		g.lastPoll = now
		g.credit = float64(want)
	}
	g.credit += g.opts.Rate * now.Sub(g.lastPoll).Seconds()
	g.lastPoll = now
	// The bucket holds rateCatchUp's frames (at least a burst): a poll that
	// comes late — the loop's other work, an interrupt — is made up by the
	// next polls, each still at most one burst, so near the port's pace
	// the generator keeps its rate instead of losing every late poll's
	// excess; a longer idle spell still does not turn into a spike.
	g.credit = min(g.credit, max(float64(g.opts.Burst), g.opts.Rate*rateCatchUp.Seconds()))
	n := int(g.credit)
	g.credit -= float64(min(n, want))
	return min(n, want)
}

// build writes the next frame into h and returns its length.
func (g *Generator) build(h mbuf.Handle, now clock.Time) int {
	size := int(g.opts.Sizes.pattern[g.sizeIdx])
	g.sizeIdx++
	if g.sizeIdx == len(g.opts.Sizes.pattern) {
		g.sizeIdx = 0
	}
	frame := g.opts.Pool.Append(h, size)
	flow := g.flow
	g.flow++
	if g.flow == g.opts.Flows {
		g.flow = 0
	}
	if g.hdrLen == HeaderLen {
		writeStamp(frame, g.flowSeq[flow], int64(now))
		g.hdr.PutUDP(frame, uint16(g.srcPort+flow))
		if g.walk.on {
			g.walk.apply(frame, ethLen, false)
		}
	} else {
		writeStampAt(frame, g.hdrLen, g.flowSeq[flow], int64(now))
		// The template writes an untagged frame; a tag goes in front of
		// its EtherType afterwards.
		l2 := frame[g.l2-ethLen:]
		g.hdr.PutUDP(l2, uint16(g.srcPort+flow))
		if g.walk.on {
			g.walk.apply(l2, ethLen, g.v6)
		}
		if g.vlan != 0 {
			tagVLAN(frame, g.vlan)
		}
	}
	g.flowSeq[flow]++
	g.opts.Pool.Meta(h).FlowHash = uint32(flow)
	return size
}

// StopSending makes the generator stop building new frames; frames already
// refused by the port are still retried. Safe from any goroutine.
func (g *Generator) StopSending() { g.stopped.Store(true) }

// Done reports whether the generator has finished: stopped (or its Count
// reached) with every frame handed to the port. Safe from any goroutine.
func (g *Generator) Done() bool { return g.done.Load() }

// Stop implements the lcore stop hook: frames still pending are freed and
// the cache is returned to the pool.
func (g *Generator) Stop(clock.Time) {
	port.FlushTx(g.opts.Port, g.opts.Queue)
	g.cache.Free(g.pending)
	g.pending = g.pending[:0]
	g.cache.Flush()
}

// GeneratorStats are the generator's counters.
type GeneratorStats struct {
	Sent, Bytes, NoBuf uint64
}

// Stats is safe to call from any goroutine.
func (g *Generator) Stats() GeneratorStats {
	return GeneratorStats{Sent: g.sent.Load(), Bytes: g.bytes.Load(), NoBuf: g.noBuf.Load()}
}

// ensure Generator satisfies the stage shape without importing lcore.
var _ interface {
	Name() string
	Poll(clock.Time) int
} = (*Generator)(nil)

// checkEndpoint validates what generator and sink options share, filling
// in the defaults for burst (32) and flows (1).
func checkEndpoint(who string, p port.Port, pool *mbuf.Pool, queue int, burst, flows *int) error {
	if p == nil || pool == nil {
		return fmt.Errorf("traffic: %s needs Port and Pool", who)
	}
	if *burst == 0 {
		*burst = 32
	}
	if *burst < 1 || *burst > 256 {
		return fmt.Errorf("traffic: burst %d out of range: use 1..256", *burst)
	}
	if *flows == 0 {
		*flows = 1
	}
	if *flows < 1 || *flows > 65535-BaseSrcPort {
		return fmt.Errorf("traffic: flows %d out of range: use 1..%d", *flows, 65535-BaseSrcPort)
	}
	if queue < 0 || queue >= p.Info().Queues {
		return fmt.Errorf("traffic: queue %d out of range: port %s has %d queues", queue, p.Info().Name, p.Info().Queues)
	}
	return nil
}

// cacheOr returns c, or a new cache of pool when c is nil.
func cacheOr(c *mbuf.Cache, pool *mbuf.Pool) *mbuf.Cache {
	if c != nil {
		return c
	}
	return pool.NewCache()
}
