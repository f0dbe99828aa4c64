package rt

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/wire"
)

func newRx(bsn uint32, size int) *rxWindow {
	return &rxWindow{bsn: bsn, got: make(snb, size/64)}
}

func newTx(psn uint32, size int) *txWindow {
	w := &txWindow{acked: make(snb, size/64)}
	w.reset(psn)
	return w
}

func TestSeqCompareWraps(t *testing.T) {
	require.True(t, seqLT(0xffffffff, 0))
	require.True(t, seqLT(0xfffffff0, 5))
	require.False(t, seqLT(5, 0xfffffff0))
	require.True(t, seqLEQ(7, 7))
	require.False(t, seqLT(7, 7))
}

func TestSNBShiftMatchesModel(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, words := range []int{1, 2, 3, 8} {
		size := uint32(words * 64)
		for range 500 {
			m := make(snb, words)
			model := make([]bool, size)
			for n := range size {
				if r.IntN(3) == 0 {
					m.set(n)
					model[n] = true
				}
			}
			k := uint32(r.IntN(int(size) + 10))
			m.shift(k)
			for n := range size {
				want := n+k < size && model[n+k]
				require.Equal(t, want, m.has(n), "words=%d k=%d bit %d", words, k, n)
			}
		}
	}
}

func TestSNBHelpers(t *testing.T) {
	m := make(snb, 2)
	require.True(t, m.empty())
	require.Equal(t, uint32(0), m.span())
	m.set(0)
	m.set(1)
	m.set(2)
	m.set(70)
	require.Equal(t, uint32(3), m.trailingOnes())
	require.Equal(t, uint32(71), m.span())
	require.Equal(t, 4, m.count())
	require.True(t, m.anyAtOrAbove(70))
	require.False(t, m.anyAtOrAbove(71))
	require.True(t, m.anyAtOrAbove(3))
	wb := m.wireBits()
	for n := range uint32(128) {
		require.Equal(t, m.has(n), wb.Has(n), "bit %d", n)
	}
	back := fromWire(&wb)
	require.Equal(t, [2]uint64{m[0], m[1]}, back)
}

func TestRxWindowReceiverRules(t *testing.T) {
	w := newRx(100, 128)

	c, off := w.classify(101) // ahead of the base: inside the window
	require.Equal(t, rxNew, c)
	require.Equal(t, uint32(0), w.accept(off), "a PSN past the base does not move it")
	require.Equal(t, uint32(100), w.bsn)
	require.True(t, w.holes())

	c, _ = w.classify(101)
	require.Equal(t, rxDuplicate, c)

	c, off = w.classify(100) // the base: advances past 100 and 101
	require.Equal(t, rxNew, c)
	require.Equal(t, uint32(2), w.accept(off))
	require.Equal(t, uint32(102), w.bsn)
	require.False(t, w.holes())

	c, _ = w.classify(99)
	require.Equal(t, rxStale, c, "PSN < BSN")
	c, _ = w.classify(102 + 127)
	require.Equal(t, rxNew, c, "last PSN of the window")
	c, _ = w.classify(102 + 128)
	require.Equal(t, rxBeyond, c, "first PSN past the window")
	c, _ = w.classify(102 + 1<<30)
	require.Equal(t, rxBeyond, c)
	back := uint32(102)
	c, _ = w.classify(back - 1<<30)
	require.Equal(t, rxStale, c)
}

func TestRxWindowWrapAround(t *testing.T) {
	start := uint32(0xffffffff - 5)
	w := newRx(start, 64)
	// Receive 12 PSNs across the wrap in reverse order.
	for i := 11; i >= 0; i-- {
		c, off := w.classify(start + uint32(i))
		require.Equal(t, rxNew, c)
		w.accept(off)
	}
	require.Equal(t, start+12, w.bsn)
	require.Equal(t, uint32(6), w.bsn)
	require.False(t, w.holes())
	c, _ := w.classify(0xffffffff)
	require.Equal(t, rxStale, c)
}

