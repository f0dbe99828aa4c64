package fabric

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
)

// drawBits is the width of the uniform draws probabilities are compared
// with: a Percent p becomes the threshold p/100 * 2^53, and an event
// happens when a draw of 53 random bits falls below it (so 100 % always
// happens and 0 % never does).
const drawBits = 53

func threshold(p Percent) uint64 {
	return uint64(math.Round(float64(p) / 100 * (1 << drawBits)))
}

func hit(r *rand.Rand, threshold uint64) bool { return r.Uint64()>>(64-drawBits) < threshold }

// Random streams of a direction. Each impairment draws from its own stream,
// so switching one impairment on or off does not change which frames
// another picks (as long as the frames it sees are the same).
const (
	streamLoss = iota
	streamBurst
	streamDup
	streamCorrupt
	streamReorder
	streamJitter
	streamSpray
	numStreams
)

// normalJitterTries bounds the redraws of a normal jitter that fell outside
// [0, Jitter]; the last one is clamped. Each draw lands inside with
// probability 0.954, so the clamp is practically never reached.
const normalJitterTries = 16

// direction forwards one way, from in to out, applying one Profile. It is
// driven by the fabric's Poll goroutine only, except for its published
// counters.
type direction struct {
	in, out   port.Port
	inQ, outQ int
	pool      *mbuf.Pool
	cache     *mbuf.Cache
	classify  func(frame []byte) (flowHash uint32, inOrder bool)

	// The profile, compiled.
	loss, dup, reorder, corrupt uint64 // thresholds, see hit
	burst                       bool
	burstP, burstR              uint64
	burstBad, burstGood         uint64
	corruptFrom                 int
	hops                        uint8 // TTL decrement, 0 for none
	reorderDelay                clock.Time
	jitter                      int64
	normalJitter                bool
	fifo                        bool
	pathDelay                   []clock.Time
	paths                       int
	spray                       Spray
	rate                        uint64 // bit/s, 0 = unlimited
	overhead                    int
	queuePackets                int
	maxBacklog                  clock.Time // byte-bounded queue: most serialisation time waiting

	rng [numStreams]*rand.Rand

	// down: the link is down; every frame taken in (LinkDown), and every
	// frame due to leave (LinkCut), is dropped.
	down bool

	// State.
	inBadState bool
	linkFree   clock.Time // when the rate limiter's link finishes its last frame
	linkRem    uint64     // sub-nanosecond remainder of linkFree, in units of 1/rate ns
	departures []clock.Time
	depHead    int
	depLen     int
	nextPath   int
	watermark  []clock.Time // per path: latest release so far (OrderFIFO)
	seq        uint64
	line       *delayLine

	// Each path's own link (Profile.PathRate …), when any is set.
	pathShaped bool
	pathLossOn bool
	pathRate   []uint64
	pathLoss   []uint64 // thresholds
	pathQueue  []int
	pathFree   []clock.Time // when the path's link finishes its last frame
	pathRem    []uint64     // sub-nanosecond remainders, in units of 1/rate ns
	pathDeps   [][]clock.Time
	pathDepH   []int
	pathDepN   []int
	pathRng    *rand.Rand // path loss: its own stream, so the others draw as before
	// pathDown: the paths that are down (Profile.PathDown, SetPathDown),
	// MaxPaths of them so that no change reallocates; anyPathDown says
	// whether any is.
	pathDown    []bool
	anyPathDown bool

	rx, tx, pending, drops []mbuf.Handle
	dupBuf                 [1]mbuf.Handle

	counters
}

func newDirection(p Profile, seed uint64, dir int, burst int) *direction {
	d := &direction{
		rx:       make([]mbuf.Handle, burst),
		tx:       make([]mbuf.Handle, burst),
		pending:  make([]mbuf.Handle, 0, burst),
		drops:    make([]mbuf.Handle, 0, 2*burst), // a burst and its copies
		pathDown: make([]bool, MaxPaths),
	}
	d.counters.init()
	d.apply(p)
	for s := range d.rng {
		// Spread the seed over the 128-bit PCG state, differently for every
		// direction and stream.
		k := uint64(dir*numStreams+s+1) * flowHashSeed
		d.rng[s] = rand.New(rand.NewPCG(mix(seed^k), mix(seed+k+flowHashSeed)))
	}
	k := uint64(dir+1) * flowHashFinal1
	d.pathRng = rand.New(rand.NewPCG(mix(seed^k), mix(seed+k+flowHashFinal2)))
	return d
}

