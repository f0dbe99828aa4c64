package app

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/peregrine-net/peregrine/core/qpx"
	"github.com/peregrine-net/peregrine/core/roce"
)

// RoCEOptions configures AddRoCE: the RoCEv2 QP-translation stage (core/roce)
// between two of a pipeline's ports, with its qpx table and the QPs opened
// in it before the run. `peregrine roce` and (later) a config file's roce
// stage build through it.
type RoCEOptions struct {
	// Net and Host are the indices (in Options.Ports order) of the network
	// port (global QPNs) and the host port (local QP numbers).
	Net, Host int
	// Loop is the index of the loop that polls the stage.
	Loop int
	// Slots is the number of local QP contexts (default qpx.DefaultSlots).
	Slots int
	// FirstQPN is where the rotation of global numbers starts (0:
	// qpx.FirstQPN).
	FirstQPN uint32
	// Seed keys the CAM's hash (0: cam's default).
	Seed uint64
	// Retire opens and closes this many QPs before the others, so their
	// numbers (the first of the rotation) are retired: packets carrying
	// them count as stale. A demonstration and test aid.
	Retire int
	// Open opens this many QPs under the next numbers of the rotation,
	// each with OpenDefaults.
	Open         int
	OpenDefaults RoCEQP
	// QPs are opened after those: under their QPN when it is nonzero
	// (qpx.Table.Bind), else under the next number of the rotation.
	QPs []RoCEQP
	// Burst, PMTU, StrictPSN and UDPPort configure the stage (roce.Options).
	Burst     int
	PMTU      int
	StrictPSN bool
	UDPPort   uint16
}

// RoCEQP describes one QP: its number (0: the next in rotation) and its
// context's initial values.
type RoCEQP struct {
	QPN uint32
	// DestQPN is the peer's global QPN (0: the QP's own number, a loop).
	DestQPN     uint32
	PKey        uint16 // 0: 0xffff, the default partition
	ExpectedPSN uint32 // the first PSN expected from the network
	NextPSN     uint32 // the first PSN expected from the host
	Access      qpx.Access
}

// ParseRoCEQP reads a QP spec: comma-separated key=value pairs among
// qpn, dest, pkey, psn (the PSN expected both ways), rx-psn, tx-psn and
// access (a string of w, r, a for remote write, read, atomic; "all"),
// e.g. "qpn=0x11,dest=0x22,psn=100,access=rw". Numbers may be decimal or
// 0x-prefixed. An empty spec is a QP under the next number with every
// default.
func ParseRoCEQP(s string) (RoCEQP, error) {
	q := RoCEQP{Access: qpx.AccessAll}
	if s == "" {
		return q, nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return q, fmt.Errorf("%q: want key=value (keys: qpn, dest, pkey, psn, rx-psn, tx-psn, access)", kv)
		}
		if k == "access" {
			a, err := parseAccess(v)
			if err != nil {
				return q, err
			}
			q.Access = a
			continue
		}
		n, err := strconv.ParseUint(v, 0, 32)
		if err != nil {
			return q, fmt.Errorf("%s=%q: not a number", k, v)
		}
		limit := uint64(qpx.MaxQPN)
		if k == "pkey" {
			limit = 0xffff
		}
		if n > limit {
			return q, fmt.Errorf("%s=%#x exceeds %#x", k, n, limit)
		}
		switch k {
		case "qpn":
			q.QPN = uint32(n)
		case "dest":
			q.DestQPN = uint32(n)
		case "pkey":
			q.PKey = uint16(n)
		case "psn":
			q.ExpectedPSN, q.NextPSN = uint32(n), uint32(n)
		case "rx-psn":
			q.ExpectedPSN = uint32(n)
		case "tx-psn":
			q.NextPSN = uint32(n)
		default:
			return q, fmt.Errorf("unknown key %q (keys: qpn, dest, pkey, psn, rx-psn, tx-psn, access)", k)
		}
	}
	return q, nil
}

func parseAccess(s string) (qpx.Access, error) {
	if s == "all" {
		return qpx.AccessAll, nil
	}
	var a qpx.Access
	for _, c := range s {
		switch c {
		case 'w':
			a |= qpx.AccessRemoteWrite
		case 'r':
			a |= qpx.AccessRemoteRead
		case 'a':
			a |= qpx.AccessRemoteAtomic
		case '-':
		default:
			return 0, fmt.Errorf("access=%q: use letters w (remote write), r (read), a (atomic), - for none, or all", s)
		}
	}
	return a, nil
}

