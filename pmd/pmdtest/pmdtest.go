package pmdtest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
)

// DefaultMaxEmptyPolls is Harness.MaxEmptyPolls when zero.
const DefaultMaxEmptyPolls = 1 << 16

// stallTime is how long a sender facing a full queue waits for progress
// before it reports a stall (after its poll budget is also spent).
const stallTime = 5 * time.Second

// Harness describes a driver under test.
type Harness struct {
	// Pool is where frames live; it must be dedicated to the suite.
	Pool *mbuf.Pool
	// Open returns a connected pair: packets sent on tx queue q arrive on
	// rx queue q. tx and rx may be the same port (a loopback). The suite
	// closes both at the end of each subtest.
	Open func(t *testing.T) (tx, rx port.Port)
	// MaxFrame is the largest frame the path carries.
	MaxFrame int
	// Lossy marks real links that may drop under load: the suite then
	// checks that no more frames arrive than were sent, in order and
	// uncorrupted, instead of exact counts, wherever load is high.
	Lossy bool
	// Settle, if set, is called between polls while the suite waits for
	// frames (real ports may need a kick or a yield). It runs on the
	// goroutine polling RX (the test goroutine in single-goroutine
	// subtests, a receiver goroutine per queue in Concurrent), never on
	// two goroutines for the same queue at once, but possibly on several
	// for different queues.
	Settle func()
	// MaxEmptyPolls bounds the consecutive empty RxBurst polls the suite
	// waits for frames in flight. 0 → DefaultMaxEmptyPolls.
	MaxEmptyPolls int
	// ConcurrentFrames is the number of frames per queue of the Concurrent
	// subtest. 0 → 20000.
	ConcurrentFrames int
}

// Run runs the conformance suite: Info, round trips of every size up to
// MaxFrame, bursts, TxBurst partial ownership, stats, every queue, a
// concurrent sender and receiver per queue, out-of-range queues, Close with
// frames in flight, Close idempotence, and the leak check after each.
func Run(t *testing.T, h Harness) {
	t.Helper()
	require.NotNil(t, h.Pool, "pmdtest: Harness.Pool is nil")
	require.NotNil(t, h.Open, "pmdtest: Harness.Open is nil")
	require.GreaterOrEqual(t, h.MaxFrame, MinFrame, "pmdtest: Harness.MaxFrame below the minimum Ethernet frame")
	require.LessOrEqual(t, h.MaxFrame, h.Pool.FrameSize()-h.Pool.Headroom(), "pmdtest: Harness.MaxFrame larger than the pool's frame room")
	if h.MaxEmptyPolls == 0 {
		h.MaxEmptyPolls = DefaultMaxEmptyPolls
	}
	if h.ConcurrentFrames == 0 {
		h.ConcurrentFrames = 20000
	}
	subtests := []struct {
		name string
		fn   func(*session)
	}{
		{"Info", testInfo},
		{"RoundTrip", testRoundTrip},
		{"Burst", testBursts},
		{"PartialTx", testPartialTx},
		{"Stats", testStats},
		{"AllQueues", testAllQueues},
		{"Concurrent", testConcurrent},
		{"QueueOutOfRange", testQueueOutOfRange},
		{"RxWait", testRxWait},
		{"CloseInFlight", testCloseInFlight},
		{"CloseIdempotent", testCloseIdempotent},
	}
	for _, st := range subtests {
		t.Run(st.name, func(t *testing.T) {
			s := open(t, h)
			st.fn(s)
		})
	}
}

// session is one subtest's pair of ports.
type session struct {
	t      *testing.T
	h      Harness
	pool   *mbuf.Pool
	tx, rx port.Port
	queues int
	frames frameMaker
	seq    uint32
	closed bool
}

func open(t *testing.T, h Harness) *session {
	require.Zero(t, h.Pool.InUse(), "pmdtest: the pool has frames in use before the subtest (a previous one leaked, or the pool is not dedicated)")
	tx, rx := h.Open(t)
	require.NotNil(t, tx, "Harness.Open returned a nil tx port")
	require.NotNil(t, rx, "Harness.Open returned a nil rx port")
	s := &session{
		t: t, h: h, pool: h.Pool, tx: tx, rx: rx,
		queues: min(tx.Info().Queues, rx.Info().Queues),
		frames: frameMaker{run: rand.Uint32(), dst: rx.Info().MAC, src: tx.Info().MAC},
	}
	t.Cleanup(s.closeAndCheck)
	return s
}

