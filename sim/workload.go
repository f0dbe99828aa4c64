package sim

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/wire"
)

// WorkloadConfig describes the traffic of a Workload.
type WorkloadConfig struct {
	// Conns is the number of connections a opens to b, ReverseConns the
	// number b opens to a.
	Conns, ReverseConns int
	// Packets is the number of packets each side sends on each connection.
	Packets int
	// MaxPayload bounds payloads: each is 12..MaxPayload bytes (default 256).
	MaxPayload int
	// PerPoll is the most packets one connection sends per Poll (default 8).
	PerPoll int
	// Gap paces senders: after each burst a sender waits a random time in
	// [0, Gap] (0: send whenever the window allows).
	Gap time.Duration
	// Seed seeds the traffic: types, windows, sizes, pacing.
	Seed uint64
	// AllowFailures accepts EventFailed (scenarios that kill the peer).
	AllowFailures bool
}

// payloadHeader: flow id (2), sequence (4), type (1), length check (1).
const payloadHeader = 8

// Workload sends traffic both ways on connections between a simulation's
// endpoints and checks every delivery: each packet is delivered exactly
// once, to the connection it was sent on, in the window and with the PSN
// Send returned, with its payload intact. It is a stage of the Sim.
type Workload struct {
	cfg   WorkloadConfig
	sim   *Sim
	rng   *rand.Rand
	eps   [2]*rt.Endpoint
	flows []*flow
	// opened are the connections the workload opened (it closes them).
	opened      []*rt.Conn
	established [2]int
	closed      [2]int
	abandoned   int
	delivered   int
	sent        int
	err         error
	buf         []byte
	now         clock.Time
}

type flow struct {
	id        int
	from      int // 0: a sends, 1: b sends
	conn      *rt.Conn
	plan      int
	sent      int
	psn       []uint32
	typ       []wire.Type
	got       []uint8
	abandoned []bool
	nextAt    clock.Time
}

// pickType draws a packet type: half request-window, half data-window.
func pickType(r *rand.Rand) wire.Type {
	request := [...]wire.Type{wire.TypePullRequest, wire.TypePushRequest, wire.TypePushUnsolicitedData}
	data := [...]wire.Type{wire.TypePullData, wire.TypePushGrant, wire.TypePushSolicitedData}
	t := request[r.IntN(3)]
	if r.IntN(2) == 0 {
		t = data[r.IntN(3)]
	}
	return t
}

// NewWorkload makes a workload the ULP of both of sim's endpoints and adds
// it as a stage. Call Open to start.
func NewWorkload(sim *Sim, cfg WorkloadConfig) *Workload {
	if cfg.MaxPayload < payloadHeader+4 {
		cfg.MaxPayload = 256
	}
	if cfg.PerPoll == 0 {
		cfg.PerPoll = 8
	}
	w := &Workload{cfg: cfg, sim: sim, rng: rand.New(rand.NewPCG(cfg.Seed, 0x5eed)), eps: [2]*rt.Endpoint{sim.A, sim.B}}
	w.buf = make([]byte, cfg.MaxPayload)
	for side := range 2 {
		for _, e := range sim.Side(side) {
			e.SetULP(workloadSide{w, side})
		}
	}
	sim.AddStage(w)
	return w
}

// Open opens the configured connections, round robin over each side's
// shards.
func (w *Workload) Open() error {
	for i := range w.cfg.Conns {
		as := w.sim.As
		c, err := as[i%len(as)].Open(w.sim.PeerB())
		if err != nil {
			return err
		}
		w.opened = append(w.opened, c)
	}
	for i := range w.cfg.ReverseConns {
		bs := w.sim.Bs
		c, err := bs[i%len(bs)].Open(w.sim.PeerA())
		if err != nil {
			return err
		}
		w.opened = append(w.opened, c)
	}
	return nil
}

// Err returns the first violation seen.
func (w *Workload) Err() error { return w.err }

