package netns_test

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/peregrine-net/peregrine/pmd/netns"
	"github.com/peregrine-net/peregrine/pmd/netns/netnstest"
)

func uniqueName(t *testing.T, tag string) string {
	return fmt.Sprintf("pgt-%d-%s", os.Getpid(), tag)
}

func netInode(t *testing.T) uint64 {
	var st unix.Stat_t
	require.NoError(t, unix.Stat("/proc/thread-self/ns/net", &st))
	return st.Ino
}

func TestCreateDelete(t *testing.T) {
	netnstest.SkipUnlessRoot(t)
	name := uniqueName(t, "cd")
	ns, err := netns.Create(name)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ns.Delete() })

	names, err := netns.List()
	require.NoError(t, err)
	require.Contains(t, names, name)

	_, err = netns.Create(name)
	require.ErrorIs(t, err, netns.ErrExists)

	opened, err := netns.Open(name)
	require.NoError(t, err)
	require.Equal(t, name, opened.Name)

	require.NoError(t, ns.Delete())
	require.NoError(t, ns.Delete(), "Delete is idempotent")
	names, err = netns.List()
	require.NoError(t, err)
	require.NotContains(t, names, name)

	_, err = netns.Open(name)
	require.ErrorIs(t, err, netns.ErrNotExist)
	require.ErrorIs(t, ns.Do(func() error { return nil }), netns.ErrNotExist)
	_, err = ns.Exec("true")
	require.ErrorIs(t, err, netns.ErrNotExist)
}

func TestBadNames(t *testing.T) {
	for _, name := range []string{"", "a/b", "..", "x y", strings.Repeat("n", 65)} {
		_, err := netns.Create(name)
		require.Error(t, err, "name %q", name)
	}
}

func TestDoRunsInside(t *testing.T) {
	topo := netnstest.TwoNS(t, netns.VethOptions{})
	outside := netInode(t)
	var inside uint64
	require.NoError(t, topo.A.Do(func() error {
		var st unix.Stat_t
		if err := unix.Stat("/proc/thread-self/ns/net", &st); err != nil {
			return err
		}
		inside = st.Ino
		_, err := net.InterfaceByName(topo.IfA)
		return err
	}))
	require.NotEqual(t, outside, inside)
	require.Equal(t, outside, netInode(t), "caller's thread is untouched")

	sentinel := errors.New("from fn")
	require.ErrorIs(t, topo.A.Do(func() error { return sentinel }), sentinel)
	require.PanicsWithValue(t, "boom", func() { _ = topo.A.Do(func() error { panic("boom") }) })
	require.ErrorContains(t, topo.A.Do(func() error { runtime.Goexit(); return nil }), "Goexit")
	require.Equal(t, outside, netInode(t))

	names, err := netns.InterfaceNames(topo.A)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"lo", topo.IfA}, names)
	names, err = netns.InterfaceNames(topo.B)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"lo", topo.IfB}, names)
}

func TestExec(t *testing.T) {
	topo := netnstest.TwoNS(t, netns.VethOptions{})
	out, err := topo.B.Exec("ip", "-o", "link", "show", topo.IfB)
	require.NoError(t, err)
	require.Contains(t, string(out), topo.IfB)
	_, err = topo.B.Exec("ip", "link", "show", "no-such-if")
	require.ErrorContains(t, err, "no-such-if")
	_, err = topo.B.Exec()
	require.Error(t, err)
}

