package rt

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/wire"
)

// forgeFirst returns a tap that replaces the first frame of type typ
// with a copy edited by edit (its tag, if any, kept), as a middlebox
// rewriting it in flight would; later frames pass.
func (h *harness) forgeFirst(p *tapPort, typ wire.Type, edit func(hd *wire.Header)) func(f *wire.Frame) int {
	done := false
	return func(f *wire.Frame) int {
		if done || f.Header.Type != typ {
			return 1
		}
		done = true
		hd := f.Header
		edit(&hd)
		h.injectFrom(p, &f.Addrs, &hd, nil)
		return 0
	}
}

// establishedB is b's handle of its latest established connection.
func (h *harness) establishedB() *Conn {
	var cb *Conn
	for _, ev := range h.evB {
		if ev.Kind == EventEstablished {
			cb = ev.Conn
		}
	}
	return cb
}

// checkFlows sends a few pushes each way on an established pair and
// runs until both sides delivered them all.
func (h *harness) checkFlows(ca, cb *Conn) {
	h.t.Helper()
	nb, na := len(h.gotB), len(h.gotA)
	h.sendAll(ca, wire.TypePushUnsolicitedData, 0, 4, 64)
	h.sendAll(cb, wire.TypePushUnsolicitedData, 100, 4, 64)
	h.run(func() bool { return len(h.gotB) == nb+4 && len(h.gotA) == na+4 && h.quiet() }, time.Second)
}

// openRefused opens from a to b (early if asked) and runs until a
// counts a bad seal or establishes: it must not have established.
func (h *harness) openRefused(early bool, what string) *Conn {
	h.t.Helper()
	open := h.a.Open
	if early {
		open = h.a.OpenEarly
	}
	ca, err := open(PeerAddr{MAC: macOf(h.pb), IP: ipB})
	require.NoError(h.t, err)
	if early {
		h.sendAll(ca, wire.TypePushUnsolicitedData, 0, 2, 64)
	}
	h.runFor(func() bool { return h.a.Stats().RxBadSeal > 0 || ca.State() == StateEstablished }, 10*time.Millisecond)
	require.NotEqual(h.t, StateEstablished, ca.State(), "the initiator established on %s", what)
	require.Positive(h.t, h.a.Stats().RxBadSeal)
	return ca
}

// A ConnOpen with one field rewritten in flight sets up the target's
// half with that field; its ConnAccept, tagged under the key the
// ConnOpen announced and bound to the ConnOpen as the target saw it,
// fails the initiator's check (RxBadSeal): the initiator does not
// establish on it. Its resent ConnOpen replaces the forged half, and the
// connection comes up with what the initiator sent. Before, the
// initiator established on the forged setup.
func TestSealBindsConnOpen(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(hd *wire.Header)
	}{
		{"request BSN", func(hd *wire.Header) { hd.ReqEBSN += 1000 }},
		{"data BSN", func(hd *wire.Header) { hd.DataEBSN -= 77 }},
		{"seal key", func(hd *wire.Header) { hd.Ext.SealKey[0] ^= 1 }},
		{"request number", func(hd *wire.Header) { hd.RSN = 9 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			h.pa.tap = h.forgeFirst(h.pa, wire.TypeConnOpen, tc.edit)
			ca := h.openRefused(false, "a forged ConnOpen's accept")
			h.run(func() bool { return ca.State() == StateEstablished && h.establishedB() != nil }, time.Second)
			h.checkFlows(ca, h.establishedB())
			require.Zero(t, h.b.Stats().RxBadSeal, "b checks a's packets with a's real key")
		})
	}
}

// A ConnAccept with one field rewritten in flight fails its tag: the
// initiator does not take the forged BSNs, CID, key or echo, and
// establishes on the target's resent ConnAccept. Before, ConnAccept
// carried no tag and the initiator took whatever it said.
func TestSealTagsConnAccept(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(hd *wire.Header)
	}{
		{"request BSN", func(hd *wire.Header) { hd.ReqEBSN += 1000 }},
		{"data BSN", func(hd *wire.Header) { hd.DataEBSN ^= 0x10 }},
		{"source CID", func(hd *wire.Header) { hd.Ext.SourceCID ^= 0x100 }},
		{"seal key", func(hd *wire.Header) { hd.Ext.SealKey[1] ^= 4 }},
		{"echo", func(hd *wire.Header) { hd.TxEcho -= 5000 }},
		{"tag stripped", func(hd *wire.Header) { hd.Ext.Present &^= wire.ExtSeal }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			h.pb.tap = h.forgeFirst(h.pb, wire.TypeConnAccept, tc.edit)
			ca := h.openRefused(false, "a forged ConnAccept")
			require.Equal(t, uint64(1), h.a.Stats().RxBadSeal)
			h.run(func() bool { return ca.State() == StateEstablished && h.establishedB() != nil }, time.Second)
			h.checkFlows(ca, h.establishedB())
			require.Zero(t, h.a.Stats().RxBadSeal+h.b.Stats().RxBadSeal-1)
		})
	}
}

// The early (0-RTT) ConnOpen's own fields are bound too: a target that
// took a rewritten one answers with a ConnAccept the initiator refuses,
// so the initiator never completes an early push on the forged setup.
func TestSealBindsEarlyConnOpen(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(hd *wire.Header)
	}{
		{"first request PSN", func(hd *wire.Header) { hd.PSN += 500 }},
		{"first data PSN", func(hd *wire.Header) { hd.Offset -= 3 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			h.pa.tap = h.forgeFirst(h.pa, wire.TypeConnOpen, tc.edit)
			acked := 0
			setAcked(h.a, func(*Conn, wire.Window, uint32, uint64) { acked++ })
			h.openRefused(true, "a forged early ConnOpen's accept")
			require.Zero(t, acked, "no early push completes on the forged setup")
		})
	}
}
