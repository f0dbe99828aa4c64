package roce_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/qpx"
	"github.com/peregrine-net/peregrine/core/roce"
	"github.com/peregrine-net/peregrine/internal/tools"
	"github.com/peregrine-net/peregrine/internal/tools/toolstest"
	"github.com/peregrine-net/peregrine/pmd/pcap"
)

// scapyScript builds RoCEv2 frames with scapy's RoCE layer (gen) and
// recomputes the ICRC of every frame of a capture (check). It is the
// oracle: written by someone else, it shares no code with ours.
const scapyScript = `
import sys
from scapy.all import Ether, Dot1Q, Dot1AD, IP, UDP, Raw, IPOption_Router_Alert, wrpcap, rdpcap, raw
from scapy.contrib.roce import BTH, AETH

def gen(out, qpns):
    pkts = []
    psn = {}
    for i in range(48):
        q = qpns[i % len(qpns)]
        p = psn.get(q, 100)
        kind = i % 4
        if kind == 0:
            bth = BTH(opcode=0x04, dqpn=q, psn=p, ackreq=1) / Raw(bytes(range(i, i + 16)))
            psn[q] = p + 1
        elif kind == 1:
            reth = (0x1000 + i).to_bytes(8, 'big') + (7).to_bytes(4, 'big') + (32).to_bytes(4, 'big')
            bth = BTH(opcode=0x0a, dqpn=q, psn=p) / Raw(reth + bytes(32))
            psn[q] = p + 1
        elif kind == 2:
            bth = BTH(opcode=0x11, dqpn=q, psn=i) / AETH(syndrome=0x1f, msn=i)
        else:
            bth = BTH(opcode=0x04, dqpn=q, psn=p, fecn=1) / Raw(b'x' * 1000)
            psn[q] = p + 1
        udp = UDP(sport=49152 + i, dport=4791)
        if i % 2 == 0:
            udp.chksum = 0
        pkts.append(Ether(src='02:00:00:00:00:01', dst='02:00:00:00:00:02') /
                    IP(src='198.18.0.1', dst='198.18.0.2', tos=i % 4, ttl=64 - i % 3, flags='DF') / udp / bth)
    wrpcap(out, pkts)

def gen_forms(out, qpns):
    pkts = []
    psn = {}
    for i in range(32):
        q = qpns[i % len(qpns)]
        p = psn.get(q, 100)
        psn[q] = p + 1
        form = (i // len(qpns)) % 4
        eth = Ether(src='02:00:00:00:00:01', dst='02:00:00:00:00:02')
        if form == 0:
            eth = eth / Dot1Q(vlan=5)
        elif form == 1:
            eth = eth / Dot1AD(vlan=7) / Dot1Q(vlan=9)
        elif form == 3:
            eth = eth / Dot1Q(vlan=11)
        opts = [IPOption_Router_Alert()] if form >= 2 else []
        udp = UDP(sport=49152 + i, dport=4791)
        if i % 2 == 0:
            udp.chksum = 0
        bth = BTH(opcode=0x04, dqpn=q, psn=p, ackreq=1) / Raw(bytes(range(i, i + 16 + 4 * (i % 3))))
        pkts.append(eth / IP(src='198.18.0.1', dst='198.18.0.2', tos=i % 4, ttl=64, options=opts) / udp / bth)
    wrpcap(out, pkts)

def check(path):
    for p in rdpcap(path):
        b = p[BTH]
        carried = raw(p[IP])[:p[IP].len][-4:]
        print('%d %d %d %s %s' % (b.opcode, b.dqpn, b.psn, carried.hex(), b.compute_icrc(None).hex()))

if sys.argv[1] == 'gen':
    gen(sys.argv[2], [int(x, 0) for x in sys.argv[3:]])
elif sys.argv[1] == 'gen-forms':
    gen_forms(sys.argv[2], [int(x, 0) for x in sys.argv[3:]])
else:
    check(sys.argv[2])
`

// scapyPython returns a python3 that imports scapy's RoCE layer: the
// first python3 in PATH that does (a pyenv shim may come first without
// Debian's packages). Missing: skipped when not root, failed when root,
// naming python3-scapy.
func scapyPython(t *testing.T) string {
	t.Helper()
	toolstest.Require(t, "python3")
	var cands []string
	if p, err := exec.LookPath("python3"); err == nil {
		cands = append(cands, p)
	}
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		cands = append(cands, filepath.Join(dir, "python3"))
	}
	for _, c := range cands {
		if err := exec.Command(c, "-c", "import scapy.contrib.roce").Run(); err == nil {
			return c
		}
	}
	msg := "no python3 in PATH imports scapy.contrib.roce: " + tools.Hint("python3")
	if os.Geteuid() != 0 {
		t.Skip(msg + " (not root: skipped)")
	}
	t.Fatal(msg + " (running as root, so hack/install-deps.sh should have installed it)")
	return ""
}

func runPy(t *testing.T, py, script string, args ...string) string {
	t.Helper()
	cmd := exec.Command(py, append([]string{script}, args...)...)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	require.NoError(t, cmd.Run(), "scapy %v: %s", args, stderr.String())
	return out.String()
}