func TestVethConfiguresBothEnds(t *testing.T) {
	opts := netns.VethOptions{
		Queues: 2,
		MTU:    3000,
		GRO:    true,
		AddrA:  netip.MustParsePrefix("198.18.0.1/30"),
		AddrB:  netip.MustParsePrefix("198.18.0.2/30"),
	}
	topo := netnstest.TwoNS(t, opts)
	for _, end := range []struct {
		ns   *netns.NS
		name string
		mac  net.HardwareAddr
		addr netip.Prefix
	}{{topo.A, topo.IfA, topo.MACA, topo.AddrA}, {topo.B, topo.IfB, topo.MACB, topo.AddrB}} {
		out, err := end.ns.Exec("ls", "/sys/class/net/"+end.name+"/queues")
		require.NoError(t, err)
		queues := strings.Fields(string(out))
		slices.Sort(queues)
		require.Equal(t, []string{"rx-0", "rx-1", "tx-0", "tx-1"}, queues)

		out, err = end.ns.Exec("ethtool", "-k", end.name)
		require.NoError(t, err)
		require.Contains(t, string(out), "generic-receive-offload: on")

		out, err = end.ns.Exec("cat", "/proc/sys/net/ipv6/conf/"+end.name+"/disable_ipv6")
		require.NoError(t, err)
		require.Equal(t, "1", strings.TrimSpace(string(out)))

		var ifc *net.Interface
		var addrs []net.Addr
		require.NoError(t, end.ns.Do(func() error {
			var err error
			if ifc, err = net.InterfaceByName(end.name); err != nil {
				return err
			}
			addrs, err = ifc.Addrs()
			return err
		}))
		require.Equal(t, 3000, ifc.MTU)
		require.Equal(t, end.mac, ifc.HardwareAddr)
		require.NotZero(t, ifc.Flags&net.FlagUp)
		require.NotZero(t, ifc.Flags&net.FlagRunning, "Veth returns only once the link is operationally up")
		require.Len(t, addrs, 1)
		require.Equal(t, end.addr.String(), addrs[0].String())
	}
	// The pair carries traffic, and sockets keep the namespace they were
	// created in: a UDP datagram from A reaches B.
	var conn *net.UDPConn
	require.NoError(t, topo.B.Do(func() error {
		var err error
		conn, err = net.ListenUDP("udp4", &net.UDPAddr{IP: topo.AddrB.Addr().AsSlice(), Port: 9})
		return err
	}))
	defer conn.Close()
	require.NoError(t, topo.A.Do(func() error {
		c, err := net.DialUDP("udp4", nil, &net.UDPAddr{IP: topo.AddrB.Addr().AsSlice(), Port: 9})
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write([]byte("peregrine"))
		return err
	}))
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	buf := make([]byte, 64)
	n, from, err := conn.ReadFromUDP(buf)
	require.NoError(t, err)
	require.Equal(t, "peregrine", string(buf[:n]))
	require.Equal(t, topo.AddrA.Addr().String(), from.IP.String())
}

func TestVethRejectsBadOptions(t *testing.T) {
	netnstest.SkipUnlessRoot(t)
	a, err := netns.Create(uniqueName(t, "bad-a"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Delete() })
	b, err := netns.Create(uniqueName(t, "bad-b"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Delete() })

	err = netns.Veth(a, "x0", b, "y0", netns.VethOptions{AddrA: netip.MustParsePrefix("10.0.0.1/24")})
	require.ErrorIs(t, err, netns.ErrOutsideTestRange)
	require.ErrorContains(t, err, "198.18.0.0/15")
	err = netns.Veth(a, "x0", b, "y0", netns.VethOptions{AddrB: netip.MustParsePrefix("198.20.0.1/24")})
	require.ErrorIs(t, err, netns.ErrOutsideTestRange)
	err = netns.Veth(a, "x0", b, "y0", netns.VethOptions{AddrB: netip.MustParsePrefix("198.18.0.1/8")})
	require.ErrorIs(t, err, netns.ErrOutsideTestRange, "a prefix wider than the range reaches outside it")
	require.ErrorContains(t, netns.Veth(a, "x0", b, "y0", netns.VethOptions{Queues: 5000}), "Queues 5000")
	require.ErrorContains(t, netns.Veth(a, "x0", b, "y0", netns.VethOptions{MTU: 10}), "MTU 10")
	require.ErrorContains(t, netns.Veth(a, "x0", b, "y0", netns.VethOptions{MACA: net.HardwareAddr{1, 2, 3}}), "MACA")
	require.ErrorContains(t, netns.Veth(a, "much-too-long-name", b, "y0", netns.VethOptions{}), "ifA")
	require.Error(t, netns.Veth(nil, "x0", b, "y0", netns.VethOptions{}))

	// Nothing was created by the refused calls.
	names, err := netns.InterfaceNames(a)
	require.NoError(t, err)
	require.Equal(t, []string{"lo"}, names)
}

