package config

import (
	"context"
	"fmt"
	"strings"

	"github.com/peregrine-net/peregrine/app"
	"github.com/peregrine-net/peregrine/core/qpx"
	"github.com/peregrine-net/peregrine/core/roce"
)

// RoCE is the RoCEv2 QP-translation stage (app.AddRoCE, the roce
// subcommand): between a network port, whose frames name QPs by global
// QPNs, and a host port, whose frames name them by local context number.
type RoCE struct {
	// Net and Host are the two ports (roce --port, twice).
	Net  string `yaml:"net"`
	Host string `yaml:"host"`
	// Slots is the local QP contexts (default 64); FirstQPN the first
	// global QPN of the rotation (0: qpx's, 2); Seed keys the CAM's hash.
	Slots    int    `yaml:"slots" default:"64"`
	FirstQPN uint32 `yaml:"first_qpn"`
	Seed     uint64 `yaml:"seed"`
	// Retire QPs are opened and closed first (their numbers retired: a
	// frame naming one is a stale packet); Open QPs are opened under the
	// next numbers; QPs are opened after them, each a spec as roce --qp
	// reads it: "qpn=0x100,dest=0x22,pkey=0xffff,psn=0,access=rw".
	Retire int      `yaml:"retire"`
	Open   int      `yaml:"open"`
	QPs    []string `yaml:"qps"`
	// Burst (default 32), PMTU (default 1024), StrictPSN and UDPPort
	// (default 4791) configure the stage.
	Burst     int    `yaml:"burst" default:"32"`
	PMTU      int    `yaml:"pmtu" default:"1024"`
	StrictPSN bool   `yaml:"strict_psn"`
	UDPPort   uint16 `yaml:"udp_port" default:"4791"`
	// ExpectToHost, when set, is how many frames must reach the host
	// port (checked at the end).
	ExpectToHost uint64 `yaml:"expect_to_host"`

	opts app.RoCEOptions
}

// Check implements Stage.
func (s *RoCE) Check(c *Checker) {
	c.Polls("net", s.Net)
	c.Polls("host", s.Host)
	if s.Net != "" && s.Net == s.Host {
		c.Errorf("host", "%q is the network port too: the stage joins two ports", s.Host)
	}
	if s.Slots == 0 {
		s.Slots = 64
	}
	c.Err("slots", CheckRange(s.Slots, 1, 1<<20))
	c.Err("first_qpn", CheckFirstQPN(s.FirstQPN))
	c.Err("retire", CheckRange(s.Retire, 0, MaxRetire))
	c.Err("open", CheckRange(s.Open, 0, 1<<20))
	if s.Open+len(s.QPs) > s.Slots {
		c.Errorf("open", "%d QPs (open %d, qps %d) do not fit in %d slots: raise slots or open fewer", s.Open+len(s.QPs), s.Open, len(s.QPs), s.Slots)
	}
	if s.Burst == 0 {
		s.Burst = roce.DefaultBurst
	}
	c.Err("burst", CheckRange(s.Burst, 1, MaxBurst))
	if s.PMTU == 0 {
		s.PMTU = roce.DefaultPMTU
	}
	c.Err("pmtu", CheckPMTU(s.PMTU))
	s.opts = app.RoCEOptions{Slots: s.Slots, FirstQPN: s.FirstQPN, Seed: s.Seed, Retire: s.Retire, Open: s.Open,
		OpenDefaults: app.RoCEQP{Access: qpx.AccessAll}, Burst: s.Burst, PMTU: s.PMTU, StrictPSN: s.StrictPSN, UDPPort: s.UDPPort}
	parsed := true
	for i, spec := range s.QPs {
		q, err := app.ParseRoCEQP(spec)
		if err != nil {
			c.Errorf(fmt.Sprintf("qps[%d]", i), "%q: %v", spec, err)
			parsed = false
			continue
		}
		s.opts.QPs = append(s.opts.QPs, q)
	}
	if parsed && CheckFirstQPN(s.FirstQPN) == nil && s.Retire >= 0 && s.Retire <= MaxRetire && s.Open >= 0 && s.Open <= 1<<20 {
		if i, err := CheckRoCEQPs(s.FirstQPN, s.Retire, s.Open, s.opts.QPs); err != nil {
			c.Errorf(fmt.Sprintf("qps[%d]", i), "%q: %v", s.QPs[i], err)
		}
	}
}