func (w *Workload) violate(format string, args ...any) {
	if w.err == nil {
		w.err = fmt.Errorf(format, args...)
	}
}

func (w *Workload) event(side int, ev rt.Event) {
	switch ev.Kind {
	case rt.EventEstablished:
		w.established[side]++
		if w.cfg.Packets > 0 {
			n := w.cfg.Packets
			w.flows = append(w.flows, &flow{
				id: len(w.flows), from: side, conn: ev.Conn, plan: n,
				psn: make([]uint32, n), typ: make([]wire.Type, n), got: make([]uint8, n), abandoned: make([]bool, n),
			})
		}
	case rt.EventClosed:
		w.closed[side]++
	case rt.EventFailed:
		if !w.cfg.AllowFailures {
			w.violate("endpoint %s: connection %v failed: %v", w.eps[side].Name(), ev.Conn, ev.Err)
		}
	case rt.EventAbandoned:
		w.abandoned++
		for _, f := range w.flows {
			if f.conn != ev.Conn {
				continue
			}
			for seq := range f.sent {
				if f.psn[seq] == ev.PSN && f.typ[seq].Window() == ev.Window {
					f.abandoned[seq] = true
					return
				}
			}
		}
		w.violate("endpoint %s: abandoned PSN %d (%v) was never sent", w.eps[side].Name(), ev.PSN, ev.Window)
	case rt.EventNack:
		w.violate("endpoint %s: unexpected NACK %v", w.eps[side].Name(), ev.Nack.Code)
	}
}

// workloadSide is the ULP of one side's endpoint.
type workloadSide struct {
	w    *Workload
	side int
}

func (s workloadSide) Deliver(c *rt.Conn, h *wire.Header, p []byte) rt.Verdict {
	return s.w.deliver(s.side, c, h, p)
}
func (s workloadSide) Acked(*rt.Conn, wire.Window, uint32, uint64) {}
func (s workloadSide) Event(ev rt.Event)                           { s.w.event(s.side, ev) }

func (w *Workload) deliver(side int, c *rt.Conn, h *wire.Header, p []byte) rt.Verdict {
	name := w.eps[side].Name()
	if len(p) < payloadHeader {
		w.violate("endpoint %s: payload of %d bytes", name, len(p))
		return rt.Accept
	}
	id := int(binary.BigEndian.Uint16(p))
	seq := int(binary.BigEndian.Uint32(p[2:]))
	if id >= len(w.flows) {
		w.violate("endpoint %s: payload names flow %d of %d", name, id, len(w.flows))
		return rt.Accept
	}
	f := w.flows[id]
	switch {
	case f.from == side:
		w.violate("endpoint %s: got its own flow %d", name, id)
	case seq >= f.sent:
		w.violate("endpoint %s: flow %d seq %d never sent", name, id, seq)
	case c.PeerCID() != f.conn.LocalCID() || c.LocalCID() != f.conn.PeerCID():
		w.violate("endpoint %s: flow %d delivered on connection %#x/%#x, sent on %#x/%#x", name, id, c.LocalCID(), c.PeerCID(), f.conn.PeerCID(), f.conn.LocalCID())
	case h.Type != f.typ[seq] || h.PSN != f.psn[seq]:
		w.violate("endpoint %s: flow %d seq %d arrived as %v PSN %d, sent as %v PSN %d", name, id, seq, h.Type, h.PSN, f.typ[seq], f.psn[seq])
	case p[6] != byte(h.Type) || int(p[7]) != len(p)&0xff || !patternOK(p, id, seq):
		w.violate("endpoint %s: flow %d seq %d payload corrupted", name, id, seq)
	default:
		f.got[seq]++
		w.delivered++
		if f.got[seq] > 1 {
			w.violate("endpoint %s: flow %d seq %d (PSN %d) delivered %d times", name, id, seq, h.PSN, f.got[seq])
		}
	}
	return rt.Accept
}

