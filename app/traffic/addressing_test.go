package traffic

import (
	"net"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/pmd/mem"
	"github.com/peregrine-net/peregrine/pmd/null"
)

func TestParseRanges(t *testing.T) {
	r, err := ParseIPRange("198.18.0.1-198.18.0.200")
	require.NoError(t, err)
	require.Equal(t, uint64(200), r.span())
	r, err = ParseIPRange("2001:db8::1-2001:db8::10")
	require.NoError(t, err)
	require.Equal(t, uint64(16), r.span())
	for _, bad := range []string{"x", "198.18.0.9-198.18.0.1", "198.18.0.1-2001:db8::1", "2001:db8::1-2001:db9::1"} {
		_, err := ParseIPRange(bad)
		require.Error(t, err, bad)
	}
	p, err := ParsePortRange("1000-1099")
	require.NoError(t, err)
	require.Equal(t, PortRange{1000, 1099}, p)
	for _, bad := range []string{"0", "70000", "9-1", "a"} {
		_, err := ParsePortRange(bad)
		require.Error(t, err, bad)
	}
}

// Frames with addresses, ports and VLAN from ranges are well-formed
// (gopacket decodes them, checksums verify), walk their ranges, and reach
// a sink told the same source port, in order.
func TestGeneratorAddressing(t *testing.T) {
	for _, c := range []struct {
		name     string
		src, dst string
		vlan     uint16
	}{{"v4", "198.18.0.1-198.18.0.3", "198.18.1.1", 0}, {"v4-vlan", "198.18.0.1", "198.18.1.1-198.18.1.2", 7},
		{"v6", "2001:db8::1-2001:db8::3", "2001:db8::100", 0}, {"v6-vlan", "2001:db8::1", "2001:db8::100-2001:db8::101", 4094}} {
		t.Run(c.name, func(t *testing.T) {
			pool, err := mbuf.New(mbuf.Options{Name: "addr", Frames: 1024, Debug: true})
			require.NoError(t, err)
			a, b, err := mem.NewPair(pool, mem.PairOptions{Name: "a", Size: 256})
			require.NoError(t, err)
			src, err := ParseIPRange(c.src)
			require.NoError(t, err)
			dst, err := ParseIPRange(c.dst)
			require.NoError(t, err)
			addr := &Addressing{SrcIP: src, DstIP: dst, SrcPort: 20000, DstPort: PortRange{5000, 5001}, VLAN: c.vlan}
			mac := net.HardwareAddr{2, 9, 9, 9, 9, 9}
			gen, err := NewGenerator(GeneratorOptions{Port: a, Pool: pool, Sizes: FixedSize(128), Flows: 2, Count: 12, Addressing: addr, DstMAC: mac})
			require.NoError(t, err)
			now := clock.Time(1)
			gen.Poll(now)
			hs := make([]mbuf.Handle, 32)
			n := b.RxBurst(0, hs)
			require.Equal(t, 12, n)
			seen := map[string]bool{}
			for i, h := range hs[:n] {
				d := pool.Data(h)
				p := gopacket.NewPacket(d, layers.LayerTypeEthernet, gopacket.Default)
				require.Nil(t, p.ErrorLayer(), "%v", p)
				eth := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
				require.Equal(t, mac, eth.DstMAC)
				if c.vlan != 0 {
					require.Equal(t, c.vlan, p.Layer(layers.LayerTypeDot1Q).(*layers.Dot1Q).VLANIdentifier)
				}
				udp := p.Layer(layers.LayerTypeUDP).(*layers.UDP)
				require.Equal(t, layers.UDPPort(20000+i%2), udp.SrcPort, "flows from --src-port")
				require.Equal(t, layers.UDPPort(5000+i%2), udp.DstPort, "the destination port range walked")
				s, dd := p.NetworkLayer().NetworkFlow().Endpoints()
				seen[s.String()+">"+dd.String()] = true
				// wire.DecodeUDP verifies the IP header and UDP checksums
				// (of the frame without its tag).
				untagged := append([]byte(nil), d...)
				if c.vlan != 0 {
					untagged = append(append([]byte(nil), d[:12]...), d[16:]...)
				}
				_, err := wire.DecodeUDP(untagged)
				require.NoError(t, err, "checksums")
				st, ok := ReadStamp(d)
				require.True(t, ok)
				require.Equal(t, uint16(20000+i%2), st.SrcPort)
			}
			require.GreaterOrEqual(t, len(seen), 2, "addresses walked: %v", seen)
			require.Equal(t, n, b.TxBurst(0, hs[:n]), "back to a for the sink")
			sink, err := NewSink(SinkOptions{Port: a, Pool: pool, Flows: 2, SrcPort: 20000})
			require.NoError(t, err)
			sink.Poll(now)
			sink.Stop(now)
			gen.Stop(now)
			st := sink.Stats()
			require.Equal(t, uint64(12), st.InOrder)
			require.Zero(t, st.Foreign)
			require.NoError(t, a.Close())
			require.NoError(t, b.Close())
			require.NoError(t, pool.CheckLeaks())
		})
	}
	pool, err := mbuf.New(mbuf.Options{Name: "small", Frames: 1024})
	require.NoError(t, err)
	defer pool.Close()
	pt, err := null.New(pool, null.Options{})
	require.NoError(t, err)
	defer pt.Close()
	v6a, v6b := netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2")
	_, err = NewGenerator(GeneratorOptions{Port: pt, Pool: pool, Sizes: FixedSize(64), Addressing: &Addressing{
		SrcIP: IPRange{v6a, v6a}, DstIP: IPRange{v6b, v6b}, VLAN: 1}})
	require.ErrorContains(t, err, "too small for these headers")
}

// Ranges cost no allocation per frame.
func TestGeneratorRangesAllocateNothing(t *testing.T) {
	src, _ := ParseIPRange("2001:db8::1-2001:db8::ff")
	dst, _ := ParseIPRange("2001:db8::100")
	g := newNullGenerator(t, GeneratorOptions{Sizes: FixedSize(128), Flows: 4, Addressing: &Addressing{SrcIP: src, DstIP: dst, DstPort: PortRange{9, 99}, VLAN: 5}})
	require.Equal(t, 32, g.Poll(1))
	require.Zero(t, testing.AllocsPerRun(100, func() { g.Poll(2) }))
	g.Stop(3)
}