// CheckRoCEQPs checks the QP numbers the stage will open, before it
// opens any: retire QPs take the rotation's numbers from first (0:
// qpx.FirstQPN) and are closed, open QPs take the next ones, then each of
// qps is opened under its qpn, or the rotation's next free number when
// qpn is 0. It returns the index of the first of qps whose number is out
// of range or already held (by an open QP or an earlier qps entry), and
// why.
func CheckRoCEQPs(first uint32, retire, open int, qps []app.RoCEQP) (int, error) {
	if first == 0 {
		first = qpx.FirstQPN
	}
	// Numbers as positions in the rotation FirstQPN..LastQPN.
	pos := func(q uint32) int { return int(q - qpx.FirstQPN) }
	opened := (pos(first) + retire) % qpx.Space // the first --open number's position
	next := (opened + open) % qpx.Space
	held := func(p int) bool { return (p-opened+qpx.Space)%qpx.Space < open }
	explicit := map[int]int{} // position → index in qps
	for i, q := range qps {
		if q.QPN == 0 {
			// The rotation skips live numbers, as qpx.Table.Open does.
			for held(next) || explicit[next] != 0 {
				next = (next + 1) % qpx.Space
			}
			explicit[next] = i + 1
			next = (next + 1) % qpx.Space
			continue
		}
		if q.QPN < qpx.FirstQPN || q.QPN > qpx.LastQPN {
			return i, fmt.Errorf("qpn=%#x is out of range: use %#x..%#x (0 and 1 are the special QPs, %#x the multicast QPN), or leave qpn out for the rotation's next number", q.QPN, qpx.FirstQPN, qpx.LastQPN, qpx.MaxQPN)
		}
		p := pos(q.QPN)
		if held(p) {
			return i, fmt.Errorf("qpn=%#x is taken by one of the %d QPs opened first (%#x..%#x after %d retired): choose a number outside them, or open fewer", q.QPN, open, qpnAt(opened), qpnAt(opened+open-1), retire)
		}
		if explicit[p] != 0 {
			return i, fmt.Errorf("qpn=%#x is an earlier QP's number (given, or the rotation's next taken by a QP without qpn): give each QP its own number", q.QPN)
		}
		explicit[p] = i + 1
	}
	return 0, nil
}

// qpnAt is the QP number at position p of the rotation.
func qpnAt(p int) uint32 { return uint32(p%qpx.Space) + qpx.FirstQPN }

// MaxRetire is the most QPs a run may retire first: every 24-bit QPN but
// 0, 1 (never handed out) and one left to open.
const MaxRetire = qpx.MaxQPN - 2

// CheckFirstQPN refuses a first QPN of the rotation qpx does not take.
func CheckFirstQPN(q uint32) error {
	if q != 0 && (q < qpx.FirstQPN || q >= qpx.MaxQPN) {
		return fmt.Errorf("%#x is out of range: use %#x..%#x (or 0 for %#x)", q, qpx.FirstQPN, qpx.MaxQPN-1, qpx.FirstQPN)
	}
	return nil
}

// CheckPMTU refuses a path MTU that is not an IBA MTU.
func CheckPMTU(n int) error {
	if n < 256 || n > 4096 || n&(n-1) != 0 {
		return fmt.Errorf("%d is not an IBA MTU: use 256, 512, 1024, 2048 or 4096", n)
	}
	return nil
}

