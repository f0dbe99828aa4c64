package afxdp

import (
	"encoding/binary"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/peregrine-net/peregrine/core/mbuf"
)

const steerPort = 4791

// cidFrame is a UDP/IPv4 datagram to steerPort whose transport header
// starts with version and cid.
func cidFrame(version, cid uint32) []byte {
	b := frameBuilder{etherType: unix.ETH_P_IP, proto: ipProtoUDP, dport: steerPort}.build()
	binary.BigEndian.PutUint32(b[ethHeaderLen+ipv4MinLen+udpHeaderLen:], version<<28|cid)
	return b
}

// TestProgramCountsMissteered runs the program (BPF_PROG_TEST_RUN, which
// presents every frame on rx queue 0) and checks that only well-formed
// datagrams whose CID names another shard are counted, and that every
// datagram to the port is still redirected.
func TestProgramCountsMissteered(t *testing.T) {
	skipUnlessRoot(t)
	p, err := loadProgram(4, steerPort, 2, false)
	require.NoError(t, err)
	defer p.Close()
	ipv6 := frameBuilder{etherType: unix.ETH_P_IPV6, proto: ipProtoUDP, dport: steerPort}.build()
	binary.BigEndian.PutUint32(ipv6[ethHeaderLen+ipv6HeaderLen+udpHeaderLen:], 1<<28|3<<22|7)
	for _, c := range []struct {
		name  string
		frame []byte
		miss  uint64
	}{
		{"shard 0 on queue 0", cidFrame(1, 0<<22|9), 0},
		{"shard 1 on queue 0", cidFrame(1, 1<<22|9), 1},
		{"shard 3 on queue 0", cidFrame(1, 3<<22|1), 1},
		{"shard 3 over IPv6", ipv6, 1},
		{"version 0", cidFrame(0, 3<<22|1), 0},
		{"no CID word", cidFrame(1, 3<<22|1)[:ethHeaderLen+ipv4MinLen+udpHeaderLen+3], 0},
	} {
		before := p.missteered(0)
		got, err := p.prog.Run(&ebpf.RunOptions{Data: c.frame})
		require.NoError(t, err, c.name)
		require.Equal(t, uint32(xdpPass), got, "%s: redirected to queue 0's slot, empty here, so the XDP_PASS fallback", c.name)
		require.Equal(t, c.miss, p.missteered(0)-before, c.name)
	}
}

// TestMissteeredOnVeth sends datagrams on transmit queue 0 of a two-queue
// veth (so they arrive on receive queue 0) with CIDs of shard 0 and shard 1
// of a two-shard transport: the shard-1 ones are counted on queue 0, exactly,
// and all of them are received on queue 0.
func TestMissteeredOnVeth(t *testing.T) {
	const queues, right, wrong = 2, 40, 25
	tp := topo(t, queues)
	pool := newPool(t, 8192, 2048)
	tx := openPort(t, pool, Options{Interface: tp.IfA, Namespace: tp.A, Queues: queues, RingSize: 512})
	rx := openPort(t, pool, Options{Interface: tp.IfB, Namespace: tp.B, Queues: queues, RingSize: 512, UDPPort: steerPort, ShardBits: 1})

	hs := make([]mbuf.Handle, right+wrong)
	require.Equal(t, len(hs), pool.AllocBulk(hs))
	for i, h := range hs {
		f := cidFrame(1, uint32(i)) // shard 0
		if i >= right {
			f = cidFrame(1, 1<<23|uint32(i)) // shard 1
		}
		copy(f[0:6], tp.MACB)
		copy(f[6:12], tp.MACA)
		require.True(t, pool.SetLen(h, len(f)))
		copy(pool.Data(h), f)
	}
	txAll(t, tx, 0, hs)

	got := [queues]int{}
	bufs := make([]mbuf.Handle, 64)
	for empty := 0; got[0] < len(hs) && empty < 1<<18; {
		n := 0
		for q := range queues {
			k := rx.RxBurst(q, bufs)
			n += k
			for _, h := range bufs[:k] {
				if b := pool.Data(h); len(b) >= 60 && binary.BigEndian.Uint16(b[ethHeaderLen+ipv4MinLen+2:]) == steerPort {
					got[q]++
				}
			}
			pool.Free(bufs[:k])
		}
		if n == 0 {
			empty++
		} else {
			empty = 0
		}
	}
	require.Equal(t, [queues]int{len(hs), 0}, got, "every datagram is delivered on the queue it arrived on")
	require.Equal(t, []uint64{wrong, 0}, rx.Missteered(), "the shard-1 datagrams that arrived on queue 0, exactly")
}
