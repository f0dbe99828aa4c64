package rt

import (
	"math/bits"

	"github.com/peregrine-net/peregrine/core/wire"
)

// rxWindow is one receive sliding window: bsn is the oldest PSN not yet
// received (the expected BSN announced to the sender), and bit n of got
// stands for PSN bsn+n (set = received). Bit 0 is never set: receiving PSN
// bsn advances bsn past every received bit.
type rxWindow struct {
	bsn uint32
	got snb
}

// rxClass is what the receiver rules make of an arriving PSN.
type rxClass uint8

const (
	rxNew       rxClass = iota // inside the window, first arrival: deliver it
	rxDuplicate                // inside the window, already received: drop
	rxStale                    // before the window (PSN < BSN): drop, ACK the current BSN
	rxBeyond                   // past the window: drop
)

// classify applies the receiver rules to psn without changing the window,
// and returns the PSN's offset from bsn for accept.
func (w *rxWindow) classify(psn uint32) (rxClass, uint32) {
	off := psn - w.bsn
	switch {
	case int32(off) < 0:
		return rxStale, 0
	case off >= w.got.size():
		return rxBeyond, 0
	case w.got.has(off):
		return rxDuplicate, off
	}
	return rxNew, off
}

// accept marks the PSN at offset off (from classify, rxNew) received and,
// when it is the base, advances bsn past every received PSN. It returns how
// far bsn moved.
func (w *rxWindow) accept(off uint32) uint32 {
	if off == 0 && w.got.empty() {
		w.bsn++ // the in-order packet with nothing received past it
		return 1
	}
	w.got.set(off)
	if off != 0 {
		return 0
	}
	k := w.got.trailingOnes()
	w.got.shift(k)
	w.bsn += k
	return k
}

// holes reports whether any PSN past bsn was received, i.e. whether the
// bitmap says more than the cumulative BSN (an extended ACK is worth it).
func (w *rxWindow) holes() bool { return !w.got.empty() }

// txWindow is one transmit sliding window: nsn is the next PSN to assign,
// bsn the oldest PSN not yet acknowledged, and bit n of acked stands for
// PSN bsn+n (set = acknowledged). PSNs in [bsn, nsn) are in flight;
// outstanding counts those not yet acknowledged.
type txWindow struct {
	bsn, nsn    uint32
	outstanding uint32
	acked       snb
}

// inFlight returns nsn - bsn: the PSNs the window spans.
func (w *txWindow) inFlight() uint32 { return w.nsn - w.bsn }

// full reports whether assigning another PSN would run past the window.
func (w *txWindow) full() bool { return w.inFlight() >= w.acked.size() }

// assign takes the next PSN.
func (w *txWindow) assign() uint32 {
	psn := w.nsn
	w.nsn++
	w.outstanding++
	return psn
}

// reset starts the window at psn with nothing in flight.
func (w *txWindow) reset(psn uint32) {
	w.bsn, w.nsn, w.outstanding = psn, psn, 0
	clear(w.acked)
}

// ackResult says what an acknowledgement did to a transmit window.
type ackResult uint8

const (
	ackApplied ackResult = iota // accepted (it may have acknowledged nothing new)
	ackStale                    // its BSN precedes ours: ignored
	ackForged                   // it acknowledges PSNs never sent: ignored
)

// check applies the sender rules to an acknowledgement of this window
// without changing it: its cumulative BSN ackBSN (every PSN before it
// received) and, for an extended ACK, the receiver's bitmap (bit n = PSN
// ackBSN+n received). A BSN that precedes ours is stale (an old ACK,
// reordered: honest, ignored). It is forged (no honest receiver sends
// it, and it is ignored whole) when it acknowledges a PSN at or past nsn
// (never sent), when its bitmap's bit 0 is set (the bitmap says received
// the very PSN the BSN says is still awaited), or when its BSN stops at a
// PSN an earlier acknowledgement already reported received (a receiver
// never un-receives a packet).
func (w *txWindow) check(ackBSN uint32, bitmap *wire.Bitmap128) ackResult {
	d := ackBSN - w.bsn
	if int32(d) < 0 {
		return ackStale
	}
	flight := w.inFlight()
	if d > flight || (d < flight && d < w.acked.size() && w.acked.has(d)) {
		return ackForged
	}
	if bitmap != nil {
		rcv := fromWire(bitmap)
		if rcv[0]&1 != 0 {
			return ackForged
		}
		// Bits for PSNs at or past nsn (offset flight-d from ackBSN) or past
		// our bitmap are lies.
		limit := min(flight-d, w.acked.size())
		for i := range 2 {
			if rcv[i]&^lowMask(i, limit) != 0 {
				return ackForged
			}
		}
	}
	return ackApplied
}

// ack applies an acknowledgement of this window (see check: a stale or
// forged one changes nothing and says so). Otherwise bsn moves to ackBSN,
// the bitmap is ORed in, and bsn moves on past any acknowledged prefix.
// Every PSN acknowledged for the first time is appended to newly, which
// is returned; the caller retires them. newly needs room for inFlight()
// more PSNs.
func (w *txWindow) ack(ackBSN uint32, bitmap *wire.Bitmap128, newly []uint32) ([]uint32, ackResult) {
	if res := w.check(ackBSN, bitmap); res != ackApplied {
		return newly, res
	}
	d := ackBSN - w.bsn
	// Cumulative part: everything in [bsn, ackBSN) not yet acknowledged.
	for i := range w.acked {
		z := ^w.acked[i] & lowMask(i, d)
		for z != 0 {
			b := uint32(bits.TrailingZeros64(z))
			z &= z - 1
			newly = append(newly, w.bsn+uint32(i)*64+b)
		}
	}
	w.acked.shift(d)
	w.bsn = ackBSN
	if bitmap != nil {
		rcv := fromWire(bitmap)
		for i := 0; i < 2 && i < len(w.acked); i++ {
			fresh := rcv[i] &^ w.acked[i]
			w.acked[i] |= fresh
			for fresh != 0 {
				b := uint32(bits.TrailingZeros64(fresh))
				fresh &= fresh - 1
				newly = append(newly, w.bsn+uint32(i)*64+b)
			}
		}
	}
	w.outstanding = w.inFlight() - uint32(w.acked.count())
	return newly, ackApplied
}

// unacked calls fn for every PSN in [bsn, bsn+limit) not yet acknowledged,
// in order, until fn returns false. limit is capped at inFlight().
func (w *txWindow) unacked(limit uint32, fn func(psn uint32) bool) {
	limit = min(limit, w.inFlight())
	for i := range w.acked {
		z := ^w.acked[i] & lowMask(i, limit)
		for z != 0 {
			b := uint32(bits.TrailingZeros64(z))
			z &= z - 1
			if !fn(w.bsn + uint32(i)*64 + b) {
				return
			}
		}
	}
}
