package app

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/core/qpx"
	"github.com/peregrine-net/peregrine/core/roce"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/rt/txn"
	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/pmd/mem"
)

// demoQPNs records the global QP numbers (the target's and the
// initiator's) of the connections the target's ULP saw requests on: the
// names the host uses. A fixed table, no allocation per request; note
// runs on the target's loop, String after the loops stopped.
type demoQPNs struct {
	mu    sync.Mutex
	pairs [16][2]uint32
	n     int
}

func (q *demoQPNs) note(r *txn.Request) {
	local, peer := r.Conn.QPN(), r.Conn.PeerQPN()
	if local == 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for i := range q.n {
		if q.pairs[i][0] == local {
			return
		}
	}
	if q.n < len(q.pairs) {
		q.pairs[q.n] = [2]uint32{local, peer}
		q.n++
	}
}

func (q *demoQPNs) String() string {
	q.mu.Lock()
	defer q.mu.Unlock()
	var b strings.Builder
	for i := range q.n {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%#06x<-%#06x", q.pairs[i][0], q.pairs[i][1])
	}
	return b.String()
}

// demoQPN is the transport option the demo's endpoint called name gets:
// global QP numbers (docs/qp-translation.md) when TransportDemoOptions.GlobalQPNs asks
// for them. The target's rotation starts elsewhere, so that the two ends'
// numbers are told apart in the summary: each side names its QPs itself.
func (o *TransportDemoOptions) demoQPN(name string) rt.QPNOptions {
	q := rt.QPNOptions{Enabled: o.GlobalQPNs}
	if name == "target" {
		q.Start = 0x10000
	}
	return q
}

// QPNStats returns both endpoints' global-QPN counters (zero when the
// demo runs without global QPNs).
func (d *TransportDemo) QPNStats() (initiator, target rt.QPNStats) {
	return d.Initiator.QPNStats(), d.Target.QPNStats()
}

// QPNCheck is the demo's verdict on QP translation: ok when every packet's
// global QPNs translated to its own connection (nothing dropped for a
// retired, unknown, misrouted, wrong-source or missing number), with what
// to print.
func (d *TransportDemo) QPNCheck() (ok bool, what string) {
	i, t := d.QPNStats()
	n := i.Dropped() + t.Dropped()
	return n == 0, fmt.Sprintf("every packet's global QPNs translated to its own connection (%d dropped)", n)
}

// QPNSummary describes the demo's QP translation on one line: how many
// global QPNs each side opened and retired, how many packets each side
// translated through its CAM, and the drops by reason.
func (d *TransportDemo) QPNSummary() string {
	i, t := d.QPNStats()
	if i.CAM.Slots == 0 {
		return "global QPNs: off"
	}
	return fmt.Sprintf("global QPNs: initiator opened %d (live %d of %d contexts), target opened %d (live %d); translated %d packets through the CAMs; dropped: retired %d, unknown %d, misrouted %d, wrong source %d, missing %d",
		i.CAM.Opened, i.CAM.Live, i.CAM.Slots, t.CAM.Opened, t.CAM.Live,
		i.CAM.Translated+t.CAM.Translated,
		i.DropRetired+t.DropRetired, i.DropUnknown+t.DropUnknown, i.DropMisrouted+t.DropMisrouted,
		i.DropSource+t.DropSource, i.DropMissing+t.DropMissing) +
		fmt.Sprintf("\n  the target's ULP saw requests on QPNs (target<-initiator): %s", d.qpns.String())
}

// RoCEDemoOptions configures AddRoCEDemo: the RoCEv2 QP-translation stage
// (core/roce) between a simulated network of requesters and a host that
// answers, over mem pairs, with QPs closed and reopened as it runs.
type RoCEDemoOptions struct {
	// Slots is the number of local QP contexts (default 8); every slot
	// holds a live QP throughout.
	Slots int
	// ChurnEvery is how many frames the network sends between two QP
	// churns (close one, open another at once: retire, don't wait;
	// default 512). Each closed QP still has frames in flight, sent after
	// it closed: stale packets the stage must drop.
	ChurnEvery int
	// Payload is each request's payload in bytes (default 64).
	Payload int
	// Burst is the frames per burst (default 32).
	Burst int
	// Capture, when set, mirrors the stage's network port, both
	// directions (requests in, ACKs out), to this pcap file.
	Capture string
}