// closeAndCheck closes both ports and requires the pool to be quiet.
func (s *session) closeAndCheck() {
	if !s.closed {
		s.closed = true
		require.NoError(s.t, s.tx.Close(), "closing tx port")
		if s.rx != s.tx {
			require.NoError(s.t, s.rx.Close(), "closing rx port")
		}
	}
	require.NoError(s.t, s.pool.CheckLeaks(), "frames still in use after both ports closed")
}

// alloc takes n frames from the pool, failing the test if it is short.
func (s *session) alloc(n int) []mbuf.Handle {
	hs := make([]mbuf.Handle, n)
	require.Equal(s.t, n, s.pool.AllocBulk(hs), "pmdtest: pool too small (%d of %d frames free)", s.pool.Available(), s.pool.Frames())
	return hs
}

// make allocates and builds len(sizes) frames for queue, with consecutive
// sequence numbers.
func (s *session) make(queue int, sizes ...int) []mbuf.Handle {
	hs := s.alloc(len(sizes))
	for i, h := range hs {
		s.frames.build(s.pool, h, s.seq, queue, sizes[i])
		s.seq++
	}
	return hs
}

func repeat(size, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = size
	}
	return out
}

// sizesFor returns n sizes cycling through MinFrame..MaxFrame.
func (s *session) sizesFor(n int) []int {
	out := make([]int, n)
	span := s.h.MaxFrame - MinFrame + 1
	for i := range out {
		out[i] = MinFrame + (i*97)%span
	}
	return out
}

// send transmits every handle on queue, retrying refused ones while the
// receiver side is polled by nobody (the ring or device must drain by
// itself, or Settle must drain it). It returns how many were accepted and
// frees the rest.
func (s *session) send(queue int, hs []mbuf.Handle) int {
	sent, empty := 0, 0
	for sent < len(hs) && empty < s.h.MaxEmptyPolls {
		n := s.tx.TxBurst(queue, hs[sent:])
		if n == 0 {
			empty++
			s.settle()
			continue
		}
		sent += n
		empty = 0
	}
	port.FlushTx(s.tx, queue) // a TxFlusher may hold full bursts
	s.pool.Free(hs[sent:])
	return sent
}

func (s *session) settle() {
	if s.h.Settle != nil {
		s.h.Settle()
	}
}

// arrival is one received frame of ours.
type arrival struct {
	received
	rxQueue int
	data    []byte // copy, only when keep
}

// tally is what receive collected.
type tally struct {
	ours    []arrival
	foreign int    // frames that were not ours
	packets int    // every frame RxBurst returned
	bytes   uint64 // their DataLen
}

// receive polls queue until want frames of ours arrived or MaxEmptyPolls
// consecutive polls came back empty, checks and frees every frame.
func (s *session) receive(queue, want int, keep bool) tally {
	var tl tally
	bufs := make([]mbuf.Handle, 64)
	empty := 0
	for len(tl.ours) < want && empty < s.h.MaxEmptyPolls {
		n := s.rx.RxBurst(queue, bufs)
		if n == 0 {
			empty++
			s.settle()
			continue
		}
		empty = 0
		s.account(&tl, queue, bufs[:n], keep)
	}
	return tl
}

// account checks and frees a received burst.
func (s *session) account(tl *tally, queue int, hs []mbuf.Handle, keep bool) {
	for _, h := range hs {
		data := s.pool.Data(h)
		require.Equal(s.t, int(s.pool.Meta(h).DataLen), len(data))
		tl.packets++
		tl.bytes += uint64(len(data))
		r, ours, err := s.frames.check(data)
		require.NoError(s.t, err, "received frame corrupted")
		if !ours {
			tl.foreign++
			continue
		}
		a := arrival{received: r, rxQueue: queue}
		if keep {
			a.data = slices.Clone(data)
		}
		tl.ours = append(tl.ours, a)
	}
	s.pool.Free(hs)
}

