package sim

import (
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/pmd/mem"
)

// ScaleCosts is the per-packet CPU cost model of the scaling study, in
// nanoseconds of one core.
type ScaleCosts struct {
	// PacketNs is what the transport spends on one packet it owns: the
	// receive path (parse, CID lookup, window update, ACK generation).
	PacketNs float64
	// PortNs is a port's share: moving the handle through the queue.
	PortNs float64
	// PoolNs is taking a frame from a per-core pool cache and returning it.
	PoolNs float64
	// RingNs is one handle through an SPSC ring between two cores
	// (enqueue plus dequeue), the price of a software hand-off.
	RingNs float64
	// LineNs is one cache line moving between two cores' caches: paid by a
	// write to a line another core wrote last, and by the owner of a
	// handed-off packet reading the header the receiving core wrote.
	LineNs float64
	// IdlePollNs is an empty poll of a queue and a hand-off ring.
	IdlePollNs float64
	// Jitter spreads each packet's cost uniformly by ±Jitter (0.1 = 10 %).
	Jitter float64
}

// MeasuredCosts are the costs measured on this project's reference machine
// (2.596 GHz EPYC), as bench/RESULTS.md records them:
//   - PacketNs 73.3: transport-core, "transport RX path, ns/packet", the
//     median of the three 2026-11-25 runs (131.5, 73.3, 67.1).
//   - PortNs 2.56: foundation 2026-11-21, mem-port io forwarding at
//     390.92 Mpps on one core.
//   - PoolNs 0.41: foundation, pool get+put per handle, bulk 32.
//   - RingNs 2.27: foundation, SP/SC bulk-32 ring between two cores,
//     5.90 cycles per handle (enqueue 2.97 + dequeue 2.94).
//   - LineNs 35.7: the two-core SP/SC bulk-32 ring against the same ring
//     on one core (4.3 and 1.4 cycles per handle, the machine's own
//     rte_ring baseline): 2.9 cycles × 32 handles = 93 cycles a burst for
//     the slot and index lines to change core. An estimate of a line
//     transfer, not a measurement of one.
//   - IdlePollNs 20 and Jitter 0.1 are assumptions; neither moves a
//     saturated curve.
func MeasuredCosts() ScaleCosts {
	return ScaleCosts{PacketNs: 73.3, PortNs: 2.56, PoolNs: 0.41, RingNs: 2.27, LineNs: 35.7, IdlePollNs: 20, Jitter: 0.1}
}

// ScaleSteering is how a packet reaches the shard that owns its
// connection.
type ScaleSteering int

const (
	// SteerToShard: every packet arrives on its shard's queue (an XDP
	// program redirecting by destination CID, or a UDP source port chosen
	// so the NIC's RSS lands on the shard's queue). No hand-off.
	SteerToShard ScaleSteering = iota
	// SteerRSSHandOff: source ports are random, the NIC's RSS picks the
	// queue, and a packet that lands on another shard's queue is handed
	// over in software through an SPSC ring.
	SteerRSSHandOff
)

// ScaleScenario is one configuration of the study.
type ScaleScenario struct {
	Name     string
	Costs    ScaleCosts
	Steering ScaleSteering
	// SharedLine: every packet writes one cache line shared by all shards
	// (a global counter, a connection table's shared head).
	SharedLine bool
	// SharedPool: the pool has no per-core cache; each burst takes and
	// returns its frames through one shared free list (one line per burst).
	SharedPool bool
	// LinkGbps is the port's line rate; 0 is a link that never limits.
	LinkGbps float64
	// Payload is the bytes of payload per packet (the pushes' size).
	Payload int
	// Connections are spread over the shards round robin at setup.
	Connections int
	// Duration is the virtual time simulated.
	Duration time.Duration
	Seed     uint64
}

// ScaleResult is one run.
type ScaleResult struct {
	Shards int
	// Packets is how many packets their owning shard finished.
	Packets uint64
	// HandedOff is how many went through a software hand-off ring.
	HandedOff uint64
	Mpps      float64
	// LinkMpps is the link's packet rate (0: unlimited).
	LinkMpps float64
}

// burst is what one poll takes, as DPDK's default burst.
const scaleBurst = 32

// WireBytes is what one packet of payload bytes occupies on an Ethernet
// link: the transport's IPv4/UDP headers, FCS, preamble and gap.
func WireBytes(payload int) int {
	return wire.EthHeaderLen + wire.IPv4HeaderLen + wire.UDPHeaderLen + wire.BaseHeaderLen + payload + 4 + 20
}

type scaleItem struct {
	flow  int32
	ready int64 // ps: when the handing core finished with it
}

type scaleCore struct {
	t      int64 // ps
	queue  []int32
	ring   []scaleItem // hand-offs waiting for this core
	fromQ  int         // how many of the current burst came from the NIC queue
	burst  []scaleItem // the current burst, processed one packet per step
	taken  uint64      // packets taken from this core's NIC queue
	rate   float64     // arrivals to this queue, packets per ps
	owned  uint64
	handed uint64
}

