package config_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/app"
	"github.com/peregrine-net/peregrine/app/config"
	"github.com/peregrine-net/peregrine/app/metrics"
	"github.com/peregrine-net/peregrine/app/traffic"
	"github.com/peregrine-net/peregrine/core/qpx"
	_ "github.com/peregrine-net/peregrine/pmd/all"
)

const genSink = `
lcores: [{name: a}]
ports:
  - {name: out, spec: "mem:w/0"}
  - {name: in, spec: "mem:w/1"}
pipelines:
  - lcore: a
    stages:
      - {kind: generator, port: out, count: 5000, rate: 1mpps}
      - {kind: sink, port: in, expect: 5000}
run: {duration: 1m}
`

// TestParseAppliesDefaults: a minimal file parses, with the defaults.
func TestParseAppliesDefaults(t *testing.T) {
	c, err := config.Parse([]byte(genSink))
	require.NoError(t, err)
	require.Equal(t, config.DefaultFrames, c.File.Pool.Frames)
	require.Equal(t, "adaptive", c.File.Idle)
	require.Len(t, c.Stages, 2)
	require.Equal(t, "generator-0", c.Stages[0].Name)
	require.Equal(t, "pipelines[0].stages[1]", c.Stages[1].Path)
}

// TestErrorsNameTheField: every problem is reported at once, each with
// the field's path, the value and the fix.
func TestErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"issue example", `
lcores: [{name: a}, {name: b}]
ports: [{name: p0, spec: "mem:x/0"}, {name: p1, spec: "mem:x/1"}]
pipelines:
  - {lcore: a, stages: [{kind: sink, port: p0}]}
  - {lcore: b, stages: [{kind: fabric, a: p0, b: p1, profile: "loss=200%"}]}
`, []string{`pipelines[1].stages[0].profile: "loss=200%": `, "0..100%"}},
		{"unknown top-level key", "lcore: []\n", []string{`lcore: line 1: the file has no field "lcore"`}},
		{"unknown stage key", `
lcores: [{name: a}]
ports: [{name: p0, spec: "null:"}]
pipelines: [{lcore: a, stages: [{kind: sink, port: p0, rate: 5}]}]
`, []string{`pipelines[0].stages[0].rate: line 4: a sink stage has no field "rate"`}},
		{"unknown kind", `
lcores: [{name: a}]
ports: [{name: p0, spec: "null:"}]
pipelines: [{lcore: a, stages: [{kind: ioi}]}]
`, []string{`pipelines[0].stages[0].kind: "ioi" is not a stage kind: use one of forwarder, generator, sink, fabric, transport`}},
		{"unknown driver, same port twice, bad lcore, bad port ref", `
lcores: [{name: a}]
ports:
  - {name: p0, spec: "nic:eth0"}
  - {name: p1, spec: "afpacket:eth1"}
  - {name: p2, spec: "afpacket:eth1"}
pipelines: [{lcore: z, stages: [{kind: forwarder, ports: [p1, nope], mode: teleport}]}]
`, []string{
			`ports[0].spec: "nic:eth0": unknown port driver "nic": use one of afpacket, afxdp, mem, null, pcap, pcap-out`,
			`ports[2].spec: "afpacket:eth1" opens the same port as ports[1]`,
			`pipelines[0].lcore: "z" is not an lcore of this file: use one of a`,
			`pipelines[0].stages[0].ports[1]: "nope" is not a port of this file`,
			`pipelines[0].stages[0].mode: "teleport"`,
		}},
		{"pool too small, negative duration", `
pool: {frames: 100}
lcores: [{name: a}]
ports: [{name: p0, spec: "null:"}]
pipelines: [{lcore: a, stages: [{kind: sink, port: p0}]}]
run: {duration: -1s}
`, []string{"pool.frames: 100 is out of range: use 1024..", "run.duration: -1s is negative"}},
		{"transport", `
lcores: [{name: a}]
ports: [{name: p0, spec: "null:"}]
pipelines: [{lcore: a, stages: [{kind: transport, role: initiator, port: p0, ip: 1.2.3, peer: ghost, window: 0}]}]
`, []string{`pipelines[0].stages[0].ip: "1.2.3"`, `pipelines[0].stages[0].peer: "ghost" is not a transport target stage`}},
		{"transport mechanisms: bad values", `
lcores: [{name: a}]
ports: [{name: p0, spec: "mem:m/0"}, {name: p1, spec: "mem:m/1"}]
pipelines: [{lcore: a, stages: [
  {kind: transport, role: initiator, port: p0, ip: 198.18.0.1, peer: tgt, ioi: maybe, msg_size: 1TiB, sends: -1, op_timeout: -2s, post_recv: 4},
  {kind: transport, name: tgt, role: target, port: p1, ip: 198.18.0.2, post_recv: 9999, sends: 3, op_timeout: 1s}]}]
`, []string{
			`pipelines[0].stages[0].ioi: "maybe": use on, off, inorder or sprayed`,
			`pipelines[0].stages[0].msg_size: `,
			`pipelines[0].stages[0].sends: -1 is out of range: use 0..4096`,
			`pipelines[0].stages[0].op_timeout: -2s is negative`,
			`pipelines[0].stages[0].post_recv: only a target posts receive WQEs`,
			`pipelines[0].stages[1].post_recv: 9999 is out of range: use 0..256`,
			`pipelines[0].stages[1].sends: only an initiator posts Sends`,
			`pipelines[0].stages[1].op_timeout: only an initiator's operations time out`,
		}},
		{"sends need the target's receive WQEs and sizes", `
lcores: [{name: a}]
ports: [{name: p0, spec: "mem:n/0"}, {name: p1, spec: "mem:n/1"}]
pipelines: [{lcore: a, stages: [
  {kind: transport, role: initiator, port: p0, ip: 198.18.0.1, peer: tgt, sends: 4, msg_size: 4KiB, sizes: [4KiB], global_qpns: true},
  {kind: transport, name: tgt, role: target, port: p1, ip: 198.18.0.2}]}]
`, []string{
			`pipelines[0].stages[0].global_qpns: true here and false at target "tgt": global QP numbers change the wire, so set the same on both ends`,
			`pipelines[0].stages[0].msg_size: "4KiB" and sizes [4KiB] both give the message sizes: keep one`,
			`pipelines[0].stages[0].sends: target "tgt" uses sizes [64KiB] and this initiator [4KiB]`,
			`pipelines[0].stages[0].sends: target "tgt" posts no receive WQEs`,
		}},
		{"roce: bad values", `
lcores: [{name: a}]
ports: [{name: p0, spec: "null:"}]
pipelines: [{lcore: a, stages: [{kind: roce, net: p0, host: p0, slots: 2, open: 3, pmtu: 1500, burst: 0, first_qpn: 0x1000000, qps: ["qpn=zz"]}]}]
`, []string{
			`pipelines[0].stages[0].host: "p0" is the network port too`,
			`pipelines[0].stages[0].open: 4 QPs (open 3, qps 1) do not fit in 2 slots`,
			`pipelines[0].stages[0].pmtu: 1500 is not an IBA MTU`,
			`pipelines[0].stages[0].first_qpn: 0x1000000 is out of range: use 0x2..0xfffffe`,
			`pipelines[0].stages[0].qps[0]: "qpn=zz": qpn="zz": not a number`,
		}},
		{"generator addresses: the gen flags' rules and words", `
lcores: [{name: a}]
ports: [{name: p0, spec: "null:"}, {name: p1, spec: "null:"}, {name: p2, spec: "null:"}]
pipelines: [{lcore: a, stages: [
  {kind: generator, port: p0, src_mac: bogus, dst_ip: 198.18.0.9-198.18.0.2, dst_port: "0", vlan: 4095, src_port: 65535, flows: 2},
  {kind: generator, port: p1, src_ip: 198.18.0.1, dst_ip: "2001:db8::2", vlan: 7, size: 60},
  {kind: sink, port: p2, src_port: 70000}]}]
`, []string{
			`pipelines[0].stages[0].src_mac: "bogus": give an Ethernet address, e.g. 02:00:00:00:00:01`,
			`pipelines[0].stages[0].dst_ip: "198.18.0.9-198.18.0.2": give LOW-HIGH of one family, low first`,
			`pipelines[0].stages[0].dst_port: "0" is not a UDP port or range (1..65535, e.g. 9 or 1000-1099)`,
			`pipelines[0].stages[0].vlan: 4095: give a VLAN ID 1..4094, or 0 for untagged frames`,
			`pipelines[0].stages[0].src_port: 65535: give 1..65534, so that the flows 2 source ports fit under 65536`,
			`pipelines[0].stages[1].src_ip: 198.18.0.1 and dst_ip 2001:db8::2: give both IPv4 or both IPv6`,
			`pipelines[0].stages[1].size: "60": frames of 60 B are too small for these headers (a VLAN tag adds 4 B, IPv6 20 B) and the stamp: use 64 B or more`,
			`pipelines[0].stages[2].src_port: 70000: give 1..65535`,
		}},
		{"roce: QP numbers the stage could not open", `
lcores: [{name: a}]
ports: [{name: p0, spec: "null:"}, {name: p1, spec: "null:"}]
pipelines:
  - {lcore: a, stages: [{kind: roce, net: p0, host: p1, qps: ["qpn=0xffffff"]}]}
  - {lcore: b, stages: [{kind: roce, net: p0, host: p1, retire: 1, open: 3, qps: ["qpn=0x100", "qpn=4"]}]}
`, []string{
			`pipelines[0].stages[0].qps[0]: "qpn=0xffffff": qpn=0xffffff is out of range: use 0x2..0xfffffe`,
			`pipelines[1].stages[0].qps[1]: "qpn=4": qpn=0x4 is taken by one of the 3 QPs opened first (0x3..0x5 after 1 retired)`,
		}},
		{"roce: unknown key", `
lcores: [{name: a}]
ports: [{name: p0, spec: "null:"}, {name: p1, spec: "null:"}]
pipelines: [{lcore: a, stages: [{kind: roce, net: p0, host: p1, qp: "qpn=1"}]}]
`, []string{`pipelines[0].stages[0].qp: line 4: a roce stage has no field "qp"`}},
		{"mcsq: bad values and what it excludes", `
lcores: [{name: a}]
ports: [{name: p0, spec: "mem:q/0"}, {name: p1, spec: "mem:q/1"}, {name: p2, spec: "mem:r/0"}]
pipelines: [{lcore: a, stages: [
  {kind: transport, role: initiator, port: p0, ip: 198.18.0.1, peer: tgt, targets: -1, dc_sqs: 61, sizes: [512, 4KiB], sends: 2, ioi: "on", pull_every: 4, window: 8},
  {kind: transport, role: initiator, port: p2, ip: 198.18.0.3, peer_mac: "02:00:00:00:00:01", peer_ip: 198.18.0.2, region_key: "0x10001", targets: 10, msg_size: 512},
  {kind: transport, name: tgt, role: target, port: p1, ip: 198.18.0.2, targets: 5, global_qpns: true}]}]
`, []string{
			`pipelines[0].stages[0].targets: -1 is out of range: use 1..1048576`,
			`pipelines[0].stages[0].dc_sqs: 61 is out of range: use 1..60 (a target accepts 64 connections)`,
			`pipelines[0].stages[0].sizes: [512 4KiB]: an initiator with targets pushes one message size: give msg_size`,
			`pipelines[0].stages[0].sends: an initiator with targets does not use sends (it posts pushes through the multi-channel send queue)`,
			`pipelines[0].stages[0].ioi: an initiator with targets`,
			`pipelines[0].stages[0].pull_every: an initiator with targets`,
			`pipelines[0].stages[0].window: an initiator with targets`,
			`pipelines[0].stages[0].targets: target "tgt" runs on global QP numbers and the MCSQ initiator on local ones`,
			`pipelines[0].stages[1].region_size: an initiator with targets needs the target's region length`,
			`pipelines[0].stages[2].targets: only an initiator posts through a multi-channel send queue`,
		}},
		{"initiator bigger than its in-process target", `
lcores: [{name: a}]
ports: [{name: p0, spec: "mem:t/0"}, {name: p1, spec: "mem:t/1"}]
pipelines: [{lcore: a, stages: [
  {kind: transport, role: initiator, port: p0, ip: 198.18.0.1, peer: tgt, window: 64},
  {kind: transport, name: tgt, role: target, port: p1, ip: 198.18.0.2, window: 8}]}]
`, []string{`pipelines[0].stages[0].window: 64 with sizes [64KiB] needs a 8388608 B region at the target, and target "tgt" registers 1048576 B`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse([]byte(tc.yaml))
			require.Error(t, err)
			for _, w := range tc.want {
				require.Contains(t, err.Error(), w)
			}
		})
	}
}

