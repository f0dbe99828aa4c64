package dix

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/peregrine-net/peregrine/core/clock"
	coredix "github.com/peregrine-net/peregrine/core/dix"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/rt/txn"
	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/fabric"
	"github.com/peregrine-net/peregrine/sim"
)

// Workload is one simulated run: Sends from node 0 to node 1 of the
// simulator (sim.Cluster, the virtual clock), over node 0's link Profile
// both ways, into WQEs node 1 keeps posted (recvDepth of them).
type Workload struct {
	Index   coredix.Config
	Profile string
	Sends   int
	// Sizes: uniform in [Min, Max] bytes, or, with Mice > 0, Min bytes
	// with probability Mice and Max bytes otherwise.
	Min, Max int
	Mice     float64
	// Window is the most Sends outstanding at the transport (the index's
	// Outstanding; at most recvDepth).
	Window int
	// Load 0: closed loop, a Send is posted as soon as the window has
	// room. Load > 0: open loop, Sends are posted at Poisson arrival
	// times averaging Load × LineRate (bits per second) of payload;
	// those the window (or FIFO) cannot take yet wait in the
	// application's queue, and their time there counts from posting.
	Load     float64
	LineRate float64
	// FIFO hands the transport the next Send only once the previous
	// one's last packet has left, so Sends are transmitted one after
	// another in posting order, as an InfiniBand send queue does; without
	// it the transaction layer's scheduler interleaves the packets of the
	// Sends outstanding.
	FIFO bool
	// NoTiming skips decoding every transmitted frame (timing the last
	// packets): the wrap run needs only the placement check. Not with
	// FIFO.
	NoTiming bool
	// HoldBytes is the baseline receiver's hold buffer (0: 64 MiB, more
	// than the workload ever needs, so that its peak is the need).
	HoldBytes int
	Seed      uint64
}

// SimResult is one simulated run's figures.
type SimResult struct {
	Sends int
	Bytes uint64
	// P50 and P99: from the Send's last packet leaving the sender (its
	// first transmission) to its receive completion: the part of a Send's
	// life the receiver decides. PostP50, PostP99: from posting, which
	// adds the sender's queueing and transmission (and, without FIFO, the
	// interleaving of concurrent Sends).
	P50, P99         time.Duration
	PostP50, PostP99 time.Duration
	PeakHeld         uint64 // bytes held outside WQEs at once
	BytesPlaced      uint64
	BytesCopied      uint64
	Stats            txn.SendStats
	VirtualTime      time.Duration
	Retransmits      uint64
	Polls            uint64 // the simulator's rounds (every stage polled once)
	Mismatches       int    // WQEs whose bytes differ from their Send's
	CompletionErr    int
}

// CopiesPerByte is BytesCopied / BytesPlaced.
func (r *SimResult) CopiesPerByte() float64 {
	if r.BytesPlaced == 0 {
		return 0
	}
	return float64(r.BytesCopied) / float64(r.BytesPlaced)
}

const (
	maxSend   = 256 << 10
	minSend   = 4 << 10
	recvDepth = 64
	// DefaultWindow is the Sends outstanding on the connection.
	DefaultWindow = 16
)

// Simulate runs the closed-loop workload once with index cfg over
// profile: sends Sends of 4 KiB to 256 KiB, window of them outstanding.
func Simulate(cfg coredix.Config, profile string, sends, window int, seed uint64) (*SimResult, error) {
	return SimulateWorkload(Workload{Index: cfg, Profile: profile, Sends: sends, Min: minSend, Max: maxSend, Window: window, Seed: seed})
}

// content writes Send i's bytes into b: random bytes from pool (2×Max
// long) at an offset drawn from i, and i itself in the first 8 bytes, so
// that no two Sends carry the same bytes and one placed in another's WQE
// cannot pass the check, whatever the sizes.
func content(b, pool []byte, i int) {
	x := uint64(i)*0x9e3779b97f4a7c15 + 1
	o := int(x>>33) % (len(pool) - len(b) + 1)
	copy(b, pool[o:])
	var w [8]byte
	binary.LittleEndian.PutUint64(w[:], uint64(i))
	copy(b, w[:])
}