// RunScale simulates sc with shards poll loops, one per core and one NIC
// queue each, on a virtual clock, one packet at a time in time order
// (always the core whose clock is earliest), so shared lines bounce
// between cores as they would. Every input is drawn from sc.Seed.
func RunScale(sc ScaleScenario, shards int) ScaleResult {
	rng := rand.New(rand.NewPCG(sc.Seed, uint64(shards)))
	clk := clock.NewVirtual(0)
	const ps = 1000.0
	c := sc.Costs
	base := (c.PacketNs + c.PortNs + c.PoolNs) * ps
	cost := func() int64 { return int64(base * (1 + c.Jitter*(2*rng.Float64()-1))) }

	// Connection i is set up on shard i mod shards; its CID's high bits
	// name the shard. Its packets' UDP source port is chosen so RSS lands
	// on that shard's queue (the eRPC choice), or at random.
	cores := make([]scaleCore, shards)
	owner := make([]int, sc.Connections)
	frame := udpFrameForRSS()
	for i := range sc.Connections {
		owner[i] = i % shards
		q := owner[i]
		if sc.Steering == SteerRSSHandOff {
			binary.BigEndian.PutUint16(frame[34:], uint16(1024+rng.IntN(64512)))
			q = mem.RSSQueue(mem.RSSHash(frame), shards)
		}
		cores[q].queue = append(cores[q].queue, int32(i))
	}
	res := ScaleResult{Shards: shards}
	var linkPerPs float64 // packets per ps over the whole link; 0 unlimited
	if sc.LinkGbps > 0 {
		linkPerPs = sc.LinkGbps * 1e9 / 8 / float64(WireBytes(sc.Payload)) / 1e12
		res.LinkMpps = linkPerPs * 1e6
	}
	for q := range cores {
		cores[q].rate = linkPerPs * float64(len(cores[q].queue)) / float64(sc.Connections)
	}
	end := sc.Duration.Nanoseconds() * 1000
	var lineFree, poolFree int64
	lineLast, poolLast := -1, -1
	// bounce charges a write to a line shared by all cores at time t on
	// core i: free of charge when i wrote it last, else it waits for the
	// line and holds it for a transfer.
	bounce := func(free *int64, last *int, i int, t int64) int64 {
		if *last == i {
			return t
		}
		t = max(t, *free) + int64(c.LineNs*ps)
		*free, *last = t, i
		return t
	}
	for {
		i := 0
		for j := range cores {
			if cores[j].t < cores[i].t {
				i = j
			}
		}
		k := &cores[i]
		if k.t >= end {
			break
		}
		// The shared clock follows the earliest core: every event is
		// taken in time order.
		_ = clk.Set(clock.Time(k.t / 1000))
		if len(k.burst) == 0 {
			k.poll(sc, rng, linkPerPs)
			if len(k.burst) == 0 {
				k.t += int64(c.IdlePollNs * ps)
				continue
			}
			if sc.SharedPool {
				k.t = bounce(&poolFree, &poolLast, i, k.t)
			}
		}
		it := k.burst[0]
		k.burst = k.burst[1:]
		fromQueue := k.fromQ > 0
		if fromQueue {
			k.fromQ--
		}
		if o := owner[it.flow]; o != i && fromQueue {
			// Not ours: hand it to its owner, which finds the header
			// in this core's cache.
			k.t += int64(c.RingNs / 2 * ps)
			cores[o].ring = append(cores[o].ring, scaleItem{flow: it.flow, ready: k.t})
			k.handed++
			continue
		}
		k.t += cost()
		if !fromQueue {
			k.t += int64((c.RingNs/2 + c.LineNs) * ps)
		}
		if sc.SharedLine {
			k.t = bounce(&lineFree, &lineLast, i, k.t)
		}
		if k.t <= end {
			k.owned++
		}
	}
	for _, k := range cores {
		res.Packets += k.owned
		res.HandedOff += k.handed
	}
	res.Mpps = float64(res.Packets) / (float64(end) / 1e6)
	return res
}

// poll fills the burst: the hand-offs that are ready first (they have
// waited longest), then up to a burst from the NIC queue, as many as the
// link has delivered to it by now.
func (k *scaleCore) poll(sc ScaleScenario, rng *rand.Rand, linkPerPs float64) {
	k.burst = k.burst[:0]
	n := 0
	for n < len(k.ring) && n < scaleBurst && k.ring[n].ready <= k.t {
		n++
	}
	k.burst = append(k.burst, k.ring[:n]...)
	k.ring = k.ring[n:]
	room := scaleBurst - n
	if len(k.queue) == 0 || room == 0 {
		k.fromQ = 0
		k.rotate()
		return
	}
	take := room
	if linkPerPs > 0 {
		arrived := uint64(float64(k.t) * k.rate)
		take = min(room, int(arrived-min(arrived, k.taken)))
	}
	for range take {
		k.burst = append(k.burst, scaleItem{flow: k.queue[rng.IntN(len(k.queue))]})
	}
	k.taken += uint64(take)
	k.fromQ = take
	k.rotate()
}