func TestTxWindowCumulativeAndExtendedAck(t *testing.T) {
	w := newTx(1000, 128)
	for range 10 {
		w.assign()
	}
	require.Equal(t, uint32(10), w.outstanding)
	buf := make([]uint32, 0, 256)

	// Cumulative ACK of 1000..1002.
	newly, res := w.ack(1003, nil, buf[:0])
	require.Equal(t, ackApplied, res)
	require.Equal(t, []uint32{1000, 1001, 1002}, newly)
	require.Equal(t, uint32(1003), w.bsn)
	require.Equal(t, uint32(7), w.outstanding)

	// Extended ACK: BSN 1003 still, 1005 and 1007 received.
	var bm wire.Bitmap128
	bm.Set(2)
	bm.Set(4)
	newly, res = w.ack(1003, &bm, buf[:0])
	require.Equal(t, ackApplied, res)
	require.Equal(t, []uint32{1005, 1007}, newly)
	require.Equal(t, uint32(5), w.outstanding)

	// The same EACK again acknowledges nothing new.
	newly, res = w.ack(1003, &bm, buf[:0])
	require.Equal(t, ackApplied, res)
	require.Empty(t, newly)

	// A stale cumulative ACK is ignored.
	newly, res = w.ack(1001, nil, buf[:0])
	require.Equal(t, ackStale, res)
	require.Empty(t, newly)
	require.Equal(t, uint32(1003), w.bsn)

	// Cumulative ACK to 1006 retires 1003, 1004 (1005 already acked) and
	// then steps over nothing: 1006 is unacked, 1007 acked.
	newly, res = w.ack(1006, nil, buf[:0])
	require.Equal(t, ackApplied, res)
	require.Equal(t, []uint32{1003, 1004}, newly)
	require.Equal(t, uint32(1006), w.bsn)
	require.True(t, w.acked.has(1))
	require.Equal(t, uint32(3), w.outstanding)

	// Everything.
	newly, res = w.ack(1010, nil, buf[:0])
	require.Equal(t, ackApplied, res)
	require.Equal(t, []uint32{1006, 1008, 1009}, newly)
	require.Equal(t, uint32(0), w.outstanding)
	require.Equal(t, w.nsn, w.bsn)
	require.True(t, w.acked.empty())
}

func TestTxWindowForgedAckChangesNothing(t *testing.T) {
	w := newTx(50, 128)
	for range 4 {
		w.assign()
	}
	before := *w
	beforeBits := append(snb(nil), w.acked...)
	buf := make([]uint32, 0, 256)

	newly, res := w.ack(55, nil, buf[:0]) // BSN past NSN (54)
	require.Equal(t, ackForged, res)
	require.Empty(t, newly)

	var bm wire.Bitmap128
	bm.Set(1)
	bm.Set(4) // PSN 54 = NSN: never sent
	newly, res = w.ack(50, &bm, buf[:0])
	require.Equal(t, ackForged, res)
	require.Empty(t, newly)

	bm = wire.Bitmap128{}
	bm.Set(127)
	_, res = w.ack(52, &bm, buf[:0])
	require.Equal(t, ackForged, res)

	require.Equal(t, before.bsn, w.bsn)
	require.Equal(t, before.nsn, w.nsn)
	require.Equal(t, before.outstanding, w.outstanding)
	require.Equal(t, beforeBits, w.acked)
}

func TestTxWindowWrapAround(t *testing.T) {
	start := uint32(0xfffffffe)
	w := newTx(start, 64)
	for range 6 {
		w.assign()
	}
	require.Equal(t, uint32(4), w.nsn)
	buf := make([]uint32, 0, 128)
	var bm wire.Bitmap128
	bm.Set(1) // 0xffffffff
	bm.Set(3) // 1
	newly, res := w.ack(start, &bm, buf[:0])
	require.Equal(t, ackApplied, res)
	require.Equal(t, []uint32{0xffffffff, 1}, newly)
	newly, res = w.ack(3, nil, buf[:0])
	require.Equal(t, ackApplied, res)
	require.Equal(t, []uint32{0xfffffffe, 0, 2}, newly)
	require.Equal(t, uint32(3), w.bsn)
	require.Equal(t, uint32(1), w.outstanding)
}

func TestTxWindowFullAndUnacked(t *testing.T) {
	w := newTx(7, 64)
	for !w.full() {
		w.assign()
	}
	require.Equal(t, uint32(64), w.inFlight())
	var bm wire.Bitmap128
	for n := uint32(1); n < 64; n += 2 {
		bm.Set(n)
	}
	_, res := w.ack(7, &bm, make([]uint32, 0, 128))
	require.Equal(t, ackApplied, res)
	var got []uint32
	w.unacked(10, func(psn uint32) bool { got = append(got, psn); return true })
	require.Equal(t, []uint32{7, 9, 11, 13, 15}, got)
	got = got[:0]
	w.unacked(100, func(psn uint32) bool { got = append(got, psn); return len(got) < 3 })
	require.Equal(t, []uint32{7, 9, 11}, got)
}