// TestErrorsAreTyped: callers find each problem with errors.As.
func TestErrorsAreTyped(t *testing.T) {
	_, err := config.Parse([]byte("lcores: [{name: a}]\nports: [{name: p0, spec: \"null:\"}]\npipelines: [{lcore: a, stages: [{kind: sink, port: p0, burst: 999}]}]\n"))
	var e *config.Error
	require.True(t, errors.As(err, &e), "%v", err)
	require.Equal(t, "pipelines[0].stages[0].burst", e.Path)
	require.True(t, strings.HasPrefix(e.Err.Error(), "999 is out of range"), e.Err.Error())
}

// TestRunGenSink builds and runs a generator and a sink: the run ends
// when the sink has every frame, checks pass, and the pool is empty.
func TestRunGenSink(t *testing.T) {
	c, err := config.Parse([]byte(genSink))
	require.NoError(t, err)
	a, err := config.Build(c, nil)
	require.NoError(t, err)
	res := a.Run(context.Background(), context.Background(), config.RunOptions{})
	require.NoError(t, res.Err)
	require.Empty(t, res.Lost)
	require.True(t, res.OK(), "%+v", res.Reports)
	require.Zero(t, res.PoolInUse)
	require.Less(t, res.Elapsed, time.Minute)
}

// TestBuildFailureClosesEverything: a port that cannot open fails Build
// with the field named, and nothing stays open (the next build of the
// same mem pair works).
func TestBuildFailureClosesEverything(t *testing.T) {
	c, err := config.Parse([]byte(`
lcores: [{name: a}]
ports: [{name: p0, spec: "mem:z/0"}, {name: p1, spec: "pcap:/nonexistent/x.pcap"}]
pipelines: [{lcore: a, stages: [{kind: sink, port: p0}]}]
`))
	require.NoError(t, err)
	_, err = config.Build(c, nil)
	require.ErrorContains(t, err, "ports[1].spec: ")
}