// rotate puts the NIC-queue packets first, so fromQ counts from the front.
func (k *scaleCore) rotate() {
	if k.fromQ == 0 || len(k.burst) == k.fromQ {
		return
	}
	handed := len(k.burst) - k.fromQ
	k.burst = append(k.burst[handed:], k.burst[:handed]...)
}

// udpFrameForRSS is the IPv4/UDP frame whose source port the study varies:
// 198.18.0.1 → 198.18.0.2, destination port 4791.
func udpFrameForRSS() []byte {
	f := make([]byte, 42)
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	f[14], f[22], f[23] = 0x45, 64, 17
	copy(f[26:], []byte{198, 18, 0, 1, 198, 18, 0, 2})
	binary.BigEndian.PutUint16(f[36:], 4791)
	return f
}

// ScaleShards are the shard counts of the study.
var ScaleShards = []int{1, 2, 4, 8, 16}

// ScaleStudy returns the study's scenarios, all from seed: the design
// (share-nothing, steered to the shard, a 400 Gbit/s port that does not
// bind) and one scenario per thing that bends the curve.
func ScaleStudy(seed uint64) []ScaleScenario {
	d := ScaleScenario{Costs: MeasuredCosts(), Payload: 64, Connections: 4096, Duration: time.Millisecond, Seed: seed, LinkGbps: 400}
	at := func(name string, f func(*ScaleScenario)) ScaleScenario {
		s := d
		s.Name = name
		f(&s)
		return s
	}
	return []ScaleScenario{
		at("share-nothing, steered to the shard, 400G", func(*ScaleScenario) {}),
		at("share-nothing, steered, 100G port", func(s *ScaleScenario) { s.LinkGbps = 100 }),
		at("RSS on random ports, software hand-off", func(s *ScaleScenario) { s.Steering = SteerRSSHandOff }),
		at("shared pool free list (a line per burst)", func(s *ScaleScenario) { s.SharedPool = true }),
		at("a shared cache line per packet", func(s *ScaleScenario) { s.SharedLine = true }),
	}
}

// WriteScaleStudy runs every scenario at 1, 2, 4, 8 and 16 shards, writes a
// table and the model's assumptions to w, and returns sim_16shards_vs_1 of
// the design scenario (the first).
func WriteScaleStudy(w io.Writer, seed uint64) float64 {
	c := MeasuredCosts()
	fmt.Fprintf(w, "# scaling study on the virtual clock, seed %d: 64 B pushes (%d B on the wire), 4096 connections set up round robin, 1 ms per run, bursts of %d\n", seed, WireBytes(64), scaleBurst)
	fmt.Fprintf(w, "# per packet a shard spends %.1f ns (transport RX path %.1f + port %.2f + pool %.2f, ±%.0f %%); a hand-off %.2f ns of SPSC ring plus a %.1f ns line transfer at the owner; a shared line costs one %.1f ns transfer whenever another core wrote it last\n",
		c.PacketNs+c.PortNs+c.PoolNs, c.PacketNs, c.PortNs, c.PoolNs, c.Jitter*100, c.RingNs, c.LineNs, c.LineNs)
	fmt.Fprintf(w, "# costs from bench/RESULTS.md (transport-core RX path median 2026-11-25; foundation io forwarding, pool, two-core ring) and the line transfer estimated from the machine's rte_ring two-core vs one-core figures; see sim.MeasuredCosts\n")
	fmt.Fprintf(w, "%-44s", "scenario \\ shards (Mpps, ×1)")
	for _, s := range ScaleShards {
		fmt.Fprintf(w, " %16d", s)
	}
	fmt.Fprintln(w)
	var headline float64
	for i, sc := range ScaleStudy(seed) {
		fmt.Fprintf(w, "%-44s", sc.Name)
		var one float64
		var handed uint64
		var link float64
		for _, s := range ScaleShards {
			r := RunScale(sc, s)
			if s == 1 {
				one = r.Mpps
			}
			handed, link = r.HandedOff, r.LinkMpps
			fmt.Fprintf(w, " %7.1f (%5.2fx)", r.Mpps, r.Mpps/one)
			if i == 0 && s == ScaleShards[len(ScaleShards)-1] {
				headline = r.Mpps / one
			}
		}
		if handed > 0 {
			fmt.Fprintf(w, "  [16 shards: %d handed off]", handed)
		}
		if link > 0 && i == 1 {
			fmt.Fprintf(w, "  [link %.1f Mpps]", link)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "RATIO sim_16shards_vs_1 %.3f  # share-nothing, steered to the shard, 400 Gbit/s port\n", headline)
	return headline
}