// apply compiles p into the direction. At construction it allocates the
// delay line and the rate limiter's ring; at run time (Fabric.SetProfile)
// it keeps every held frame at the release time it already has, keeps the
// random streams where they are, and reallocates only what p resizes (the
// delay line for a new Limit, the departure ring for a new queue). It is
// called between Polls, never per frame.
func (d *direction) apply(p Profile) {
	paths := p.paths()
	d.loss, d.dup, d.reorder, d.corrupt = threshold(p.Loss), threshold(p.Dup), threshold(p.Reorder), threshold(p.Corrupt)
	d.burst = p.Burst.Enabled()
	d.burstP, d.burstR = threshold(p.Burst.P), threshold(p.Burst.R)
	d.burstBad, d.burstGood = threshold(p.Burst.BadLoss), threshold(p.Burst.GoodLoss)
	if !d.burst {
		d.inBadState = false
	}
	d.corruptFrom = ethHeaderLen
	if p.CorruptL2 {
		d.corruptFrom = 0
	}
	d.hops = uint8(p.Hops)
	d.reorderDelay = clock.Time(p.ReorderDelay)
	d.jitter = int64(p.Jitter)
	d.normalJitter = p.Dist == DistNormal
	d.fifo = p.Order == OrderFIFO
	d.spray = p.Spray
	if paths != d.paths {
		// Paths keep their FIFO watermarks; new ones start empty.
		wm := make([]clock.Time, paths)
		copy(wm, d.watermark)
		d.watermark = wm
		d.pathDelay = make([]clock.Time, paths)
		d.paths = paths
		d.nextPath = 0
		d.notePaths(paths)
	}
	for i := range d.pathDelay {
		d.pathDelay[i] = clock.Time(p.Delay + p.Spread*time.Duration(i) + pathAt(p.PathDelay, i))
	}
	d.applyPaths(p)
	if d.line == nil {
		d.line = newDelayLine(p.limit())
	} else if p.limit() != d.line.limit {
		d.line = d.line.resize(p.limit())
	}
	d.applyRate(p)
}

// applyPaths sets up each path's own link and loss. A path keeps its link
// time and the frames it has serialised when its rate or queue changes.
func (d *direction) applyPaths(p Profile) {
	paths := p.paths()
	d.pathShaped = len(p.PathRate) > 0
	d.pathLossOn = false
	if len(d.pathRate) < paths {
		grow := func(n int) {
			d.pathRate = append(d.pathRate, make([]uint64, n)...)
			d.pathLoss = append(d.pathLoss, make([]uint64, n)...)
			d.pathQueue = append(d.pathQueue, make([]int, n)...)
			d.pathFree = append(d.pathFree, make([]clock.Time, n)...)
			d.pathRem = append(d.pathRem, make([]uint64, n)...)
			d.pathDeps = append(d.pathDeps, make([][]clock.Time, n)...)
			d.pathDepH = append(d.pathDepH, make([]int, n)...)
			d.pathDepN = append(d.pathDepN, make([]int, n)...)
		}
		grow(paths - len(d.pathRate))
	}
	clear(d.pathDown)
	for _, k := range p.PathDown {
		d.pathDown[k] = true
	}
	d.notePathDown()
	for i := range paths {
		d.pathLoss[i] = threshold(pathAt(p.PathLoss, i))
		if d.pathLoss[i] != 0 {
			d.pathLossOn = true
		}
		d.pathRate[i] = pathAt(p.PathRate, i)
		q := pathAt(p.PathQueue, i)
		if q == 0 {
			q = DefaultQueue
		}
		if d.pathRate[i] == 0 {
			q = 0
		}
		d.pathQueue[i] = q
		if len(d.pathDeps[i]) != q {
			deps := make([]clock.Time, q)
			n := min(d.pathDepN[i], q)
			for k := range n {
				deps[k] = d.pathDeps[i][(d.pathDepH[i]+k)%len(d.pathDeps[i])]
			}
			d.pathDeps[i], d.pathDepH[i], d.pathDepN[i] = deps, 0, n
		}
	}
}

// notePathDown recomputes anyPathDown.
func (d *direction) notePathDown() {
	d.anyPathDown = false
	for _, down := range d.pathDown {
		d.anyPathDown = d.anyPathDown || down
	}
}