// SimulateWorkload runs w once.
func SimulateWorkload(w Workload) (*SimResult, error) {
	if w.Window < 1 || w.Window > recvDepth || w.Min < 1 || w.Max < w.Min || w.Sends < 1 || (w.FIFO && w.NoTiming) || (w.Load > 0 && w.LineRate <= 0) {
		return nil, fmt.Errorf("dix: workload %+v: Window 1..%d, 1 <= Min <= Max, Sends >= 1, LineRate with Load, FIFO needs timing", w, recvDepth)
	}
	prof, err := fabric.ParseProfile(w.Profile)
	if err != nil {
		return nil, err
	}
	cfg := w.Index
	cfg.Outstanding = w.Window
	if w.HoldBytes == 0 {
		w.HoldBytes = 64 << 20
	}
	var eps [2]*txn.Endpoint
	var connB *txn.Conn
	mk := func(i int) func(n *sim.Node, o rt.Options) (sim.Peer, error) {
		return func(n *sim.Node, o rt.Options) (sim.Peer, error) {
			o.WindowSize, o.MaxOutstanding = 256, 96
			opts := txn.Options{Transport: o, RecvDepth: recvDepth, HoldBytes: w.HoldBytes, MaxOps: 1024}
			if i == 1 {
				opts.OnConnEvent = func(ev txn.ConnEvent) {
					if ev.Kind == txn.ConnEstablished {
						connB = ev.Conn
					}
				}
			}
			e, err := txn.New(opts)
			eps[i] = e
			return e, err
		}
	}
	c, err := sim.NewCluster(sim.ClusterConfig{Seed: w.Seed, Frames: 32768, Nodes: []sim.NodeConfig{
		{Name: "sender", Up: prof, Down: prof, Make: mk(0)},
		{Name: "receiver", Make: mk(1)},
	}})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	a, b := eps[0], eps[1]
	conn, err := a.Open(c.Nodes[1].Addr(), txn.ConnOptions{Index: cfg})
	if err != nil {
		return nil, err
	}
	if err := c.Run(func() bool { return connB != nil }, time.Second); err != nil {
		return nil, fmt.Errorf("connection: %w", err)
	}
	r := rand.New(rand.NewPCG(w.Seed, 0xd1c5))
	// Send i reads source slot i mod srcSlots: the window keeps fewer than
	// that many outstanding, so a slot is rewritten only after its
	// previous Send completed at the sender.
	srcSlots := 2 * w.Window
	src := make([]byte, srcSlots*w.Max)
	dst := make([]byte, recvDepth*w.Max)
	want := make([]byte, w.Max)
	pool := make([]byte, 2*w.Max)
	for i := range pool {
		pool[i] = byte(r.Uint32())
	}
	ra, err := a.Register(src, 0)
	if err != nil {
		return nil, err
	}
	rb, err := b.Register(dst, txn.RemoteWrite)
	if err != nil {
		return nil, err
	}
	type sendRec struct {
		n      int
		posted clock.Time // the application's post (its arrival, open loop)
		lastTx clock.Time // first transmission of its last packet
	}
	recs := make([]sendRec, w.Sends)
	var meanBytes float64
	for i := range recs {
		switch {
		case w.Mice > 0 && r.Float64() < w.Mice:
			recs[i].n = w.Min
		case w.Mice > 0:
			recs[i].n = w.Max
		default:
			recs[i].n = w.Min + r.IntN(w.Max-w.Min+1)
		}
		meanBytes += float64(recs[i].n) / float64(w.Sends)
	}
	start := c.Clock.Now()
	if w.Load > 0 {
		// Poisson arrivals: exponential gaps of mean meanBytes*8 / (Load × LineRate).
		gap := meanBytes * 8 / (w.Load * w.LineRate) * 1e9 // ns
		t := float64(start)
		for i := range recs {
			t += -math.Log(1-r.Float64()) * gap
			recs[i].posted = clock.Time(t)
		}
	}
	res := &SimResult{Sends: w.Sends}
	lat := make([]time.Duration, 0, w.Sends)
	postLat := make([]time.Duration, 0, w.Sends)
	// RSNs count up from the first Send's by one per Send (the connection
	// carries nothing else).
	var rsn0 uint32
	issued := 0
	var f wire.Frame
	if !w.NoTiming {
		c.OnTransmit = func(node int, raw []byte) {
			if node != 0 || f.Decode(raw) != nil {
				return
			}
			h := &f.Header
			if h.Type != wire.TypeSend || !h.Flags.Has(wire.FlagLastOfMessage) || h.Flags.Has(wire.FlagRetransmission) {
				return
			}
			if i := int(h.RSN - rsn0); i < issued && recs[i].lastTx == 0 {
				recs[i].lastTx = c.Clock.Now()
			}
		}
	}
	var postedWQE, doneA, doneB int
	cq := make([]txn.Completion, 64)
	driver := &stage{}
	driver.poll = func(now clock.Time) int {
		work := 0
		for postedWQE < w.Sends && postedWQE-doneB < recvDepth {
			slot := postedWQE % recvDepth
			if _, err := connB.PostRecv(txn.RecvWR{Local: rb, LocalAddr: uint64(slot * w.Max), Len: w.Max, WRID: uint64(postedWQE)}); err != nil {
				break
			}
			postedWQE++
			work++
		}
		for issued < w.Sends {
			s := &recs[issued]
			if w.Load > 0 && s.posted > now {
				break // not posted yet
			}
			if w.FIFO && issued > 0 && recs[issued-1].lastTx == 0 {
				break // the previous Send is still being transmitted
			}
			off := (issued % srcSlots) * w.Max
			rsn, err := conn.Send(txn.Op{Local: ra, LocalAddr: uint64(off), Len: s.n, Tag: uint64(issued)})
			if err != nil {
				break
			}
			// Written once the Send is accepted (a refused one would be
			// rewritten at every poll); the transport reads it no sooner
			// than its next Poll.
			content(src[off:off+s.n], pool, issued)
			if issued == 0 {
				rsn0 = rsn
			}
			if w.Load == 0 {
				s.posted = now
			}
			issued++
			work++
		}
		for n := a.Completions(cq); n > 0; n = a.Completions(cq) {
			for _, cp := range cq[:n] {
				if cp.Status != txn.StatusOK {
					res.CompletionErr++
				}
				doneA++
			}
			work += n
		}
		for n := b.Completions(cq); n > 0; n = b.Completions(cq) {
			for _, cp := range cq[:n] {
				doneB++
				i := int(cp.Tag)
				if cp.Status != txn.StatusOK || i >= w.Sends || cp.Bytes != recs[i].n {
					res.CompletionErr++
					continue
				}
				slot := i % recvDepth
				s := &recs[i]
				content(want[:s.n], pool, i)
				if !bytes.Equal(dst[slot*w.Max:slot*w.Max+s.n], want[:s.n]) {
					res.Mismatches++
				}
				postLat = append(postLat, cp.Done.Sub(s.posted))
				if !w.NoTiming {
					lat = append(lat, cp.Done.Sub(s.lastTx))
				}
				res.Bytes += uint64(s.n)
			}
			work += n
		}
		if w.Load > 0 && issued < w.Sends {
			driver.next, driver.has = recs[issued].posted, true
		} else {
			driver.has = false
		}
		return work
	}
	c.AddStage(driver)
	if err := c.Run(func() bool { return doneA == w.Sends && doneB == w.Sends }, time.Minute); err != nil {
		return nil, fmt.Errorf("%d of %d Sends completed at the sender, %d at the receiver: %w", doneA, w.Sends, doneB, err)
	}
	res.VirtualTime = c.Clock.Now().Sub(start)
	res.Polls = c.Polls()
	res.P50, res.P99 = quantiles(lat)
	res.PostP50, res.PostP99 = quantiles(postLat)
	st := b.SendStats()
	// Stats publish at the end of each Poll; the last Poll ran.
	res.Stats = st
	res.PeakHeld = st.PeakHeldBytes
	res.BytesPlaced, res.BytesCopied = st.BytesPlaced, st.BytesCopied
	res.Retransmits = a.Transport().Stats().TxRetransmit
	if err := c.Close(); err != nil { // stops everything, checks the pool for leaks
		return nil, fmt.Errorf("closing the simulation: %w", err)
	}
	return res, nil
}

// stage adapts a function to sim's extra stages; next is when it next has
// work (an open-loop arrival).
type stage struct {
	poll func(clock.Time) int
	next clock.Time
	has  bool
}

func (s *stage) Name() string                     { return "dix-driver" }
func (s *stage) Poll(now clock.Time) int          { return s.poll(now) }
func (s *stage) NextDeadline() (clock.Time, bool) { return s.next, s.has }
