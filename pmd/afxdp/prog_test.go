package afxdp

import (
	"encoding/binary"
	"os"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

const xdpRedirect = 4

func skipUnlessRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (CAP_BPF, CAP_NET_ADMIN, CAP_NET_RAW, CAP_IPC_LOCK) to load XDP programs and open AF_XDP sockets; run `sudo go test`")
	}
}

// frameBuilder makes test frames: Ethernet, then IPv4/IPv6, then UDP/TCP.
type frameBuilder struct {
	etherType uint16
	ihl       int // IPv4 header length in 32-bit words
	proto     uint8
	dport     uint16
	fragOff   uint16 // IPv4 fragment offset field (flags+offset)
	truncate  int    // cut the frame to this many bytes if > 0
}

func (f frameBuilder) build() []byte {
	b := make([]byte, 14, 128)
	copy(b[0:6], []byte{0x02, 0, 0, 0, 0, 2})
	copy(b[6:12], []byte{0x02, 0, 0, 0, 0, 1})
	binary.BigEndian.PutUint16(b[12:], f.etherType)
	switch f.etherType {
	case unix.ETH_P_IP:
		ihl := f.ihl
		if ihl == 0 {
			ihl = 5
		}
		ip := make([]byte, ihl*4)
		ip[0] = 0x40 | byte(ihl)
		binary.BigEndian.PutUint16(ip[6:], f.fragOff)
		ip[8] = 64
		ip[9] = f.proto
		copy(ip[12:], []byte{198, 18, 0, 1})
		copy(ip[16:], []byte{198, 18, 0, 2})
		b = append(b, ip...)
	case unix.ETH_P_IPV6:
		ip := make([]byte, 40)
		ip[0] = 0x60
		ip[6] = f.proto
		ip[7] = 64
		b = append(b, ip...)
	case unix.ETH_P_ARP:
		b = append(b, make([]byte, 28)...)
	}
	if f.etherType != unix.ETH_P_ARP {
		l4 := make([]byte, 20)
		binary.BigEndian.PutUint16(l4[0:], 40000)
		binary.BigEndian.PutUint16(l4[2:], f.dport)
		b = append(b, l4...)
	}
	for len(b) < 60 {
		b = append(b, 0)
	}
	if f.truncate > 0 {
		b = b[:f.truncate]
	}
	return b
}

// TestProgramVerdicts loads the generated program (the verifier must accept
// it) and runs it on crafted frames. A CPUMAP with an entry at queue 0
// stands in for the XSKMAP, since XSKMAP entries need bound sockets:
// bpf_redirect_map then returns XDP_REDIRECT exactly when the program
// chose to redirect.
func TestProgramVerdicts(t *testing.T) {
	skipUnlessRoot(t)
	cpus, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.CPUMap, KeySize: 4, ValueSize: 4, MaxEntries: 1})
	require.NoError(t, err)
	defer cpus.Close()
	require.NoError(t, cpus.Put(uint32(0), uint32(64)), "CPUMAP entry (queue size 64)")

	const port = 9000
	udp4 := frameBuilder{etherType: unix.ETH_P_IP, proto: unix.IPPROTO_UDP, dport: port}
	cases := []struct {
		name     string
		frame    frameBuilder
		filtered uint32 // verdict with udp_port=9000
	}{
		{"udp4 to port", udp4, xdpRedirect},
		{"udp4 to other port", frameBuilder{etherType: unix.ETH_P_IP, proto: unix.IPPROTO_UDP, dport: port + 1}, xdpPass},
		{"tcp4 to port", frameBuilder{etherType: unix.ETH_P_IP, proto: unix.IPPROTO_TCP, dport: port}, xdpPass},
		{"udp4 with options", frameBuilder{etherType: unix.ETH_P_IP, ihl: 7, proto: unix.IPPROTO_UDP, dport: port}, xdpRedirect},
		{"udp4 bad ihl", frameBuilder{etherType: unix.ETH_P_IP, ihl: 4, proto: unix.IPPROTO_UDP, dport: port}, xdpPass},
		{"udp4 first fragment", frameBuilder{etherType: unix.ETH_P_IP, proto: unix.IPPROTO_UDP, dport: port, fragOff: 0x2000}, xdpRedirect},
		{"udp4 later fragment", frameBuilder{etherType: unix.ETH_P_IP, proto: unix.IPPROTO_UDP, dport: port, fragOff: 0x2010}, xdpPass},
		{"udp4 truncated in udp", frameBuilder{etherType: unix.ETH_P_IP, proto: unix.IPPROTO_UDP, dport: port, truncate: 14 + 20 + 4}, xdpPass},
		{"udp4 truncated in ip", frameBuilder{etherType: unix.ETH_P_IP, proto: unix.IPPROTO_UDP, dport: port, truncate: 14 + 10}, xdpPass},
		{"udp6 to port", frameBuilder{etherType: unix.ETH_P_IPV6, proto: unix.IPPROTO_UDP, dport: port}, xdpRedirect},
		{"udp6 to other port", frameBuilder{etherType: unix.ETH_P_IPV6, proto: unix.IPPROTO_UDP, dport: 53}, xdpPass},
		{"tcp6", frameBuilder{etherType: unix.ETH_P_IPV6, proto: unix.IPPROTO_TCP, dport: port}, xdpPass},
		{"udp6 truncated", frameBuilder{etherType: unix.ETH_P_IPV6, proto: unix.IPPROTO_UDP, dport: port, truncate: 14 + 40 + 2}, xdpPass},
		{"arp", frameBuilder{etherType: unix.ETH_P_ARP}, xdpPass},
		{"bare ethernet header", frameBuilder{etherType: unix.ETH_P_IP, truncate: 14}, xdpPass},
	}
	load := func(udpPort uint16) *ebpf.Program {
		prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
			Name: ProgramName, Type: ebpf.XDP, License: "Dual MIT/GPL",
			Instructions: programInstructions(cpus.FD(), udpPort, 0, -1),
		})
		require.NoError(t, err, "the verifier must accept the program (udp_port=%d)", udpPort)
		t.Cleanup(func() { prog.Close() })
		return prog
	}
	filtered, all := load(port), load(0)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			frame := c.frame.build()
			got, err := filtered.Run(&ebpf.RunOptions{Data: frame})
			require.NoError(t, err)
			require.Equal(t, c.filtered, got, "verdict with udp_port=%d (2 pass, 4 redirect)", port)
			got, err = all.Run(&ebpf.RunOptions{Data: frame})
			require.NoError(t, err)
			require.Equal(t, uint32(xdpRedirect), got, "without a filter every frame is redirected")
		})
	}
}

// TestProgramLoadsWithXSKMap loads the program as the driver does.
func TestProgramLoadsWithXSKMap(t *testing.T) {
	skipUnlessRoot(t)
	for _, udpPort := range []uint16{0, 4789} {
		p, err := loadProgram(4, udpPort, 0, false)
		require.NoError(t, err, "udp_port=%d", udpPort)
		info, err := p.prog.Info()
		require.NoError(t, err)
		require.Equal(t, ProgramName, info.Name)
		require.NoError(t, p.Close())
	}
	for bits := 0; bits <= 4; bits++ {
		p, err := loadProgram(4, 4791, bits, false)
		require.NoError(t, err, "udp_port=4791 shard_bits=%d: the verifier accepts the CID check", bits)
		require.Equal(t, bits != 0, p.miss != nil, "shard_bits=%d: the missteered map exists only with shard bits", bits)
		require.NoError(t, p.Close())
	}
}