// TestExportRegisters: an appliance's stages register their collectors.
func TestExportRegisters(t *testing.T) {
	c, err := config.Parse([]byte(`
lcores: [{name: a}]
ports: [{name: a, spec: "mem:f/0"}, {name: b, spec: "mem:f/1"}, {name: c, spec: "mem:g/0"}, {name: d, spec: "mem:g/1"}]
pipelines: [{lcore: a, stages: [{kind: fabric, a: a, b: b, profile: "loss=1%"}, {kind: forwarder, ports: [c]}, {kind: sink, port: d}]}]
`))
	require.NoError(t, err)
	a, err := config.Build(c, nil)
	require.NoError(t, err)
	defer a.Pipeline.Stop()
	reg := metrics.New()
	require.NoError(t, config.Export(a, reg))
	mfs, err := reg.Gatherer().Gather()
	require.NoError(t, err)
	var names []string
	for _, mf := range mfs {
		names = append(names, mf.GetName())
	}
	require.Contains(t, names, "peregrine_fabric_drops_total")
	require.Contains(t, names, "peregrine_forwarder_drops_total")
	require.Contains(t, names, "peregrine_sink_frames_total")
}

// TestExportMCSQ: an MCSQ initiator stage registers its transport
// counters, its connections' RTT and windows and the MCSQ's counters; its
// target its RTT and windows too.
func TestExportMCSQ(t *testing.T) {
	c, err := config.Parse([]byte(`
lcores: [{name: a}]
ports: [{name: p0, spec: "mem:xm/0"}, {name: p1, spec: "mem:xm/1"}]
pipelines: [{lcore: a, stages: [
  {kind: transport, name: ini, role: initiator, port: p0, ip: 198.18.0.1, peer: tgt, msg_size: 512, targets: 10, dc_sqs: 2, count: 100},
  {kind: transport, name: tgt, role: target, port: p1, ip: 198.18.0.2, msg_size: 512}]}]
`))
	require.NoError(t, err)
	a, err := config.Build(c, nil)
	require.NoError(t, err)
	defer a.Pipeline.Stop()
	reg := metrics.New()
	require.NoError(t, config.Export(a, reg))
	mfs, err := reg.Gatherer().Gather()
	require.NoError(t, err)
	series := map[string]bool{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				series[mf.GetName()+"/"+l.GetValue()] = true
			}
		}
	}
	for _, want := range []string{"peregrine_mcsq_wrs_ok_total/ini", "peregrine_mcsq_dc_connects_total/ini", "peregrine_transport_ops_completed_total/ini",
		"peregrine_transport_srtt_seconds/ini", "peregrine_transport_cwnd_packets/ini", "peregrine_transport_srtt_seconds/tgt"} {
		require.True(t, series[want], "no %s", want)
	}
}