func TestCheckTestPrefix(t *testing.T) {
	require.NoError(t, netns.CheckTestPrefix(netip.MustParsePrefix("198.18.0.1/30")))
	require.NoError(t, netns.CheckTestPrefix(netip.MustParsePrefix("198.19.255.254/15")))
	for _, p := range []string{"198.17.255.255/32", "198.20.0.0/16", "192.168.1.1/24", "2001:db8::1/64"} {
		require.ErrorIs(t, netns.CheckTestPrefix(netip.MustParsePrefix(p)), netns.ErrOutsideTestRange, p)
	}
}

func TestCleanupLeavesNothing(t *testing.T) {
	netnstest.SkipUnlessRoot(t)
	var names []string
	t.Run("topologies", func(t *testing.T) {
		two := netnstest.TwoNS(t, netns.VethOptions{GRO: true})
		three := netnstest.ThreeNS(t, netns.VethOptions{Queues: 2})
		names = []string{two.A.Name, two.B.Name, three.Gen.Name, three.Fwd.Name, three.Sink.Name}
		got, err := netns.InterfaceNames(three.Fwd)
		require.NoError(t, err)
		require.ElementsMatch(t, []string{"lo", three.FwdGenIf, three.FwdSinkIf}, got)
	})
	left, err := netns.List()
	require.NoError(t, err)
	for _, n := range names {
		require.NotContains(t, left, n)
	}
}

func TestReapStale(t *testing.T) {
	netnstest.SkipUnlessRoot(t)
	// PID 0x7fffffff cannot be a live process (pid_max is at most 2^22).
	stale, err := netns.Create("pgt-2147483647-test")
	require.NoError(t, err)
	t.Cleanup(func() { _ = stale.Delete() })
	live, err := netns.Create(fmt.Sprintf("pgt-%d-live", os.Getpid()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = live.Delete() })

	netnstest.ReapStale(t)
	names, err := netns.List()
	require.NoError(t, err)
	require.NotContains(t, names, stale.Name)
	require.Contains(t, names, live.Name, "this process's namespaces are kept")
}

// TestBenchThreeNSBridge builds the bench topology, joins fwd's ends with
// a bridge and takes it down again: both ends are the bridge's ports while
// it stands, neither after; GRO is on at fwd's ends, the MTU BenchMTU;
// an interface without an XDP program has none to clear.
func TestBenchThreeNSBridge(t *testing.T) {
	netnstest.SkipUnlessRoot(t)
	prefix := fmt.Sprintf("pgb%d", os.Getpid()%100000)
	topo, err := netns.BenchThreeNS(prefix, "b"+prefix[3:])
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, topo.Delete()) })
	for _, ifname := range []string{topo.FwdGenIf, topo.FwdSinkIf} {
		out, err := topo.Fwd.Exec("ethtool", "-k", ifname)
		require.NoError(t, err)
		require.Contains(t, string(out), "generic-receive-offload: on", ifname)
		out, err = topo.Fwd.Exec("ip", "link", "show", "dev", ifname)
		require.NoError(t, err)
		require.Contains(t, string(out), fmt.Sprintf("mtu %d ", netns.BenchMTU))
		had, err := topo.Fwd.ClearXDP(ifname)
		require.NoError(t, err)
		require.False(t, had)
	}
	br := "brb" + prefix[3:]
	del, err := topo.Bridge(br)
	require.NoError(t, err)
	for _, ifname := range []string{topo.FwdGenIf, topo.FwdSinkIf} {
		out, err := topo.Fwd.Exec("ip", "link", "show", "dev", ifname)
		require.NoError(t, err)
		require.Contains(t, string(out), "master "+br, ifname)
	}
	_, err = topo.Bridge(br)
	require.Error(t, err, "a second bridge of the same name")
	require.NoError(t, del())
	out, err := topo.Fwd.Exec("ip", "link", "show", "dev", topo.FwdGenIf)
	require.NoError(t, err)
	require.NotContains(t, string(out), "master ")
}