// TestWindowsModel runs a sender and a receiver window against each other
// over a lossy, reordering channel and checks the rules end to end: every
// PSN is accepted by the receiver exactly once and acknowledged to the
// sender exactly once, whatever the order of packets and ACKs.
func TestWindowsModel(t *testing.T) {
	for seed := range uint64(100) {
		r := rand.New(rand.NewPCG(seed, 7))
		size := 64 * (1 + r.IntN(3))
		start := r.Uint32()
		if seed%4 == 0 {
			start = 0xffffffff - uint32(r.IntN(300))
		}
		tx, rx := newTx(start, size), newRx(start, size)
		const total = 1000
		delivered := make([]int, total)
		acked := make([]int, total)
		type ack struct {
			bsn uint32
			bm  wire.Bitmap128
			ext bool
		}
		var net []uint32
		var acks []ack
		buf := make([]uint32, 0, 256)
		sent := 0
		for steps := 0; tx.bsn != start+total || sent < total; steps++ {
			if steps >= 200000 {
				t.Fatalf("seed %d: no progress: tx bsn %d nsn %d out %d rx bsn %d sent %d net %d acks %d", seed, tx.bsn-start, tx.nsn-start, tx.outstanding, rx.bsn-start, sent, len(net), len(acks))
			}
			switch r.IntN(4) {
			case 0: // send new PSNs while the window allows
				for sent < total && !tx.full() && r.IntN(4) != 0 {
					net = append(net, tx.assign())
					sent++
				}
			case 1: // retransmit something unacked
				if len(net) > size {
					continue
				}
				tx.unacked(uint32(size), func(psn uint32) bool {
					if r.IntN(3) == 0 {
						net = append(net, psn)
					}
					return true
				})
			case 2: // deliver a random packet (or lose it)
				if len(net) == 0 {
					continue
				}
				i := r.IntN(len(net))
				psn := net[i]
				net[i] = net[len(net)-1]
				net = net[:len(net)-1]
				if r.IntN(10) == 0 {
					continue
				}
				switch c, off := rx.classify(psn); c {
				case rxNew:
					delivered[psn-start]++
					rx.accept(off)
				case rxStale, rxDuplicate:
				case rxBeyond:
					t.Fatalf("seed %d: PSN %d beyond a window the sender respects", seed, psn)
				}
				a := ack{bsn: rx.bsn}
				if rx.holes() && r.IntN(2) == 0 {
					a.ext, a.bm = true, rx.got.wireBits()
				}
				acks = append(acks, a)
			case 3: // deliver a random ACK (or lose it)
				if len(acks) == 0 {
					continue
				}
				i := r.IntN(len(acks))
				a := acks[i]
				acks[i] = acks[len(acks)-1]
				acks = acks[:len(acks)-1]
				if r.IntN(10) == 0 {
					continue
				}
				var bm *wire.Bitmap128
				if a.ext {
					bm = &a.bm
				}
				newly, res := tx.ack(a.bsn, bm, buf[:0])
				if res == ackForged {
					t.Fatalf("seed %d: honest ACK taken for forged", seed)
				}
				for _, psn := range newly {
					acked[psn-start]++
					if delivered[psn-start] != 1 {
						t.Fatalf("seed %d: PSN %d acknowledged before it was received", seed, psn)
					}
				}
				if !seqLEQ(tx.bsn, tx.nsn) || tx.acked.anyAtOrAbove(tx.inFlight()) || int(tx.inFlight())-tx.acked.count() != int(tx.outstanding) {
					t.Fatalf("seed %d: window inconsistent: bsn %d nsn %d outstanding %d", seed, tx.bsn, tx.nsn, tx.outstanding)
				}
			}
			if sent == total && tx.bsn != start+total && len(net) == 0 && len(acks) == 0 {
				// Everything in flight was lost: a timeout resends.
				tx.unacked(uint32(size), func(psn uint32) bool { net = append(net, psn); return true })
			}
		}
		for i := range total {
			require.Equal(t, 1, delivered[i], "seed %d: PSN offset %d delivered %d times", seed, i, delivered[i])
			require.Equal(t, 1, acked[i], "seed %d: PSN offset %d acknowledged %d times", seed, i, acked[i])
		}
	}
}