// TestOracleScapyAndTshark: scapy builds RoCEv2 frames (SEND, RDMA WRITE
// with RETH, ACK with AETH, FECN, with and without a UDP checksum) for
// three live QPs and one retired; the stage runs pcap to pcap; tshark
// decodes every emitted frame as InfiniBand with the local QP number and
// the PSN we expect, and scapy recomputes each emitted frame's ICRC and
// finds the one we wrote.
func TestOracleScapyAndTshark(t *testing.T) { oracleRun(t, "gen", 48) }

// TestOracleTaggedAndOptioned: the same oracles over frames in the forms
// the stage locates besides the plain one: 802.1Q-tagged, QinQ
// (802.1ad outer tag), IPv4 with a Router Alert option, and tagged with
// the option. The stale QP's frames are dropped in every form, and every
// emitted frame is translated with a right ICRC, tags and options kept.
func TestOracleTaggedAndOptioned(t *testing.T) { oracleRun(t, "gen-forms", 32) }

// oracleRun has scapy build frames (its mode) for three live QPs and one
// retired, frames in all, one in four for each; runs the stage pcap to
// pcap; and checks the output with tshark and scapy.
func oracleRun(t *testing.T, mode string, frames int) {
	py := scapyPython(t)
	tshark := toolstest.Path(t, "tshark")
	dir := t.TempDir()
	script := filepath.Join(dir, "roce.py")
	require.NoError(t, os.WriteFile(script, []byte(scapyScript), 0o644))

	tb, err := qpx.New(qpx.Options{Slots: 8})
	require.NoError(t, err)
	var qpns []string
	locals := map[uint32]int{}
	for range 3 {
		q, l, err := tb.Open(qpx.Context{ExpectedPSN: 100, Access: qpx.AccessRemoteWrite})
		require.NoError(t, err)
		locals[q] = l
		qpns = append(qpns, fmt.Sprint(q))
	}
	stale, _, err := tb.Open(qpx.Context{})
	require.NoError(t, err)
	require.NoError(t, tb.Close(stale))
	qpns = append(qpns, fmt.Sprint(stale))

	in := filepath.Join(dir, "in.pcap")
	out := filepath.Join(dir, "out.pcap")
	runPy(t, py, script, append([]string{mode, in}, qpns...)...)

	// The stage, pcap to pcap.
	pool, err := mbuf.New(mbuf.Options{Name: "oracle", Frames: 1024})
	require.NoError(t, err)
	r, err := pcap.NewReader(pool, pcap.ReaderOptions{Path: in})
	require.NoError(t, err)
	w, err := pcap.NewWriter(pool, pcap.WriterOptions{Path: out})
	require.NoError(t, err)
	st, err := roce.New(roce.Options{Net: r, Host: w, Pool: pool, Table: tb})
	require.NoError(t, err)
	for i := 0; i < 1000 && st.Stats().ToHost.Received < uint64(frames); i++ {
		st.Poll(0)
	}
	st.Stop(0)
	require.NoError(t, r.Close())
	require.NoError(t, w.Close())
	require.NoError(t, pool.CheckLeaks())
	require.NoError(t, pool.Close())
	s := st.Stats().ToHost
	kept := uint64(frames * 3 / 4)
	require.Equal(t, roce.DirStats{Received: uint64(frames), Forwarded: kept, DropRetired: uint64(frames) - kept}, s,
		"scapy's ICRCs all check; the retired QP's frames are stale")

	// tshark: every emitted frame is RoCE, with the local QP number.
	cmd := exec.Command(tshark, "-r", out, "-T", "fields", "-E", "separator=;",
		"-e", "infiniband.bth.opcode", "-e", "infiniband.bth.destqp", "-e", "infiniband.bth.psn")
	cmd.Env = append(os.Environ(), "HOME="+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	tsOut, err := cmd.Output()
	require.NoError(t, err, "tshark: %s", stderr.String())
	tsLines := strings.Split(strings.TrimSpace(string(tsOut)), "\n")
	require.Len(t, tsLines, int(kept), "tshark:\n%s", tsOut)

	// scapy: the ICRC we wrote is the one it computes.
	scLines := strings.Split(strings.TrimSpace(runPy(t, py, script, "check", out)), "\n")
	require.Len(t, scLines, int(kept))

	// The expected sequence: scapy's frames in order, minus the stale QP's.
	n := 0
	for i := range frames {
		q := mustUint(t, qpns[i%4])
		if q == uint64(stale) {
			continue
		}
		ts := strings.Split(tsLines[n], ";")
		require.Len(t, ts, 3, tsLines[n])
		sc := strings.Fields(scLines[n])
		require.Len(t, sc, 5, scLines[n])
		local := locals[uint32(q)]
		require.Equal(t, fmt.Sprintf("0x%06x", local), ts[1], "frame %d: tshark's destination QP", n+1)
		require.Equal(t, fmt.Sprint(local), sc[1], "frame %d: scapy's destination QP", n+1)
		require.Equal(t, sc[0], ts[0], "opcode")
		require.Equal(t, sc[2], ts[2], "PSN")
		// (tshark's dissector shows no ICRC for RoCEv2: scapy is the oracle.)
		require.Equal(t, sc[4], sc[3], "frame %d: scapy computes ICRC %s, we wrote %s", n+1, sc[4], sc[3])
		n++
	}
}

func mustUint(t *testing.T, s string) uint64 {
	v, err := strconv.ParseUint(s, 0, 32)
	if err != nil {
		t.Fatal(errors.Join(err))
	}
	return v
}