// RoCEDemo is the RoCE demo's stages.
type RoCEDemo struct {
	Stage *roce.Stage
	Net   *RoCEDemoNet
	Host  *RoCEDemoHost
}

// RoCEDemoNet plays the network: requesters sending RDMA SENDs to the
// table's QPs by their global numbers, with in-order PSNs, churning a QP
// every ChurnEvery frames and then sending the closed QP's last frames
// (stale), and reading the host's ACKs (global numbers again).
type RoCEDemoNet struct {
	o                                      RoCEDemoOptions
	tb                                     *qpx.Table
	pool                                   *mbuf.Pool
	cache                                  *mbuf.Cache
	port                                   port.Port
	tmpl                                   []byte
	view                                   wire.RoCEView
	live                                   []roceDemoQP
	stale                                  []roceDemoQP // closed, frames still to send
	next                                   int
	since                                  int
	bufs                                   []mbuf.Handle
	qpns                                   []uint32 // the QPN each frame of the burst went to
	sent, staleSent, churns, acks, acksBad atomic.Uint64
}

type roceDemoQP struct{ qpn, psn uint32 }

// RoCEDemoNetStats are the network side's counters.
type RoCEDemoNetStats struct {
	Sent, StaleSent, Churns, Acks, AcksBad uint64
}

// Stats may be read from any goroutine.
func (n *RoCEDemoNet) Stats() RoCEDemoNetStats {
	return RoCEDemoNetStats{Sent: n.sent.Load(), StaleSent: n.staleSent.Load(), Churns: n.churns.Load(), Acks: n.acks.Load(), AcksBad: n.acksBad.Load()}
}

// Name implements lcore.Stage.
func (n *RoCEDemoNet) Name() string { return "roce-demo-net" }

// peerOf is the global number the demo gives a QP's remote requester.
func peerOf(qpn uint32) uint32 { return qpn ^ 0x800000 }

func (n *RoCEDemoNet) open() error {
	q, _, err := n.tb.Open(qpx.Context{PKey: 0xffff, Access: qpx.AccessAll})
	if err != nil {
		return err
	}
	l, _ := n.tb.Lookup(q)
	n.tb.Context(l).DestQPN = peerOf(q)
	n.live = append(n.live, roceDemoQP{qpn: q})
	return nil
}

// Poll reads the ACKs that came back, then sends one burst.
func (n *RoCEDemoNet) Poll(clock.Time) int {
	work := 0
	for {
		k := n.port.RxBurst(0, n.bufs)
		if k == 0 {
			break
		}
		work += k
		for _, h := range n.bufs[:k] {
			var v wire.RoCEView
			d := n.pool.Data(h)
			if wire.ParseRoCE(d, wire.RoCEv2Port, &v) == nil && v.CheckICRC(d) && v.DestQP&0x800000 != 0 {
				n.acks.Add(1)
			} else {
				n.acksBad.Add(1)
			}
		}
		n.cache.Free(n.bufs[:k])
	}
	k := n.cache.AllocBurst(n.bufs)
	for i, h := range n.bufs[:k] {
		var q *roceDemoQP
		stale := false
		if len(n.stale) > 0 && i == 0 {
			q, stale = &n.stale[len(n.stale)-1], true
		} else {
			q = &n.live[n.next%len(n.live)]
			n.next++
		}
		d := n.pool.Append(h, len(n.tmpl))
		copy(d, n.tmpl)
		n.view.SetDestQP(d, q.qpn)
		d[n.view.BTHOff+9], d[n.view.BTHOff+10], d[n.view.BTHOff+11] = byte(q.psn>>16), byte(q.psn>>8), byte(q.psn)
		q.psn = qpx.AddPSN(q.psn, 1)
		d[n.view.DataOff], d[n.view.DataOff+1], d[n.view.DataOff+2], d[n.view.DataOff+3] = byte(q.qpn>>24), byte(q.qpn>>16), byte(q.qpn>>8), byte(q.qpn)
		n.view.PutICRC(d)
		n.qpns[i] = q.qpn
		if stale {
			n.staleSent.Add(1)
			n.stale = n.stale[:len(n.stale)-1]
		}
	}
	sent := n.port.TxBurst(0, n.bufs[:k])
	n.cache.Free(n.bufs[sent:k])
	n.sent.Add(uint64(sent))
	n.since += sent
	if n.since >= n.o.ChurnEvery {
		// Close the oldest QP (its number is retired at once) and open
		// another in its slot: no Time-Wait. Two of its frames are still
		// to come, as if in flight.
		n.since = 0
		old := n.live[0]
		n.live = n.live[1:]
		if n.tb.Close(old.qpn) == nil && n.open() == nil {
			n.stale = append(n.stale, old, old)
			n.churns.Add(1)
			// Its frames of this burst are in flight too: the stage
			// has not taken them yet, and will find the number retired.
			for _, q := range n.qpns[:sent] {
				if q == old.qpn {
					n.staleSent.Add(1)
				}
			}
		}
	}
	return work + k
}