// pathLink runs a frame of n bytes that reaches path's own link at
// arrival through it: it returns when the link finishes it, or false when
// the path's queue is full.
func (d *direction) pathLink(path, n int, arrival clock.Time) (clock.Time, bool) {
	rate := d.pathRate[path]
	if rate == 0 {
		return arrival, true
	}
	deps := d.pathDeps[path]
	head, count := d.pathDepH[path], d.pathDepN[path]
	for count > 0 && deps[head] <= arrival {
		if head++; head == len(deps) {
			head = 0
		}
		count--
	}
	if count >= len(deps) {
		d.pathDepH[path], d.pathDepN[path] = head, count
		return 0, false
	}
	if d.pathFree[path] < arrival {
		d.pathFree[path], d.pathRem[path] = arrival, 0
	}
	num := uint64(n+d.overhead)*8*1e9 + d.pathRem[path]
	d.pathFree[path] += clock.Time(num / rate)
	d.pathRem[path] = num % rate
	tail := head + count
	if tail >= len(deps) {
		tail -= len(deps)
	}
	deps[tail] = d.pathFree[path]
	count++
	d.pathDepH[path], d.pathDepN[path] = head, count
	if uint64(count) > d.ownPathX[pPeak][path] {
		d.ownPathX[pPeak][path] = uint64(count)
	}
	return d.pathFree[path], true
}

// adaptivePath returns the path whose own link frees earliest for a frame
// arriving at arrival, starting
// the search at nextPath so that ties go round robin.
func (d *direction) adaptivePath(arrival clock.Time) int {
	best := d.nextPath
	bestFree := max(d.pathFree[best], arrival)
	for k := 1; k < d.paths; k++ {
		i := d.nextPath + k
		if i >= d.paths {
			i -= d.paths
		}
		if f := max(d.pathFree[i], arrival); f < bestFree {
			best, bestFree = i, f
		}
	}
	if d.nextPath++; d.nextPath == d.paths {
		d.nextPath = 0
	}
	return best
}

// applyRate sets the rate limiter up for p. Frames already serialised keep
// their departure times; a smaller queue keeps the earliest of them.
func (d *direction) applyRate(p Profile) {
	d.rate, d.overhead = p.Rate, p.Overhead
	d.queuePackets, d.maxBacklog = 0, 0
	if p.Rate == 0 {
		d.departures, d.depHead, d.depLen = nil, 0, 0
		d.linkFree, d.linkRem = 0, 0
		return
	}
	switch {
	case p.QueueBytes > 0:
		d.maxBacklog = clock.Time(uint64(p.QueueBytes) * 8 * 1e9 / p.Rate)
	case p.QueuePackets > 0:
		d.queuePackets = p.QueuePackets
	default:
		d.queuePackets = DefaultQueue
	}
	if d.queuePackets == 0 {
		d.departures, d.depHead, d.depLen = nil, 0, 0
		return
	}
	if len(d.departures) == d.queuePackets {
		return
	}
	deps := make([]clock.Time, d.queuePackets)
	n := min(d.depLen, len(deps))
	for i := range n {
		deps[i] = d.departures[(d.depHead+i)%len(d.departures)]
	}
	d.departures, d.depHead, d.depLen = deps, 0, n
}

// poll receives one burst, runs it through the impairments, and releases
// up to one burst of due frames.
func (d *direction) poll(now clock.Time) int {
	work := 0
	if n := d.in.RxBurst(d.inQ, d.rx); n > 0 {
		for _, h := range d.rx[:n] {
			d.admit(h, now)
		}
		if len(d.drops) > 0 {
			d.cache.Free(d.drops)
			d.drops = d.drops[:0]
		}
		work = n
	}
	work += d.release(now)
	if work > 0 {
		d.own[cHeld] = uint64(d.line.len() + len(d.pending))
		d.publish()
	}
	return work
}

func (d *direction) drop(h mbuf.Handle, reason int) {
	d.own[reason]++
	d.drops = append(d.drops, h)
}