// requireArrived checks that the arrivals are exactly (or, lossy, an
// ordered subset of) the frames with sequence numbers sent, in order.
func (s *session) requireArrived(got []arrival, sent []uint32, queue int, lossy bool) {
	t := s.t
	seqs := make([]uint32, len(got))
	for i, a := range got {
		seqs[i] = a.seq
		require.Equal(t, queue, a.queue, "frame seq %d sent on queue %d arrived on rx queue %d", a.seq, a.queue, a.rxQueue)
		require.Equal(t, queue, a.rxQueue, "frame seq %d sent on queue %d arrived on rx queue %d", a.seq, a.queue, a.rxQueue)
	}
	if !lossy {
		require.Equal(t, sent, seqs, "queue %d: frames missing, duplicated or out of order", queue)
		return
	}
	require.LessOrEqual(t, len(seqs), len(sent), "queue %d: more frames arrived than were sent", queue)
	j := 0
	for _, seq := range seqs {
		for j < len(sent) && sent[j] != seq {
			j++
		}
		require.Less(t, j, len(sent), "queue %d: frame seq %d duplicated, out of order or never sent (got %v)", queue, seq, seqs)
		j++
	}
}

func seqsOf(s *session, hs []mbuf.Handle) []uint32 {
	out := make([]uint32, len(hs))
	for i, h := range hs {
		r, ours, err := s.frames.check(s.pool.Data(h))
		require.True(s.t, ours)
		require.NoError(s.t, err)
		out[i] = r.seq
	}
	return out
}

func testInfo(s *session) {
	for _, p := range []port.Port{s.tx, s.rx} {
		info := p.Info()
		require.NotEmpty(s.t, info.Name, "Info().Name")
		require.NotEmpty(s.t, info.Driver, "Info().Driver")
		require.Positive(s.t, info.Queues, "Info().Queues")
		require.Positive(s.t, info.MTU, "Info().MTU")
		if info.MAC != nil {
			require.Len(s.t, info.MAC, 6, "Info().MAC")
		}
		st := p.Stats()
		require.Len(s.t, st.Queues, info.Queues, "Stats().Queues has one entry per queue")
	}
}

func testRoundTrip(s *session) {
	sizes := []int{MinFrame, MinFrame + 1, 64, 128, 1000, 1514, s.h.MaxFrame - 1, s.h.MaxFrame}
	slices.Sort(sizes)
	sizes = slices.Compact(sizes)
	for _, size := range sizes {
		if size < MinFrame || size > s.h.MaxFrame {
			continue
		}
		hs := s.make(0, size)
		want := slices.Clone(s.pool.Data(hs[0]))
		require.Equal(s.t, 1, s.send(0, hs), "%d-byte frame refused", size)
		tl := s.receive(0, 1, true)
		require.Len(s.t, tl.ours, 1, "%d-byte frame did not arrive", size)
		require.Equal(s.t, want, tl.ours[0].data, "%d-byte frame changed on the way", size)
	}
}

func testBursts(s *session) {
	for _, burst := range []int{1, 32, 64} {
		s.t.Run(fmt.Sprint(burst), func(t *testing.T) {
			s := *s
			s.t = t
			for round := range 4 {
				hs := s.make(0, s.sizesFor(burst)...)
				sent := seqsOf(&s, hs)
				n := s.send(0, hs)
				require.Equal(t, burst, n, "round %d: TxBurst refused frames of a %d-frame burst on an idle link", round, burst)
				tl := s.receive(0, burst, false)
				s.requireArrived(tl.ours, sent, 0, s.h.Lossy)
			}
		})
	}
}

