package fabric

import "sync/atomic"

// Counter indices. Each direction keeps plain counters in this order and
// publishes them to atomics once per Poll that did work.
const (
	// The inputs come first: publish stores in this order, and snapshot
	// relies on it.
	cReceived = iota
	cDuplicated
	cSent
	cLossRandom
	cLossBurst
	cQueueFull
	cLimitFull
	cTTLExpired
	cDupNoBuf
	cCorrupted
	cReordered
	cDelayed
	cTxRefused
	cLinkDown
	cLinkCut
	cFlushed
	cPathQueueFull
	cPathLoss
	cPathDown
	cHeld
	numCounters
)

// DirStats are one direction's counters. All but Held only grow. Every
// frame taken from the input port or made by duplication ends up in exactly
// one of Sent, LossRandom, LossBurst, QueueFull, LimitFull, TTLExpired,
// LinkDown, LinkCut, Flushed, PathQueueFull, PathLossDrops, PathDownDrops or Held:
//
//	Received + Duplicated == Sent + LossRandom + LossBurst + QueueFull + LimitFull + TTLExpired + LinkDown + LinkCut + Flushed + PathQueueFull + PathLossDrops + PathDownDrops + Held
//
// and every frame that got past the queues, its path's included, took one
// path:
//
//	sum(Paths) == Sent + LinkCut + Flushed + Held
type DirStats struct {
	Received   uint64 // frames taken from the input port
	Sent       uint64 // frames the output port accepted
	LossRandom uint64 // dropped by Profile.Loss
	LossBurst  uint64 // dropped by the Gilbert-Elliott model (Profile.Burst)
	QueueFull  uint64 // tail-dropped by the rate limiter's full queue
	LimitFull  uint64 // tail-dropped because Profile.Limit frames were held
	TTLExpired uint64 // IP frames that arrived with no more TTL than Profile.Hops
	Duplicated uint64 // copies made by Profile.Dup
	DupNoBuf   uint64 // copies not made because the pool was empty
	Corrupted  uint64 // frames with one bit flipped
	Reordered  uint64 // frames held back by Profile.ReorderDelay
	Delayed    uint64 // frames released later than they arrived
	// TxRefused counts refusals by the output port: a refused frame is kept
	// and offered again on the next Poll, so one frame may count more than
	// once.
	TxRefused uint64
	// LinkDown counts frames taken from the input while the direction was
	// down (Fabric.SetLinkDown); LinkCut those already on their way (held)
	// whose release time came while it was down.
	LinkDown uint64
	LinkCut  uint64
	Flushed  uint64 // frames freed by Stop or Close while held
	// PathQueueFull counts frames tail-dropped by their path's full queue
	// (Profile.PathQueue), PathLossDrops those lost on their path
	// (Profile.PathLoss).
	PathQueueFull uint64
	PathLossDrops uint64
	// PathDownDrops counts frames sent down a path that was down
	// (Profile.PathDown, Fabric.SetPathDown), after its link.
	PathDownDrops uint64
	Held          uint64 // frames held now (a gauge)
	// Paths counts the frames sent down each path, indexed by path (as
	// many as the most paths any of the direction's profiles had).
	Paths []uint64
	// PathDetail has each path's own counters, indexed like Paths.
	PathDetail []PathStats
}

// PathStats are one path's counters.
type PathStats struct {
	Frames    uint64 // frames sent down the path (Paths[i])
	Bytes     uint64 // their bytes
	QueuePeak uint64 // most frames ever in the path's own queue (Profile.PathRate), the one on the wire included
	Drops     uint64 // frames the path dropped: its queue full, its loss, or down
}

// Stats are a fabric's counters, per direction.
type Stats struct {
	AtoB, BtoA DirStats
}

// counters is a direction's private tally and its published copy.
// The path counters have room for MaxPaths, so that a profile changed at
// run time never reallocates what Stats reads; pathsSeen says how many of
// them to report.
type counters struct {
	own       [numCounters]uint64
	ownPaths  []uint64
	pub       [numCounters]atomic.Uint64
	pubPaths  []atomic.Uint64
	pathsSeen atomic.Int32
	// Per path: bytes, queue peak, drops (own and published), MaxPaths
	// each.
	ownPathX [pathCounters][]uint64
	pubPathX [pathCounters][]atomic.Uint64
}

// Per-path counters beside the frame count.
const (
	pBytes = iota
	pPeak
	pDrops
	pathCounters
)

func (c *counters) init() {
	c.ownPaths, c.pubPaths = make([]uint64, MaxPaths), make([]atomic.Uint64, MaxPaths)
	for i := range c.ownPathX {
		c.ownPathX[i] = make([]uint64, MaxPaths)
		c.pubPathX[i] = make([]atomic.Uint64, MaxPaths)
	}
}

// notePaths records that paths are in use, for snapshot.
func (c *counters) notePaths(paths int) {
	if int32(paths) > c.pathsSeen.Load() {
		c.pathsSeen.Store(int32(paths))
	}
}

func (c *counters) publish() {
	for i := range c.own {
		if c.pub[i].Load() != c.own[i] {
			c.pub[i].Store(c.own[i])
		}
	}
	for i := range c.ownPaths[:c.pathsSeen.Load()] {
		if c.pubPaths[i].Load() != c.ownPaths[i] {
			c.pubPaths[i].Store(c.ownPaths[i])
		}
		for k := range c.ownPathX {
			if c.pubPathX[k][i].Load() != c.ownPathX[k][i] {
				c.pubPathX[k][i].Store(c.ownPathX[k][i])
			}
		}
	}
}

// snapshot reads the published counters one by one. The frames' fates are
// read before the inputs (publish stores the inputs first), so that even a
// snapshot taken while the fabric runs never shows more frames leaving
// than entering.
func (c *counters) snapshot() DirStats {
	s := DirStats{
		Sent:       c.pub[cSent].Load(),
		LossRandom: c.pub[cLossRandom].Load(),
		LossBurst:  c.pub[cLossBurst].Load(),
		QueueFull:  c.pub[cQueueFull].Load(),
		LimitFull:  c.pub[cLimitFull].Load(),
		TTLExpired: c.pub[cTTLExpired].Load(),
		DupNoBuf:   c.pub[cDupNoBuf].Load(),
		Corrupted:  c.pub[cCorrupted].Load(),
		Reordered:  c.pub[cReordered].Load(),
		Delayed:    c.pub[cDelayed].Load(),
		TxRefused:  c.pub[cTxRefused].Load(),
		LinkDown:   c.pub[cLinkDown].Load(),
		LinkCut:    c.pub[cLinkCut].Load(),
		Flushed:    c.pub[cFlushed].Load(),
		Held:       c.pub[cHeld].Load(),
		Paths:      make([]uint64, c.pathsSeen.Load()),
		PathDetail: make([]PathStats, c.pathsSeen.Load()),
	}
	s.PathQueueFull = c.pub[cPathQueueFull].Load()
	s.PathLossDrops = c.pub[cPathLoss].Load()
	s.PathDownDrops = c.pub[cPathDown].Load()
	s.Duplicated = c.pub[cDuplicated].Load()
	s.Received = c.pub[cReceived].Load()
	for i := range s.Paths {
		s.Paths[i] = c.pubPaths[i].Load()
		s.PathDetail[i] = PathStats{Frames: s.Paths[i], Bytes: c.pubPathX[pBytes][i].Load(),
			QueuePeak: c.pubPathX[pPeak][i].Load(), Drops: c.pubPathX[pDrops][i].Load()}
	}
	return s
}
