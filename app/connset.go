package app

import (
	"time"

	"github.com/peregrine-net/peregrine/core/rt/txn"
)

// connSet is an endpoint's live connections as its connection events tell
// them, for a ConnSampler: a target's (it opens none itself) and an MCSQ
// initiator's DC connections (the engine opens and closes them). Events
// and the sampler both run on the goroutine that polls the endpoint, so
// it needs no lock.
type connSet struct {
	conns []*txn.Conn
}

// onEvent is called from the endpoint's Options.OnConnEvent.
func (s *connSet) onEvent(ev txn.ConnEvent) {
	if ev.Kind == txn.ConnEstablished {
		s.conns = append(s.conns, ev.Conn)
		return
	}
	s.prune(ev.Conn)
}

// prune drops gone and every connection no longer live (one whose
// close event did not come still leaves).
func (s *connSet) prune(gone *txn.Conn) {
	kept := s.conns[:0]
	for _, c := range s.conns {
		if c != gone && c.Live() {
			kept = append(kept, c)
		}
	}
	clear(s.conns[len(kept):])
	s.conns = kept
}

// list is the ConnSampler's source.
func (s *connSet) list() []*txn.Conn {
	s.prune(nil)
	return s.conns
}

// addSampler puts a ConnSampler of conns on loop (100ms period: metrics
// and the per-second lines read it).
func (p *Pipeline) addSampler(conns func() []*txn.Conn, loop int) (*ConnSampler, error) {
	s := NewConnSampler(conns, 100*time.Millisecond)
	if err := p.Add(Stage{Stage: s, Loop: loop}); err != nil {
		return nil, err
	}
	return s, nil
}

// addDemoSamplers samples the transport demo's initiator connections (the
// load's, on loopA) and target connections (as they connect, on loopB).
func (p *Pipeline) addDemoSamplers(d *TransportDemo, loopA, loopB int) (s [2]*ConnSampler, err error) {
	if s[0], err = p.addSampler(d.Load.Conns, loopA); err != nil {
		return s, err
	}
	s[1], err = p.addSampler(d.targetConns.list, loopB)
	return s, err
}