// RoCE is what AddRoCE built: the stage, its table and the QPs it opened.
type RoCE struct {
	Stage *roce.Stage
	// Table is the stage's; it belongs to the stage's loop once the
	// pipeline starts.
	Table *qpx.Table
	// QPs are the QPs opened, in order: Open's, then QPs'.
	QPs []OpenedQP
	// Retired are the numbers Retire opened and closed.
	Retired []uint32
}

// OpenedQP is one QP AddRoCE opened: its global number and local context.
type OpenedQP struct {
	QPN   uint32
	Local int
	Ctx   qpx.Context
}

// Done reports whether the network port is a capture that has been read to
// its end (pcap:), so a pcap-to-pcap run can stop.
func (r *RoCE) Done(p *Pipeline, netIndex int) bool {
	e, ok := p.Port(netIndex).(interface{ Ended() bool })
	return ok && e.Ended()
}

// AddRoCE adds the RoCEv2 translation stage between ports Net and Host on
// Loop, with a qpx table of Slots contexts holding the QPs described. The
// stage takes frames from and frees them to the loop's cache and is
// declared with the queue halves it drives (queue 0 of each port). Errors
// are *FieldError naming a RoCEOptions field where one is to blame.
func (p *Pipeline) AddRoCE(o RoCEOptions) (*RoCE, error) {
	net, err := p.portAt("Net", o.Net)
	if err != nil {
		return nil, err
	}
	host, err := p.portAt("Host", o.Host)
	if err != nil {
		return nil, err
	}
	if o.Net == o.Host {
		return nil, &FieldError{"Host", -1, fmt.Errorf("port %d is the network port too: the stage joins two ports", o.Host)}
	}
	if o.Loop < 0 || o.Loop >= p.Lcores() {
		return nil, &FieldError{"Loop", -1, fmt.Errorf("%d is not an lcore of the pipeline (use 0..%d)", o.Loop, p.Lcores()-1)}
	}
	if o.Retire < 0 || o.Open < 0 {
		return nil, &FieldError{"Open", -1, fmt.Errorf("counts must not be negative (Retire %d, Open %d)", o.Retire, o.Open)}
	}
	tb, err := qpx.New(qpx.Options{Slots: o.Slots, Seed: o.Seed, Start: o.FirstQPN, Name: "roce qpx"})
	if err != nil {
		return nil, &FieldError{"Slots", -1, err}
	}
	out := &RoCE{Table: tb}
	for range o.Retire {
		q, _, err := tb.Open(qpx.Context{})
		if err != nil {
			return nil, &FieldError{"Retire", -1, err}
		}
		_ = tb.Close(q)
		out.Retired = append(out.Retired, q)
	}
	open := func(field string, i int, spec RoCEQP) error {
		ctx := qpx.Context{DestQPN: spec.DestQPN, PKey: spec.PKey, ExpectedPSN: spec.ExpectedPSN, NextPSN: spec.NextPSN, Access: spec.Access}
		if ctx.PKey == 0 {
			ctx.PKey = 0xffff
		}
		var q uint32
		var l int
		var err error
		if spec.QPN != 0 {
			q = spec.QPN
			l, err = tb.Bind(q, ctx)
		} else {
			q, l, err = tb.Open(ctx)
		}
		if err != nil {
			return &FieldError{field, i, err}
		}
		if ctx.DestQPN == 0 {
			tb.Context(l).DestQPN = q
		}
		out.QPs = append(out.QPs, OpenedQP{QPN: q, Local: l, Ctx: *tb.Context(l)})
		return nil
	}
	for range o.Open {
		if err := open("Open", -1, o.OpenDefaults); err != nil {
			return nil, err
		}
	}
	for i, spec := range o.QPs {
		if err := open("QPs", i, spec); err != nil {
			return nil, err
		}
	}
	cache := p.Cache(o.Loop)
	st, err := roce.New(roce.Options{Net: net, Host: host, Pool: p.Pool(), Cache: cache, Table: tb,
		Burst: o.Burst, PMTU: o.PMTU, StrictPSN: o.StrictPSN, UDPPort: o.UDPPort})
	if err != nil {
		return nil, err
	}
	out.Stage = st
	if err := p.Add(Stage{Stage: st, Loop: o.Loop,
		Rx: []Queue{{Port: net}, {Port: host}}, Tx: []Queue{{Port: net}, {Port: host}}}); err != nil {
		return nil, err
	}
	return out, nil
}