// TestTransportBuffersBounded: Sends and receive WQEs of the largest size
// count toward the transport's buffers, checked before anything is
// allocated.
func TestTransportBuffersBounded(t *testing.T) {
	_, err := config.Parse([]byte(`
lcores: [{name: a}]
ports: [{name: p0, spec: "mem:bb/0"}, {name: p1, spec: "mem:bb/1"}]
pipelines: [{lcore: a, stages: [
  {kind: transport, role: initiator, port: p0, ip: 198.18.0.1, peer: t, window: 1, msg_size: 1GiB, sends: 4096},
  {kind: transport, name: t, role: target, port: p1, ip: 198.18.0.2, window: 1, msg_size: 1GiB, post_recv: 256}]}]
`))
	require.ErrorContains(t, err, "pipelines[0].stages[0].sends: window 1 and 4096 Sends and 0 receive WQEs of up to 1073741824 B need")
	require.ErrorContains(t, err, "pipelines[0].stages[1].post_recv: window 1 and 0 Sends and 256 receive WQEs")
}

// A generator stage takes gen's addresses: IPv6 ranges, ports, VLAN and
// MACs reach the generator's options, and the defaults are gen's.
func TestGeneratorAddresses(t *testing.T) {
	c, err := config.Parse([]byte(`
lcores: [{name: a}]
ports: [{name: out, spec: "mem:ga/0"}, {name: in, spec: "mem:ga/1"}]
pipelines: [{lcore: a, stages: [
  {kind: generator, port: out, size: 128, src_mac: "02:aa:00:00:00:01", dst_mac: "02:aa:00:00:00:02",
   src_ip: "2001:db8::1-2001:db8::4", dst_ip: "2001:db8::100", src_port: 30000, dst_port: 7000-7009, vlan: 42, flows: 2},
  {kind: generator, port: out},
  {kind: sink, port: in, flows: 2, src_port: 30000}]}]
`))
	require.NoError(t, err)
	g := c.Stages[0].Spec.(*config.Generator)
	require.Equal(t, "2001:db8::1", g.Opts().Addressing.SrcIP.Lo.String())
	require.Equal(t, "2001:db8::4", g.Opts().Addressing.SrcIP.Hi.String())
	require.Equal(t, traffic.PortRange{Lo: 7000, Hi: 7009}, g.Opts().Addressing.DstPort)
	require.Equal(t, uint16(30000), g.Opts().Addressing.SrcPort)
	require.Equal(t, uint16(42), g.Opts().Addressing.VLAN)
	require.Equal(t, "02:aa:00:00:00:02", g.Opts().DstMAC.String())
	def := c.Stages[1].Spec.(*config.Generator).Opts()
	require.Equal(t, config.DefaultSrcMAC, def.SrcMAC.String())
	require.Equal(t, config.DefaultDstIP, def.Addressing.DstIP.Lo.String())
	require.Equal(t, uint16(traffic.BaseSrcPort), def.Addressing.SrcPort)
	require.Equal(t, uint16(0), def.Addressing.VLAN)
}