// admit runs the per-frame decisions up to duplication; forward does the
// rest for the frame and its copy.
func (d *direction) admit(h mbuf.Handle, now clock.Time) {
	d.own[cReceived]++
	if d.down {
		d.drop(h, cLinkDown)
		return
	}
	if d.loss != 0 && hit(d.rng[streamLoss], d.loss) {
		d.drop(h, cLossRandom)
		return
	}
	if d.burst {
		r := d.rng[streamBurst]
		if d.inBadState {
			d.inBadState = !hit(r, d.burstR)
		} else {
			d.inBadState = hit(r, d.burstP)
		}
		lossIn := d.burstGood
		if d.inBadState {
			lossIn = d.burstBad
		}
		if lossIn != 0 && hit(r, lossIn) {
			d.drop(h, cLossBurst)
			return
		}
	}
	m := d.pool.Meta(h)
	frame := d.pool.Data(h)
	// Classification only picks a path: with one path it is skipped.
	flow, inOrder := m.FlowHash, true
	switch {
	case d.paths == 1:
	case d.classify != nil:
		var classified uint32
		classified, inOrder = d.classify(frame)
		if flow == 0 {
			flow = classified
		}
	case flow == 0:
		flow = FlowHash(frame)
	}
	dup := mbuf.NoHandle
	if d.dup != 0 && hit(d.rng[streamDup], d.dup) {
		// A handle can be in one place only, so the copy is a new frame.
		if d.cache.GetBulk(d.dupBuf[:]) == 1 {
			dup = d.dupBuf[0]
			*d.pool.Meta(dup) = *m
			copy(d.pool.Data(dup), frame)
			d.own[cDuplicated]++
		} else {
			d.own[cDupNoBuf]++
		}
	}
	d.forward(h, flow, inOrder, now)
	if dup != mbuf.NoHandle {
		d.forward(dup, flow, inOrder, now)
	}
}

// forward queues a frame for the rate limiter, corrupts it, picks its path,
// computes its release time and puts it in the delay line.
func (d *direction) forward(h mbuf.Handle, flow uint32, inOrder bool, now clock.Time) {
	if d.line.full() {
		d.drop(h, cLimitFull)
		return
	}
	if d.hops != 0 && !lowerTTL(d.pool.Data(h), d.hops) {
		d.drop(h, cTTLExpired)
		return
	}
	release := now
	if d.rate != 0 {
		if d.linkFree < now {
			d.linkFree, d.linkRem = now, 0
		}
		// Serialisation time, carrying the fraction of a nanosecond so that
		// the long-run rate is exact.
		bits := uint64(int(d.pool.Meta(h).DataLen)+d.overhead) * 8
		num := bits*1e9 + d.linkRem
		wire := clock.Time(num / d.rate)
		if d.queuePackets > 0 {
			for d.depLen > 0 && d.departures[d.depHead] <= now {
				d.depHead++
				if d.depHead == len(d.departures) {
					d.depHead = 0
				}
				d.depLen--
			}
			if d.depLen >= d.queuePackets {
				d.drop(h, cQueueFull)
				return
			}
		} else if d.linkFree-now+wire > d.maxBacklog {
			d.drop(h, cQueueFull)
			return
		}
		d.linkFree += wire
		d.linkRem = num % d.rate
		release = d.linkFree
		if d.queuePackets > 0 {
			tail := d.depHead + d.depLen
			if tail >= len(d.departures) {
				tail -= len(d.departures)
			}
			d.departures[tail] = release
			d.depLen++
		}
	}
	if d.corrupt != 0 && hit(d.rng[streamCorrupt], d.corrupt) {
		d.flipBit(h)
	}
	path := 0
	if d.paths > 1 {
		switch {
		case inOrder:
			path = int(uint64(uint32(mix(uint64(flow)))) * uint64(d.paths) >> 32)
		case d.spray == SprayRandom:
			path = d.rng[streamSpray].IntN(d.paths)
		case d.spray == SprayEntropy:
			// The frame's own headers, as a switch hashes them: its
			// per-packet entropy (UDP source port) picks the path.
			path = int(uint64(uint32(mix(uint64(FlowHash(d.pool.Data(h)))))) * uint64(d.paths) >> 32)
		case d.spray == SprayAdaptive && d.pathShaped:
			path = d.adaptivePath(release)
		default:
			path = d.nextPath
			if d.nextPath++; d.nextPath == d.paths {
				d.nextPath = 0
			}
		}
	}
	if d.pathShaped {
		var ok bool
		if release, ok = d.pathLink(path, int(d.pool.Meta(h).DataLen), release); !ok {
			d.ownPathX[pDrops][path]++
			d.drop(h, cPathQueueFull)
			return
		}
	}
	// Loss on the path, and a path that is down, come after its link: the
	// frame took its time there first, so a path that loses everything
	// looks as busy to adaptive spraying as its traffic makes it, not
	// idle (and would otherwise draw most of the frames).
	if d.pathLossOn && d.pathLoss[path] != 0 && hit(d.pathRng, d.pathLoss[path]) {
		d.ownPathX[pDrops][path]++
		d.drop(h, cPathLoss)
		return
	}
	if d.anyPathDown && d.pathDown[path] {
		d.ownPathX[pDrops][path]++
		d.drop(h, cPathDown)
		return
	}
	d.ownPaths[path]++
	d.ownPathX[pBytes][path] += uint64(d.pool.Meta(h).DataLen)
	release += d.pathDelay[path]
	if d.jitter > 0 {
		release += d.drawJitter()
	}
	reordered := d.reorder != 0 && hit(d.rng[streamReorder], d.reorder)
	switch {
	case reordered:
		release += d.reorderDelay
		d.own[cReordered]++
	case d.fifo:
		release = max(release, d.watermark[path])
		d.watermark[path] = release
	}
	if release > now {
		d.own[cDelayed]++
	}
	d.line.push(heldFrame{at: release, seq: d.seq, h: h}, path, !reordered)
	d.seq++
}