// testPartialTx fills queue 0 without receiving until TxBurst takes fewer
// than offered, then checks the caller still owns the rest.
func testPartialTx(s *session) {
	t := s.t
	const burst = 32
	before := s.tx.Stats()
	var accepted []uint32
	refused := 0
	// Bounded by the pool's size too: a link that never back-pressures
	// (AF_XDP copy mode over veth: the kernel transmits synchronously and
	// drops at the unpolled receiver) returns every frame on completion,
	// so the pool never runs low.
	for offered := 0; refused == 0 && s.pool.Available() >= 2*burst && offered < s.pool.Frames(); offered += burst {
		hs := s.make(0, s.sizesFor(burst)...)
		seqs := seqsOf(s, hs)
		n := s.tx.TxBurst(0, hs)
		require.GreaterOrEqual(t, n, 0)
		require.LessOrEqual(t, n, burst)
		accepted = append(accepted, seqs[:n]...)
		if n < burst {
			refused = burst - n
			// The refused frames are still ours: intact, writable, freeable.
			require.Equal(t, seqs[n:], seqsOf(s, hs[n:]), "refused frames were modified")
			for _, h := range hs[n:] {
				s.pool.Data(h)[offPayload] ^= 0xff
			}
			s.pool.Free(hs[n:])
		}
	}
	port.FlushTx(s.tx, 0)
	if refused == 0 {
		t.Logf("TxBurst never refused a frame (%d frames sent, %d of %d pool frames free); the partial-ownership check did not run", len(accepted), s.pool.Available(), s.pool.Frames())
	}
	after := s.tx.Stats()
	require.Equal(t, uint64(refused), after.TxDropped-before.TxDropped, "TxDropped must count exactly the refused frames")
	require.Equal(t, uint64(len(accepted)), after.TxPackets-before.TxPackets, "TxPackets must count exactly the accepted frames")
	tl := s.receive(0, len(accepted), false)
	s.requireArrived(tl.ours, accepted, 0, s.h.Lossy)
}

func testStats(s *session) {
	t := s.t
	txBefore, rxBefore := s.tx.Stats(), s.rx.Stats()
	const perQueue = 50
	sent := make([]int, s.queues)
	sentBytes := make([]uint64, s.queues)
	got := make([]tally, s.queues)
	for q := range s.queues {
		sizes := s.sizesFor(perQueue)
		hs := s.make(q, sizes...)
		sent[q] = s.send(q, hs)
		for _, size := range sizes[:sent[q]] {
			sentBytes[q] += uint64(size)
		}
		got[q] = s.receive(q, sent[q], false)
	}
	txAfter, rxAfter := s.tx.Stats(), s.rx.Stats()
	var totalSent, totalPackets int
	var totalSentBytes, totalBytes uint64
	for q := range s.queues {
		require.Equal(t, uint64(sent[q]), txAfter.Queues[q].TxPackets-txBefore.Queues[q].TxPackets, "queue %d TxPackets", q)
		require.Equal(t, sentBytes[q], txAfter.Queues[q].TxBytes-txBefore.Queues[q].TxBytes, "queue %d TxBytes", q)
		require.Equal(t, uint64(got[q].packets), rxAfter.Queues[q].RxPackets-rxBefore.Queues[q].RxPackets, "queue %d RxPackets", q)
		require.Equal(t, got[q].bytes, rxAfter.Queues[q].RxBytes-rxBefore.Queues[q].RxBytes, "queue %d RxBytes", q)
		if !s.h.Lossy {
			require.Equal(t, perQueue, sent[q], "queue %d: frames refused on an idle link", q)
			require.Len(t, got[q].ours, sent[q], "queue %d: frames lost", q)
		}
		totalSent += sent[q]
		totalSentBytes += sentBytes[q]
		totalPackets += got[q].packets
		totalBytes += got[q].bytes
	}
	require.Equal(t, uint64(totalSent), txAfter.TxPackets-txBefore.TxPackets, "TxPackets")
	require.Equal(t, totalSentBytes, txAfter.TxBytes-txBefore.TxBytes, "TxBytes")
	require.Equal(t, uint64(totalPackets), rxAfter.RxPackets-rxBefore.RxPackets, "RxPackets")
	require.Equal(t, totalBytes, rxAfter.RxBytes-rxBefore.RxBytes, "RxBytes")
	requireSumsMatch(t, txAfter)
	requireSumsMatch(t, rxAfter)
}

// requireSumsMatch checks that the totals are the sums of the queues.
func requireSumsMatch(t *testing.T, st port.Stats) {
	var sum port.QueueStats
	for _, q := range st.Queues {
		sum.RxPackets += q.RxPackets
		sum.RxBytes += q.RxBytes
		sum.TxPackets += q.TxPackets
		sum.TxBytes += q.TxBytes
		sum.RxDropped += q.RxDropped
		sum.TxDropped += q.TxDropped
	}
	require.Equal(t, port.QueueStats{
		RxPackets: st.RxPackets, RxBytes: st.RxBytes, TxPackets: st.TxPackets,
		TxBytes: st.TxBytes, RxDropped: st.RxDropped, TxDropped: st.TxDropped,
	}, sum, "Stats totals must equal the sums over Queues")
}