// A failed coverage check says why — WRs without a CQE, or a drain cut
// short — and what to do, naming the setting.
func TestCoverCheckSaysWhyAndWhatToDo(t *testing.T) {
	const more = "give run.drain more time (e.g. drain: 10s)"
	for _, tc := range []struct {
		drained         bool
		posted, covered uint64
		ok              bool
		want            string
	}{
		{true, 3862, 3862, true, "(3862 posted, 3862 covered)"},
		{false, 3862, 3862, false, "(3862 posted, 3862 covered): every WR has its CQE, but the drain ended before the send queues were seen empty, so a late CQE could not be ruled out: " + more + "; a second signal"},
		{true, 10, 7, false, ": 3 WR(s) had no CQE when the drain ended (the target stopped answering, or the drain was too short): " + more},
		{true, 7, 10, false, ": 3 CQEs covered WRs never posted"},
	} {
		c := config.CoverCheck(tc.drained, tc.posted, tc.covered, more)
		require.Equal(t, tc.ok, c.OK, c.What)
		require.Contains(t, c.What, tc.want)
	}
}

// CheckRoCEQPs refuses exactly the QP lists the stage's table would
// refuse to open: random rotations (some wrapping past the last QPN),
// retired and opened counts and qps, each checked against a qpx.Table
// doing what app.AddRoCE does.
func TestCheckRoCEQPsAgreesWithTheTable(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 9))
	for trial := range 2000 {
		first := uint32(0)
		if r.IntN(2) == 0 {
			first = qpx.LastQPN - uint32(r.IntN(8))
		}
		retire, open := r.IntN(6), r.IntN(6)
		var qps []app.RoCEQP
		for range r.IntN(4) {
			q := app.RoCEQP{}
			switch r.IntN(4) {
			case 0: // the rotation's next
			case 1:
				q.QPN = uint32(r.IntN(12)) // near the start, 0 and 1 included
			default:
				q.QPN = qpx.MaxQPN - uint32(r.IntN(12))
			}
			qps = append(qps, q)
		}
		tb, err := qpx.New(qpx.Options{Slots: 64, Start: first, Name: "check"})
		require.NoError(t, err)
		for range retire {
			q, _, err := tb.Open(qpx.Context{})
			require.NoError(t, err)
			require.NoError(t, tb.Close(q))
		}
		for range open {
			_, _, err := tb.Open(qpx.Context{})
			require.NoError(t, err)
		}
		want := -1
		for i, q := range qps {
			if q.QPN == 0 {
				_, _, err = tb.Open(qpx.Context{})
			} else {
				_, err = tb.Bind(q.QPN, qpx.Context{})
			}
			if err != nil {
				want = i
				break
			}
		}
		i, err := config.CheckRoCEQPs(first, retire, open, qps)
		if want < 0 {
			require.NoError(t, err, "trial %d: first %#x retire %d open %d qps %+v", trial, first, retire, open, qps)
		} else {
			require.Error(t, err, "trial %d: first %#x retire %d open %d qps %+v", trial, first, retire, open, qps)
			require.Equal(t, want, i, "trial %d", trial)
		}
	}
}