func fill(p []byte, id, seq int, t wire.Type) {
	binary.BigEndian.PutUint16(p, uint16(id))
	binary.BigEndian.PutUint32(p[2:], uint32(seq))
	p[6] = byte(t)
	p[7] = byte(len(p))
	for i := payloadHeader; i < len(p); i++ {
		p[i] = byte(seq*7 + id + i)
	}
}

func patternOK(p []byte, id, seq int) bool {
	for i := payloadHeader; i < len(p); i++ {
		if p[i] != byte(seq*7+id+i) {
			return false
		}
	}
	return true
}

// Name implements lcore.Stage.
func (w *Workload) Name() string { return "workload" }

// Poll sends what the windows allow.
func (w *Workload) Poll(now clock.Time) int {
	w.now = now
	work := 0
	for _, f := range w.flows {
		if f.sent == f.plan || now < f.nextAt {
			continue
		}
		for range w.cfg.PerPoll {
			if f.sent == f.plan {
				break
			}
			t := pickType(w.rng)
			n := payloadHeader + 4 + w.rng.IntN(w.cfg.MaxPayload-payloadHeader-3)
			p := w.buf[:n]
			fill(p, f.id, f.sent, t)
			psn, err := f.conn.Send(rt.SendHeader{Type: t, RSN: uint32(f.sent)}, p)
			if err != nil {
				if !errors.Is(err, rt.ErrBusy) && f.conn.State() == rt.StateEstablished {
					w.violate("flow %d: Send: %v", f.id, err)
				}
				break
			}
			f.psn[f.sent], f.typ[f.sent] = psn, t
			f.sent++
			w.sent++
			work++
		}
		if w.cfg.Gap > 0 {
			f.nextAt = now.Add(time.Duration(w.rng.Int64N(int64(w.cfg.Gap) + 1)))
		}
	}
	return work
}

// NextDeadline returns when a paced sender next wakes.
func (w *Workload) NextDeadline() (clock.Time, bool) {
	var t clock.Time
	ok := false
	for _, f := range w.flows {
		if f.sent < f.plan && f.nextAt > w.now && (!ok || f.nextAt < t) {
			t, ok = f.nextAt, true
		}
	}
	return t, ok
}

// Connections returns the number of connections each side should see.
func (w *Workload) Connections() int { return w.cfg.Conns + w.cfg.ReverseConns }

// Done reports whether every connection is up on both sides, everything
// planned was sent and delivered (or abandoned), and nothing is
// outstanding.
func (w *Workload) Done() bool {
	n := w.Connections()
	if w.established[0] < n || w.established[1] < n {
		return false
	}
	for _, f := range w.flows {
		if f.sent < f.plan {
			return false
		}
	}
	if w.sim.Outstanding() != 0 {
		return false
	}
	return w.delivered+w.abandoned >= w.sent
}

// Verify checks, once Done, that every packet was delivered exactly once
// unless abandoned.
func (w *Workload) Verify() error {
	if w.err != nil {
		return w.err
	}
	for _, f := range w.flows {
		for seq := range f.plan {
			if f.got[seq] == 1 || (f.abandoned[seq] && f.got[seq] == 0) {
				continue
			}
			return fmt.Errorf("flow %d (endpoint %s) seq %d PSN %d %v: delivered %d times (abandoned %v)",
				f.id, w.eps[f.from].Name(), seq, f.psn[seq], f.typ[seq], f.got[seq], f.abandoned[seq])
		}
	}
	return nil
}

// CloseAll closes the connections the workload opened.
func (w *Workload) CloseAll() {
	for _, c := range w.opened {
		c.Close()
	}
}

// AllClosed reports whether every connection reported EventClosed on both
// sides.
func (w *Workload) AllClosed() bool {
	n := w.Connections()
	return w.closed[0] >= n && w.closed[1] >= n
}

// Counts returns packets sent, delivered and abandoned.
func (w *Workload) Counts() (sent, delivered, abandoned int) {
	return w.sent, w.delivered, w.abandoned
}
