package rt

import (
	"fmt"

	"github.com/peregrine-net/peregrine/cam"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/wire"
)

// CheckWindows is CheckInvariants without the per-packet CAM cross-check:
// O(connections × window/64), cheap enough for every Poll of a simulation.
func (e *Endpoint) CheckWindows() error { return e.checkInvariants(false) }

// CheckInvariants verifies the endpoint's state and returns the first
// inconsistency: per connection and window BSN ≤ NSN within the window
// size, no bitmap bit at or past NSN, bit 0 (BSN) clear, the outstanding
// count equal to the unacknowledged PSNs; every unacknowledged PSN in the
// CAM with a retained frame, and the CAM holding exactly the outstanding
// packets. Simulations call it after every Poll; it is O(connections ×
// window) and allocates only to describe a failure. Call it on the polling
// goroutine.
func (e *Endpoint) CheckInvariants() error { return e.checkInvariants(true) }

func (e *Endpoint) checkInvariants(deep bool) error {
	size := uint32(e.opts.WindowSize)
	total := 0
	free := 0
	for i := range e.conns {
		c := &e.conns[i]
		if c.state == StateFree {
			free++
			continue
		}
		if e.layout.index(c.localCID) != uint32(i) {
			return fmt.Errorf("conn %d: CID %#x does not name its slot", i, c.localCID)
		}
		for k := range 2 {
			tw := &c.tx[k]
			fl := tw.inFlight()
			if fl > size {
				return fmt.Errorf("conn %#x %v: tx BSN %d NSN %d span %d > window %d", c.localCID, wire.Window(k+1), tw.bsn, tw.nsn, fl, size)
			}
			if tw.acked.anyAtOrAbove(fl) {
				return fmt.Errorf("conn %#x %v: tx bitmap has bits at or past NSN (BSN %d NSN %d)", c.localCID, wire.Window(k+1), tw.bsn, tw.nsn)
			}
			if fl > 0 && tw.acked.has(0) {
				return fmt.Errorf("conn %#x %v: tx bit 0 (BSN %d) set", c.localCID, wire.Window(k+1), tw.bsn)
			}
			if int(tw.outstanding) != int(fl)-tw.acked.count() {
				return fmt.Errorf("conn %#x %v: outstanding %d but %d PSNs unacknowledged", c.localCID, wire.Window(k+1), tw.outstanding, int(fl)-tw.acked.count())
			}
			var bad error
			limit := fl
			if !deep {
				limit = 0
			}
			tw.unacked(limit, func(psn uint32) bool {
				idx, ok := e.retx.Lookup(cam.TransportKey{CID: c.localCID, Win: uint32(k + 1), PSN: psn})
				if !ok {
					bad = fmt.Errorf("conn %#x %v: unacknowledged PSN %d not in the CAM", c.localCID, wire.Window(k+1), psn)
					return false
				}
				x := &e.ctx[idx]
				if x.conn != c.idx || x.psn != psn || x.win != wire.Window(k+1) || x.frame == mbuf.NoHandle {
					bad = fmt.Errorf("conn %#x %v: PSN %d context %d holds conn %d win %v PSN %d frame %d", c.localCID, wire.Window(k+1), psn, idx, x.conn, x.win, x.psn, x.frame)
					return false
				}
				return true
			})
			if bad != nil {
				return bad
			}
			total += int(tw.outstanding)
			if c.rx[k].got.has(0) {
				return fmt.Errorf("conn %#x %v: rx bit 0 (BSN %d) set", c.localCID, wire.Window(k+1), c.rx[k].bsn)
			}
		}
	}
	if free != len(e.freeConns) {
		return fmt.Errorf("%d free slots but %d on the free list", free, len(e.freeConns))
	}
	if total != e.retx.Len() {
		return fmt.Errorf("CAM holds %d entries but %d packets are outstanding", e.retx.Len(), total)
	}
	if n := e.newQ.len() + e.retxQ.len(); n > total {
		return fmt.Errorf("%d contexts queued but %d outstanding", n, total)
	}
	return nil
}