// testAllQueues sends on each queue in turn and polls every queue: frames
// must arrive on the queue they were sent on, and only there.
func testAllQueues(s *session) {
	for q := range s.queues {
		hs := s.make(q, s.sizesFor(16)...)
		sent := seqsOf(s, hs)
		n := s.send(q, hs)
		if !s.h.Lossy {
			require.Equal(s.t, len(sent), n, "queue %d refused frames on an idle link", q)
		}
		tl := s.receive(q, n, false)
		s.requireArrived(tl.ours, sent[:n], q, s.h.Lossy)
		for other := range s.queues {
			if other == q {
				continue
			}
			stray := s.receive(other, 1, false) // bounded by MaxEmptyPolls
			require.Empty(s.t, stray.ours, "frames sent on queue %d arrived on queue %d", q, other)
		}
	}
}

// testConcurrent runs a sender and a receiver goroutine per queue, all at
// once: the configuration a pipeline uses. Each goroutine keeps its own
// results; they are read only after both have finished.
func testConcurrent(s *session) {
	t := s.t
	total := s.h.ConcurrentFrames
	type result struct {
		sent    []uint32 // written by the sender
		sendErr error
		got     []uint32 // written by the receiver
		recvErr error
	}
	results := make([]result, s.queues)
	var wg sync.WaitGroup
	for q := range s.queues {
		r := &results[q]
		done := make(chan struct{}) // closed by the sender; publishes r.sent
		wg.Add(2)
		go func() {
			defer wg.Done()
			defer close(done)
			r.sendErr = s.concurrentSender(q, total, &r.sent)
		}()
		go func() {
			defer wg.Done()
			r.recvErr = s.concurrentReceiver(q, done, &r.sent, &r.got)
		}()
	}
	wg.Wait()
	for q, r := range results {
		require.NoError(t, r.sendErr, "queue %d sender", q)
		require.NoError(t, r.recvErr, "queue %d receiver", q)
		got := make([]arrival, len(r.got))
		for i, seq := range r.got {
			got[i] = arrival{received: received{seq: seq, queue: q}, rxQueue: q}
		}
		s.requireArrived(got, r.sent, q, s.h.Lossy)
	}
}

func (s *session) concurrentSender(q, total int, sentSeqs *[]uint32) error {
	const burst = 32
	hs := make([]mbuf.Handle, burst)
	for seq := 0; seq < total; {
		n := min(burst, total-seq)
		if s.pool.AllocBulk(hs[:n]) != n {
			runtime.Gosched() // frames are in flight; the receiver frees them
			continue
		}
		for i := range n {
			size := MinFrame + (seq+i)%(s.h.MaxFrame-MinFrame+1)
			s.frames.build(s.pool, hs[i], uint32(seq+i), q, size)
		}
		sent, stalls := 0, 0
		progress := time.Now()
		// A full queue is only a stall once the poll budget is spent AND
		// no frame has left for stallTime: on a loaded machine the
		// receiver's thread can be descheduled for longer than any poll
		// budget lasts.
		for sent < n && (stalls < s.h.MaxEmptyPolls || time.Since(progress) < stallTime) {
			k := s.tx.TxBurst(q, hs[sent:n])
			if k == 0 {
				stalls++
				runtime.Gosched()
				continue
			}
			for i := sent; i < sent+k; i++ {
				*sentSeqs = append(*sentSeqs, uint32(seq+i))
			}
			sent += k
			stalls = 0
			progress = time.Now()
		}
		port.FlushTx(s.tx, q)
		s.pool.Free(hs[sent:n])
		if sent < n && !s.h.Lossy {
			return fmt.Errorf("queue %d: TxBurst refused frames for %d polls in a row", q, stalls)
		}
		seq += n
	}
	return nil
}