func (d *direction) drawJitter() clock.Time {
	r := d.rng[streamJitter]
	if !d.normalJitter {
		return clock.Time(r.Int64N(d.jitter + 1))
	}
	mean, sd := float64(d.jitter)/2, float64(d.jitter)/4
	var x float64
	for range normalJitterTries {
		x = math.Round(mean + sd*r.NormFloat64())
		if x >= 0 && x <= float64(d.jitter) {
			break
		}
	}
	return clock.Time(min(max(x, 0), float64(d.jitter)))
}

// flipBit flips one bit chosen uniformly from the frame past corruptFrom
// (from anywhere when the frame is no longer than that).
func (d *direction) flipBit(h mbuf.Handle) {
	frame := d.pool.Data(h)
	if len(frame) == 0 {
		return
	}
	from := d.corruptFrom
	if len(frame) <= from {
		from = 0
	}
	bit := d.rng[streamCorrupt].Uint64N(uint64(len(frame)-from) * 8)
	frame[from+int(bit>>3)] ^= 1 << (bit & 7)
	d.own[cCorrupted]++
}

// release hands the output port the frames due at now, up to one burst,
// after any it refused before.
func (d *direction) release(now clock.Time) int {
	work := 0
	if len(d.pending) > 0 {
		n := d.out.TxBurst(d.outQ, d.pending)
		d.own[cSent] += uint64(n)
		if n < len(d.pending) {
			d.own[cTxRefused] += uint64(len(d.pending) - n)
			d.pending = d.pending[:copy(d.pending, d.pending[n:])]
			return n
		}
		d.pending = d.pending[:0]
		work = n
	}
	k := 0
	for k+len(d.drops) < len(d.tx) {
		f, from, ok := d.line.peek()
		if !ok || f.at > now {
			break
		}
		h := d.line.pop(from)
		if d.down {
			// The frame was on the wire when the link went down.
			d.drop(h, cLinkCut)
			continue
		}
		// A receiver on a mem port sees when the fabric delivered the frame.
		d.pool.Meta(h).RxTime = int64(now)
		d.tx[k] = h
		k++
	}
	if len(d.drops) > 0 {
		work += len(d.drops)
		d.cache.Free(d.drops)
		d.drops = d.drops[:0]
	}
	if k == 0 {
		// Full bursts the port may hold go now (port.TxFlusher).
		port.FlushTx(d.out, d.outQ)
		return work
	}
	n := d.out.TxBurst(d.outQ, d.tx[:k])
	d.own[cSent] += uint64(n)
	if n < k {
		d.own[cTxRefused] += uint64(k - n)
		d.pending = append(d.pending[:0], d.tx[n:k]...)
	}
	return work + k
}

// nextDeadline returns when the direction next has something to send: now for
// frames the output refused, else the earliest release time.
func (d *direction) nextDeadline(now clock.Time) (clock.Time, bool) {
	if len(d.pending) > 0 {
		return now, true
	}
	if f, _, ok := d.line.peek(); ok {
		return f.at, true
	}
	return 0, false
}

// flush frees every frame the direction holds and forgets the link time
// they took.
func (d *direction) flush() {
	flushed := len(d.pending)
	d.cache.Free(d.pending)
	d.pending = d.pending[:0]
	for {
		k := 0
		for k < len(d.tx) {
			_, from, ok := d.line.peek()
			if !ok {
				break
			}
			d.tx[k] = d.line.pop(from)
			k++
		}
		if k == 0 {
			break
		}
		d.cache.Free(d.tx[:k])
		flushed += k
	}
	// The flushed frames no longer occupy the link or order their paths.
	d.depLen = 0
	d.linkFree, d.linkRem = 0, 0
	clear(d.pathFree)
	clear(d.pathRem)
	clear(d.pathDepN)
	clear(d.watermark)
	d.own[cFlushed] += uint64(flushed)
	d.own[cHeld] = 0
	d.publish()
}
