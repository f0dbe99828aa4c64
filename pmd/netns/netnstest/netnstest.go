package netnstest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/peregrine-net/peregrine/internal/tools/toolstest"
	"github.com/peregrine-net/peregrine/pmd/netns"
)

// SkipMessage is what tests are skipped with when not run as root.
const SkipMessage = "needs root to create network namespaces (CAP_SYS_ADMIN, CAP_NET_ADMIN); run `sudo go test`"

// SkipUnlessRoot skips t unless the process runs as root, and checks that
// the programs topologies are built with (ip, ethtool) are installed: a
// missing one fails t naming its Debian package (as root,
// hack/install-deps.sh installs them).
func SkipUnlessRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip(SkipMessage)
	}
	toolstest.Require(t, "ip", "ethtool")
}

// Topology is two namespaces joined by one veth pair: IfA in A, IfB in B.
type Topology struct {
	A, B       *netns.NS
	IfA, IfB   string
	MACA, MACB net.HardwareAddr
	// AddrA and AddrB are the addresses from the options (zero if none).
	AddrA, AddrB netip.Prefix
}

// Topology3 is gen ↔ fwd ↔ sink (see netns.Topology3).
type Topology3 = netns.Topology3

// Interface names used by TwoNS and ThreeNS.
const (
	IfA       = "pgt-a"
	IfB       = "pgt-b"
	GenIf     = "pgt" + netns.GenIfSuffix
	FwdGenIf  = "pgt" + netns.FwdGenIfSuffix
	FwdSinkIf = "pgt" + netns.FwdSinkIfSuffix
	SinkIf    = "pgt" + netns.SinkIfSuffix
)

// TwoNS creates namespaces A and B joined by a veth pair configured by
// opts and registers t.Cleanup to delete both. Missing MACs default to
// 02:70:67:00:00:0a (A) and 02:70:67:00:00:0b (B). It skips t when not
// root.
func TwoNS(t testing.TB, opts netns.VethOptions) *Topology {
	t.Helper()
	SkipUnlessRoot(t)
	if opts.MACA == nil {
		opts.MACA = net.HardwareAddr{0x02, 0x70, 0x67, 0x00, 0x00, 0x0a}
	}
	if opts.MACB == nil {
		opts.MACB = net.HardwareAddr{0x02, 0x70, 0x67, 0x00, 0x00, 0x0b}
	}
	base := uniquePrefix(t)
	a := create(t, base+"-a")
	b := create(t, base+"-b")
	if err := netns.Veth(a, IfA, b, IfB, opts); err != nil {
		t.Fatalf("netnstest: %v", err)
	}
	return &Topology{
		A: a, B: b, IfA: IfA, IfB: IfB,
		MACA: opts.MACA, MACB: opts.MACB,
		AddrA: opts.AddrA, AddrB: opts.AddrB,
	}
}

// ThreeNS creates gen ↔ fwd ↔ sink with two veth pairs configured by opts
// (whose addresses and MACs are ignored: ThreeNS assigns fixed ones), and
// registers t.Cleanup to delete all three namespaces. It skips t when not
// root.
func ThreeNS(t testing.TB, opts netns.VethOptions) *Topology3 {
	t.Helper()
	SkipUnlessRoot(t)
	topo, err := netns.ThreeNS(uniquePrefix(t), "pgt", opts)
	if err != nil {
		t.Fatalf("netnstest: %v", err)
	}
	t.Cleanup(func() {
		if err := topo.Delete(); err != nil {
			t.Errorf("netnstest: cleanup: %v", err)
		}
	})
	return topo
}

// BenchBridge builds the bench topology (netns.BenchThreeNS) with a Linux
// bridge joining fwd's ends — a device under test a harness did not set
// up — and returns it with the bridge's name; t.Cleanup deletes both. It
// skips t when not root.
func BenchBridge(t testing.TB) (*Topology3, string) {
	t.Helper()
	SkipUnlessRoot(t)
	topo, err := netns.BenchThreeNS(uniquePrefix(t), "pgt")
	if err != nil {
		t.Fatalf("netnstest: %v", err)
	}
	t.Cleanup(func() {
		if err := topo.Delete(); err != nil {
			t.Errorf("netnstest: cleanup: %v", err)
		}
	})
	const br = "pgt-br"
	del, err := topo.Bridge(br)
	if err != nil {
		t.Fatalf("netnstest: %v", err)
	}
	t.Cleanup(func() {
		if err := del(); err != nil {
			t.Errorf("netnstest: cleanup: %v", err)
		}
	})
	return topo, br
}

// uniquePrefix returns "pgt-PID-XXXXXX", first deleting namespaces that
// earlier test processes which no longer exist left behind (a test binary
// killed by a timeout runs no cleanups).
func uniquePrefix(t testing.TB) string {
	t.Helper()
	ReapStale(t)
	var r [3]byte
	if _, err := rand.Read(r[:]); err != nil {
		t.Fatalf("netnstest: random name suffix: %v", err)
	}
	return fmt.Sprintf("pgt-%d-%s", os.Getpid(), hex.EncodeToString(r[:]))
}

func create(t testing.TB, name string) *netns.NS {
	t.Helper()
	ns, err := netns.Create(name)
	if err != nil {
		t.Fatalf("netnstest: %v", err)
	}
	t.Cleanup(func() {
		if err := ns.Delete(); err != nil {
			t.Errorf("netnstest: cleanup: %v", err)
		}
	})
	return ns
}

// ReapStale deletes every namespace named "pgt-PID-..." whose PID is not a
// running process. It assumes the test processes share this process's PID
// namespace, which is the case for `go test` on one machine.
func ReapStale(t testing.TB) {
	t.Helper()
	names, err := netns.List()
	if err != nil {
		t.Logf("netnstest: cannot list stale namespaces: %v", err)
		return
	}
	for _, name := range names {
		rest, ok := strings.CutPrefix(name, "pgt-")
		if !ok {
			continue
		}
		pidText, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if _, err := os.Stat("/proc/" + pidText); err == nil {
			continue // its test is still running
		}
		if err := (&netns.NS{Name: name}).Delete(); err != nil {
			t.Logf("netnstest: deleting stale namespace %s: %v", name, err)
		}
	}
}