// concurrentReceiver polls q until the sender is done and everything it
// sent arrived, or MaxEmptyPolls polls in a row came back empty after that.
func (s *session) concurrentReceiver(q int, done <-chan struct{}, sentSeqs, got *[]uint32) error {
	var firstErr error
	bufs := make([]mbuf.Handle, 64)
	senderDone := false
	empty := 0
	for {
		n := s.rx.RxBurst(q, bufs)
		if n == 0 {
			if !senderDone {
				select {
				case <-done:
					senderDone = true
				default:
					runtime.Gosched()
				}
				continue
			}
			if len(*got) >= len(*sentSeqs) || empty >= s.h.MaxEmptyPolls {
				return firstErr
			}
			empty++
			s.settle()
			continue
		}
		empty = 0
		for _, h := range bufs[:n] {
			rec, ours, err := s.frames.check(s.pool.Data(h))
			if err != nil && firstErr == nil {
				firstErr = err
			}
			if ours {
				*got = append(*got, rec.seq)
			}
		}
		s.pool.Free(bufs[:n])
	}
}

func testQueueOutOfRange(s *session) {
	t := s.t
	bufs := make([]mbuf.Handle, 8)
	for _, p := range []port.Port{s.tx, s.rx} {
		q := p.Info().Queues
		for _, bad := range []int{-1, q, q + 1, 1 << 20} {
			require.Zero(t, p.RxBurst(bad, bufs), "RxBurst on queue %d of %d", bad, q)
			hs := s.make(0, MinFrame, MinFrame)
			require.Zero(t, p.TxBurst(bad, hs), "TxBurst on queue %d of %d", bad, q)
			s.pool.Free(hs) // still ours
		}
		require.Zero(t, p.RxBurst(0, bufs[:0]), "RxBurst with no room")
		require.Zero(t, p.TxBurst(0, bufs[:0]), "TxBurst with no frames")
	}
}

// testRxWait: an RxWaiter's descriptor polls readable once a frame sent
// to its queue has arrived (a loop asleep on it wakes), and a queue out of
// range, or a closed port, has none. Ports without descriptors skip it.
func testRxWait(s *session) {
	t := s.t
	w, ok := s.rx.(port.RxWaiter)
	if !ok {
		t.Skipf("%s has no receive descriptors (not a port.RxWaiter)", s.rx.Info().Name)
	}
	q := s.rx.Info().Queues
	for _, bad := range []int{-1, q, 1 << 20} {
		require.Equal(t, -1, w.RxWaitFD(bad), "RxWaitFD on queue %d of %d", bad, q)
	}
	for queue := range s.queues {
		fd := w.RxWaitFD(queue)
		require.GreaterOrEqual(t, fd, 0, "RxWaitFD(%d)", queue)
		require.Equal(t, 1, s.send(queue, s.make(queue, 64)), "frame refused")
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		var n int
		var err error
		for { // a signal may end the wait first
			if n, err = unix.Poll(fds, int(stallTime.Milliseconds())); !errors.Is(err, unix.EINTR) {
				break
			}
		}
		require.NoError(t, err)
		require.Equal(t, 1, n, "queue %d's descriptor did not poll readable within %v of a frame sent to it", queue, stallTime)
		require.NotZero(t, fds[0].Revents&unix.POLLIN, "revents %#x", fds[0].Revents)
		tl := s.receive(queue, 1, false)
		require.Len(t, tl.ours, 1, "the frame that woke the descriptor")
	}
	s.closeAndCheck()
	require.Equal(t, -1, w.RxWaitFD(0), "RxWaitFD on a closed port")
}

// testCloseInFlight closes both ports with frames still queued: Close must
// return them to the pool (the leak check in cleanup proves it).
func testCloseInFlight(s *session) {
	for q := range s.queues {
		s.send(q, s.make(q, s.sizesFor(16)...))
	}
}

func testCloseIdempotent(s *session) {
	t := s.t
	s.send(0, s.make(0, MinFrame))
	s.closed = true
	for i := range 2 {
		require.NoError(t, s.tx.Close(), "tx Close #%d", i+1)
		require.NoError(t, s.rx.Close(), "rx Close #%d", i+1)
	}
	bufs := make([]mbuf.Handle, 4)
	require.Zero(t, s.rx.RxBurst(0, bufs), "RxBurst after Close")
	hs := s.make(0, MinFrame)
	require.Zero(t, s.tx.TxBurst(0, hs), "TxBurst after Close")
	s.pool.Free(hs)
	require.NotPanics(t, func() { s.tx.Stats(); s.rx.Info() }, "Stats and Info after Close")
}
