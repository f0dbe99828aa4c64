package app

import (
	"fmt"

	"github.com/peregrine-net/peregrine/app/txnload"
	"github.com/peregrine-net/peregrine/core/rt/txn"
)

// addTransportSends adds the two-sided part of a transport endpoint: an
// initiator's Send load (its completions come through the Load) or a
// target's WQE poster, on the endpoint's loop.
func (p *Pipeline) addTransportSends(t *Transport, o TransportOptions) error {
	switch {
	case o.Role == "initiator" && o.Sends > 0:
		s, err := txnload.NewSends(txnload.SendOptions{Initiator: t.Endpoint, Peer: o.Peer, Window: o.Sends, Sizes: o.Sizes})
		if err != nil {
			return &FieldError{"Sends", -1, err}
		}
		t.Sends, t.Load.Sends = s, s
		return p.Add(Stage{Stage: s, Loop: o.Loop})
	case o.Role == "target" && o.PostRecv > 0:
		if o.PostRecv > txn.DefaultRecvDepth {
			return &FieldError{"PostRecv", -1, fmt.Errorf("%d: use 1..%d (the receive queue's depth)", o.PostRecv, txn.DefaultRecvDepth)}
		}
		t.Recv = txnload.NewRecvPoster(t.Endpoint, o.Sizes, o.PostRecv)
		return p.Add(Stage{Stage: t.Recv, Loop: o.Loop})
	}
	return nil
}

// onConnEvent is the endpoint's connection-event handler: the first
// failure is kept for ConnErr, and a target's WQE poster learns of each
// connection.
func (t *Transport) onConnEvent(ev txn.ConnEvent) {
	if ev.Kind == txn.ConnFailed && ev.Err != nil {
		err := ev.Err
		t.connErr.CompareAndSwap(nil, &err)
	}
	if t.Recv != nil {
		t.Recv.OnConnEvent(ev)
	}
	if t.Load == nil {
		t.conns.onEvent(ev) // the target's Sampler
	}
}
