package app

import (
	"github.com/peregrine-net/peregrine/app/txnload"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/rt/txn"
)

// addDemoSends adds the transport demo's two-sided part (docs/sends.md): an
// unordered connection of Sends with a 16-bit delivery index, which the
// target places straight into the receive WQEs it keeps posted, checking
// that WQE k holds Send k byte for byte. The Send load runs on the
// initiator's loop (the Load hands it its completions), the WQE poster on
// the target's.
func (p *Pipeline) addDemoSends(d *TransportDemo, peer rt.PeerAddr, window int) error {
	s, err := txnload.NewSends(txnload.SendOptions{Initiator: d.Initiator, Target: d.Target, Peer: peer, Window: max(2, window/4)})
	if err != nil {
		return err
	}
	d.Sends, d.Load.Sends = s, s
	for _, st := range []Stage{{Stage: s, Loop: 0}, {Stage: s.Recv, Loop: p.Lcores() - 1}} {
		if err := p.Add(st); err != nil {
			return err
		}
	}
	return nil
}

// onTargetConn is the target's connection-event handler: the WQE poster
// learns of each connection.
func (d *TransportDemo) onTargetConn(ev txn.ConnEvent) {
	if d.Sends != nil {
		d.Sends.Recv.OnConnEvent(ev)
	}
}