// Stop frees nothing it holds between polls; it flushes its cache.
func (n *RoCEDemoNet) Stop(clock.Time) { n.cache.Flush() }

// RoCEDemoHost plays the host: it takes each request on its local QP
// number, checks that the QP living in that context is the one the
// request was sent to (its payload names the global number), and answers
// with an ACK on the same local number.
type RoCEDemoHost struct {
	tb                  *qpx.Table
	pool                *mbuf.Pool
	cache               *mbuf.Cache
	port                port.Port
	bufs                []mbuf.Handle
	view                wire.RoCEView
	got, wrong, refused atomic.Uint64
}

// RoCEDemoHostStats are the host's counters: requests received, requests
// whose local context held another QP (a stale packet that reached a new
// QP: must stay 0), ACKs the port refused.
type RoCEDemoHostStats struct{ Got, Wrong, Refused uint64 }

// Stats may be read from any goroutine.
func (h *RoCEDemoHost) Stats() RoCEDemoHostStats {
	return RoCEDemoHostStats{Got: h.got.Load(), Wrong: h.wrong.Load(), Refused: h.refused.Load()}
}

// Name implements lcore.Stage.
func (h *RoCEDemoHost) Name() string { return "roce-demo-host" }

// Poll answers one burst.
func (h *RoCEDemoHost) Poll(clock.Time) int {
	k := h.port.RxBurst(0, h.bufs)
	if k == 0 {
		return 0
	}
	v := &h.view
	for _, b := range h.bufs[:k] {
		d := h.pool.Data(b)
		if wire.ParseRoCE(d, wire.RoCEv2Port, v) != nil || v.DataOff+4 > v.ICRCOff {
			h.wrong.Add(1)
			continue
		}
		h.got.Add(1)
		tag := uint32(d[v.DataOff])<<24 | uint32(d[v.DataOff+1])<<16 | uint32(d[v.DataOff+2])<<8 | uint32(d[v.DataOff+3])
		if l := int(v.DestQP); l >= h.tb.Slots() || h.tb.QPN(l) != tag {
			h.wrong.Add(1)
		}
		// The request becomes its ACK, in place: opcode, AETH (ACK, MSN
		// = PSN), a new ICRC; the destination QP stays the local number.
		d[v.BTHOff] = 0x11
		d[v.DataOff], d[v.DataOff+1], d[v.DataOff+2], d[v.DataOff+3] = 0x1f, byte(v.PSN>>16), byte(v.PSN>>8), byte(v.PSN)
		v.Opcode = 0x11
		v.PutICRC(d)
	}
	sent := h.port.TxBurst(0, h.bufs[:k])
	if sent < k {
		h.refused.Add(uint64(k - sent))
		h.cache.Free(h.bufs[sent:k])
	}
	return k
}