// RoCECounters are a RoCE stage's figures by name, for JSON lines.
func RoCECounters(s roce.Stats) map[string]float64 {
	return map[string]float64{
		"to_host_received": float64(s.ToHost.Received), "to_host_forwarded": float64(s.ToHost.Forwarded),
		"to_net_received": float64(s.ToNet.Received), "to_net_forwarded": float64(s.ToNet.Forwarded),
		"stale_qpn_drops": float64(s.ToHost.DropRetired), "unknown_qpn_drops": float64(s.ToHost.DropUnknown + s.ToNet.DropUnknown),
		"icrc_drops": float64(s.ToHost.DropICRC + s.ToNet.DropICRC),
	}
}

// FormatRetired lists retired QPNs, the first and last few of a long run
// with the count between: a line per number would be millions of lines.
func FormatRetired(qpns []uint32) string {
	const shown = 4
	hex := func(qs []uint32) string {
		var b strings.Builder
		for i, q := range qs {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%#06x", q)
		}
		return b.String()
	}
	if len(qpns) <= 2*shown {
		return hex(qpns)
	}
	return fmt.Sprintf("%s, … (%d more) …, %s", hex(qpns[:shown]), len(qpns)-2*shown, hex(qpns[len(qpns)-shown:]))
}

// Build implements Stage.
func (s *RoCE) Build(b *Builder) (Running, error) {
	o := s.opts
	o.Net, o.Host, o.Loop = b.Port(s.Net), b.Port(s.Host), b.Loop
	r, err := b.Pipeline.AddRoCE(o)
	if err != nil {
		return nil, err
	}
	return &roceRun{r: r, p: b.Pipeline, net: o.Net, expect: s.ExpectToHost}, nil
}

type roceRun struct {
	r      *app.RoCE
	p      *app.Pipeline
	net    int
	expect uint64
	last   roce.Stats
}

// qps lists the QPs opened, as the roce subcommand prints them.
func (r *roceRun) qps() string {
	line := fmt.Sprintf("QPs: %d local contexts", r.r.Table.Slots())
	if len(r.r.Retired) > 0 {
		line += "; retired " + FormatRetired(r.r.Retired)
	}
	for _, q := range r.r.QPs {
		line += fmt.Sprintf("; qp %#06x -> local %d (peer %#06x)", q.QPN, q.Local, q.Ctx.DestQPN)
	}
	return line
}

func (r *roceRun) Live(dt float64) string {
	s := r.r.Stage.Stats()
	line := fmt.Sprintf("to-host %.0f fps, to-net %.0f fps | stale %d", float64(s.ToHost.Forwarded-r.last.ToHost.Forwarded)/dt,
		float64(s.ToNet.Forwarded-r.last.ToNet.Forwarded)/dt, s.ToHost.DropRetired)
	r.last = s
	return line
}

// Finite: a capture as the network port ends the run once it is read.
func (r *roceRun) Finite() bool {
	_, ok := r.p.Port(r.net).(interface{ Ended() bool })
	return ok
}

func (r *roceRun) Done() bool { return r.r.Done(r.p, r.net) }

func (r *roceRun) Drain(context.Context) string { return "" }

func (r *roceRun) Report() ([]string, []Check) {
	s := r.r.Stage.Stats()
	lines := []string{r.qps(), fmt.Sprintf("to-host %v", s.ToHost), fmt.Sprintf("to-net  %v", s.ToNet), fmt.Sprintf("qpx     %v", s.QPX)}
	var checks []Check
	for _, d := range []struct {
		name string
		s    roce.DirStats
	}{{"to-host", s.ToHost}, {"to-net", s.ToNet}} {
		out := d.s.Forwarded + d.s.Dropped()
		checks = append(checks, Check{out == d.s.Received, fmt.Sprintf("%s: every frame received was forwarded or counted as a drop (%d received, %d accounted for)", d.name, d.s.Received, out)})
	}
	if r.expect > 0 {
		checks = append(checks, Check{s.ToHost.Forwarded == r.expect, fmt.Sprintf("%d frames reached the host (expect_to_host %d)", s.ToHost.Forwarded, r.expect)})
	}
	return lines, checks
}

func (r *roceRun) Counters() map[string]float64 { return RoCECounters(r.r.Stage.Stats()) }