// Stop flushes the host's cache.
func (h *RoCEDemoHost) Stop(clock.Time) { h.cache.Flush() }

// AddRoCEDemo adds the RoCE demo to p, which must have no ports: it makes
// two mem pairs (network and host) and adopts them, and runs the network,
// the stage and the host on loop 0 in that order, so that the table the
// network churns is the stage's, on one goroutine.
func (p *Pipeline) AddRoCEDemo(o RoCEDemoOptions) (*RoCEDemo, error) {
	if len(p.ports) != 0 {
		return nil, &FieldError{"Ports", -1, fmt.Errorf("the RoCE demo makes its own mem ports: give none, not %d", len(p.ports))}
	}
	if o.Slots == 0 {
		o.Slots = 8
	}
	if o.ChurnEvery == 0 {
		o.ChurnEvery = 512
	}
	if o.Payload == 0 {
		o.Payload = 64
	}
	if o.Burst == 0 {
		o.Burst = 32
	}
	if o.Payload < 4 || o.Payload > 1024 || o.Burst < 1 || o.Burst > 256 || o.ChurnEvery < 1 {
		return nil, &FieldError{"Payload", -1, fmt.Errorf("payload %d (4..1024), burst %d (1..256), churn every %d (≥1)", o.Payload, o.Burst, o.ChurnEvery)}
	}
	tb, err := qpx.New(qpx.Options{Slots: o.Slots, Name: "roce demo qpx"})
	if err != nil {
		return nil, &FieldError{"Slots", -1, err}
	}
	netPeer, net, err := mem.NewPair(p.pool, mem.PairOptions{Name: "roce-net"})
	if err != nil {
		return nil, err
	}
	host, hostPeer, err := mem.NewPair(p.pool, mem.PairOptions{Name: "roce-host"})
	if err != nil {
		return nil, errors.Join(err, netPeer.Close(), net.Close())
	}
	var netPort port.Port = net
	if netPort, err = p.captureDemo(o.Capture, net); err != nil {
		return nil, errors.Join(err, netPeer.Close(), host.Close(), hostPeer.Close())
	}
	for _, pt := range []port.Port{netPeer, netPort, host, hostPeer} {
		p.AddPort(pt)
	}
	spec := roce.FrameSpec{
		Addrs: wire.Addrs{SrcMAC: [6]byte{2, 0, 0, 0, 0, 1}, DstMAC: [6]byte{2, 0, 0, 0, 0, 2},
			SrcIP: netip.MustParseAddr("198.18.0.1"), DstIP: netip.MustParseAddr("198.18.0.2"), SrcPort: 49152, NoUDPChecksum: true},
		BTH:     wire.BTH{Opcode: 0x04, PKey: 0xffff, AckReq: true},
		Payload: make([]byte, o.Payload),
	}
	tmpl := make([]byte, 2048)
	n, err := spec.Encode(tmpl)
	if err != nil {
		return nil, err
	}
	cache := p.Cache(0)
	nd := &RoCEDemoNet{o: o, tb: tb, pool: p.pool, cache: cache, port: netPeer, tmpl: tmpl[:n], bufs: make([]mbuf.Handle, o.Burst), qpns: make([]uint32, o.Burst)}
	if err := wire.ParseRoCE(nd.tmpl, wire.RoCEv2Port, &nd.view); err != nil {
		return nil, err
	}
	for range o.Slots {
		if err := nd.open(); err != nil {
			return nil, err
		}
	}
	st, err := roce.New(roce.Options{Net: netPort, Host: host, Pool: p.pool, Cache: cache, Table: tb, Burst: o.Burst})
	if err != nil {
		return nil, err
	}
	hd := &RoCEDemoHost{tb: tb, pool: p.pool, cache: cache, port: hostPeer, bufs: make([]mbuf.Handle, o.Burst)}
	for _, s := range []Stage{{Stage: nd, Loop: 0}, {Stage: st, Loop: 0}, {Stage: hd, Loop: 0}} {
		if err := p.Add(s); err != nil {
			return nil, err
		}
	}
	return &RoCEDemo{Stage: st, Net: nd, Host: hd}, nil
}
