package mem_test

import (
	"encoding/binary"
	"net/netip"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/pmd"
	"github.com/peregrine-net/peregrine/pmd/mem"
)

// TestToeplitzVectors checks the hash against the verification suite of
// Microsoft's RSS specification (default key), which NIC datasheets quote.
func TestToeplitzVectors(t *testing.T) {
	for _, tc := range []struct {
		src, dst         string
		sport, dport     uint16
		withPorts, addrs uint32
	}{
		{"66.9.149.187", "161.142.100.80", 2794, 1766, 0x51ccc178, 0x323e8fc2},
		{"199.92.111.2", "65.69.140.83", 14230, 4739, 0xc626b0ea, 0xd718262a},
		{"3ffe:2501:200:1fff::7", "3ffe:2501:200:3::1", 2794, 1766, 0x40207d3d, 0x2cc18cd5},
	} {
		src, dst := netip.MustParseAddr(tc.src), netip.MustParseAddr(tc.dst)
		in := append(src.AsSlice(), dst.AsSlice()...)
		require.Equal(t, tc.addrs, mem.Toeplitz(in), "%s → %s addresses", tc.src, tc.dst)
		in = binary.BigEndian.AppendUint16(in, tc.sport)
		in = binary.BigEndian.AppendUint16(in, tc.dport)
		require.Equal(t, tc.withPorts, mem.Toeplitz(in), "%s → %s with ports", tc.src, tc.dst)

		// The same tuple inside a frame: RSSHash finds it.
		f := udpFrame(src, dst, tc.sport, tc.dport)
		require.Equal(t, tc.withPorts, mem.RSSHash(f))
		if src.Is4() {
			f[14+6] = 0x20 // more fragments: addresses only
			require.Equal(t, tc.addrs, mem.RSSHash(f))
		}
	}
	require.Zero(t, mem.RSSHash([]byte{1, 2, 3}), "a runt hashes to 0 (queue 0)")
	require.Equal(t, 0, mem.RSSQueue(0xffffffff, 1))
	require.Equal(t, 127%5, mem.RSSQueue(0xffffffff, 5), "the low 7 bits index the redirection table")
}

// udpFrame builds an Ethernet/IPv4 or IPv6/UDP frame with 8 payload bytes.
func udpFrame(src, dst netip.Addr, sport, dport uint16) []byte {
	f := make([]byte, 14, 80)
	var l4 int
	if src.Is4() {
		binary.BigEndian.PutUint16(f[12:], 0x0800)
		ip := make([]byte, 20)
		ip[0], ip[8], ip[9] = 0x45, 64, 17
		binary.BigEndian.PutUint16(ip[2:], 20+16)
		copy(ip[12:], src.AsSlice())
		copy(ip[16:], dst.AsSlice())
		f = append(f, ip...)
		l4 = 34
	} else {
		binary.BigEndian.PutUint16(f[12:], 0x86dd)
		ip := make([]byte, 40)
		ip[0], ip[6], ip[7] = 0x60, 17, 64
		binary.BigEndian.PutUint16(ip[4:], 16)
		copy(ip[8:], src.AsSlice())
		copy(ip[24:], dst.AsSlice())
		f = append(f, ip...)
		l4 = 54
	}
	f = binary.BigEndian.AppendUint16(f, sport)
	f = binary.BigEndian.AppendUint16(f, dport)
	f = binary.BigEndian.AppendUint16(f, 16)
	f = append(f, make([]byte, 10)...)
	_ = l4
	return f
}

var (
	addrA = netip.MustParseAddr("198.18.0.1")
	addrB = netip.MustParseAddr("198.18.0.2")
)

// writeFrame fills h with a UDP frame of source port sport, carrying seq.
func writeFrame(t testing.TB, pool *mbuf.Pool, h mbuf.Handle, sport uint16, seq uint32) {
	f := udpFrame(addrA, addrB, sport, 4791)
	binary.BigEndian.PutUint32(f[len(f)-4:], seq)
	require.True(t, pool.SetLen(h, len(f)))
	copy(pool.Data(h), f)
}

// TestSteerHash sends 64 UDP flows from two sending queues into a 4-queue
// hash-steered pair: each packet arrives on the queue RSS names for its
// flow (so each flow on one queue whichever queue sent it), the flows
// spread over every queue, each sender's packets of a flow stay in order,
// and the per-queue counters match on both sides.
func TestSteerHash(t *testing.T) {
	pool := newPool(t, 4096)
	env := &pmd.Env{Pool: pool}
	a, err := pmd.Open(env, "mem:rss/0?queues=4&steer=hash")
	require.NoError(t, err)
	defer a.Close()
	b, err := pmd.Open(env, "mem:rss/1")
	require.NoError(t, err)
	defer b.Close()

	const flows, rounds = 64, 4
	hs := make([]mbuf.Handle, flows)
	want := make([]int, 4)
	for round := range rounds {
		require.Equal(t, flows, pool.AllocBulk(hs))
		for i, h := range hs {
			writeFrame(t, pool, h, uint16(40000+i), uint32(round))
			want[mem.RSSQueue(mem.RSSHash(pool.Data(h)), 4)]++
		}
		require.Equal(t, flows, a.TxBurst(round%2, hs), "sending queue %d", round%2)
	}
	flowQueue := map[uint16]int{}
	lastSeq := map[[2]int]int{} // by flow and sending queue
	buf := make([]mbuf.Handle, 64)
	for q := range 4 {
		got := 0
		for n := b.RxBurst(q, buf); n > 0; n = b.RxBurst(q, buf) {
			for _, h := range buf[:n] {
				d := pool.Data(h)
				sport := binary.BigEndian.Uint16(d[34:])
				require.Equal(t, q, mem.RSSQueue(mem.RSSHash(d), 4), "flow %d on the queue RSS names", sport)
				if prev, ok := flowQueue[sport]; ok {
					require.Equal(t, prev, q, "flow %d on two queues", sport)
				}
				flowQueue[sport] = q
				// Round r went out on queue r%2: a sender's packets of
				// a flow keep their order; two senders' interleave.
				seq := int(binary.BigEndian.Uint32(d[len(d)-4:]))
				key := [2]int{int(sport), seq % 2}
				if prev, ok := lastSeq[key]; ok {
					require.Equal(t, prev+2, seq, "flow %d from queue %d in order", sport, seq%2)
				}
				lastSeq[key] = seq
			}
			got += n
			pool.Free(buf[:n])
		}
		require.Equal(t, want[q], got, "queue %d", q)
		require.NotZero(t, got, "64 flows leave no queue of 4 empty: %v", want)
	}
	require.Len(t, flowQueue, flows)
	sa, sb := a.Stats(), b.Stats()
	require.Equal(t, uint64(flows*rounds/2), sa.Queues[0].TxPackets)
	require.Equal(t, uint64(flows*rounds/2), sa.Queues[1].TxPackets)
	for q := range 4 {
		require.Equal(t, uint64(want[q]), sb.Queues[q].RxPackets, "queue %d counter", q)
	}
	require.Zero(t, pool.InUse())
}

// TestSteerHashFullRing: a full ring towards one receive queue stops the
// burst at the first packet bound for it; the caller keeps that packet and
// the rest, counted as refused, and the pair frees nothing twice.
func TestSteerHashFullRing(t *testing.T) {
	pool := newPool(t, 64)
	a, b, err := mem.NewPair(pool, mem.PairOptions{Queues: 2, Size: 2, Steer: mem.SteerHash})
	require.NoError(t, err)
	hs := make([]mbuf.Handle, 5)
	require.Equal(t, 5, pool.AllocBulk(hs))
	for _, h := range hs {
		writeFrame(t, pool, h, 40000, 0) // one flow: one ring of 2 slots
	}
	require.Equal(t, 2, a.TxBurst(0, hs))
	require.Equal(t, uint64(3), a.Stats().TxDropped)
	pool.Free(hs[2:])
	require.NoError(t, b.Close())
	require.NoError(t, a.Close())
	require.Zero(t, pool.InUse(), "closing both ends frees what the rings held")

	_, _, err = mem.NewPair(pool, mem.PairOptions{Queues: mem.MaxHashQueues + 1, Steer: mem.SteerHash})
	require.ErrorContains(t, err, "with hash steering")
	env := &pmd.Env{Pool: pool}
	_, err = pmd.Open(env, "mem:x/0?steer=rss")
	require.ErrorIs(t, err, pmd.ErrBadParam)
	p, err := pmd.Open(env, "mem:x/0?steer=hash&queues=2")
	require.NoError(t, err)
	defer p.Close()
	_, err = pmd.Open(env, "mem:x/1?steer=queue")
	require.ErrorContains(t, err, "was created with steer=hash")
}

// hashPair returns a hash-steered pair closed at cleanup.
func hashPair(t *testing.T, pool *mbuf.Pool, queues, size int) (a, b *mem.Port) {
	t.Helper()
	a, b, err := mem.NewPair(pool, mem.PairOptions{Queues: queues, Size: size, Steer: mem.SteerHash})
	require.NoError(t, err)
	t.Cleanup(func() {
		a.Close()
		b.Close()
	})
	return a, b
}

// TestSteerHashConcurrent drives two sending and two receiving queues from
// four goroutines (run it with -race): every packet arrives once.
func TestSteerHashConcurrent(t *testing.T) {
	pool := newPool(t, 8192)
	a, b := hashPair(t, pool, 2, 256)
	const perSender = 20000
	var received [2]int
	var done sync.WaitGroup
	var stop sync.WaitGroup
	stopped := make(chan struct{})
	for q := range 2 {
		done.Add(1)
		go func() {
			defer done.Done()
			hs := make([]mbuf.Handle, 32)
			for sent := 0; sent < perSender; {
				n := pool.AllocBurst(hs[:min(32, perSender-sent)])
				for i, h := range hs[:n] {
					writeFrame(t, pool, h, uint16(40000+q*1000+(sent+i)%97), uint32(sent+i))
				}
				k := a.TxBurst(q, hs[:n])
				pool.Free(hs[k:n])
				sent += k
			}
		}()
		stop.Add(1)
		go func() {
			defer stop.Done()
			hs := make([]mbuf.Handle, 32)
			for {
				n := b.RxBurst(q, hs)
				received[q] += n
				pool.Free(hs[:n])
				if n == 0 {
					select {
					case <-stopped:
						for n = b.RxBurst(q, hs); n > 0; n = b.RxBurst(q, hs) {
							received[q] += n
							pool.Free(hs[:n])
						}
						return
					default:
					}
				}
			}
		}()
	}
	done.Wait()
	close(stopped)
	stop.Wait()
	require.Equal(t, 2*perSender, received[0]+received[1])
	require.NotZero(t, received[0])
	require.NotZero(t, received[1])
}

// TestSteerHashAllocs: steering allocates nothing per packet.
func TestSteerHashAllocs(t *testing.T) {
	pool := newPool(t, 256)
	a, b := hashPair(t, pool, 4, 64)
	hs := make([]mbuf.Handle, 32)
	require.Equal(t, 32, pool.AllocBulk(hs))
	for i, h := range hs {
		writeFrame(t, pool, h, uint16(40000+i), 0)
	}
	out := make([]mbuf.Handle, 32)
	allocs := testing.AllocsPerRun(100, func() {
		n := a.TxBurst(0, hs)
		got := 0
		for q := range 4 {
			got += copy(hs[got:], out[:b.RxBurst(q, out[:32-got])])
		}
		if n != 32 || got != 32 {
			t.Fatalf("sent %d, received %d", n, got)
		}
	})
	require.Zero(t, allocs)
	pool.Free(hs)
}

func FuzzRSSHash(f *testing.F) {
	f.Add(udpFrame(addrA, addrB, 1, 2))
	f.Add(udpFrame(netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2"), 1, 2))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x81, 0x00, 0, 1, 0x08, 0x00, 0x4f})
	f.Fuzz(func(t *testing.T, frame []byte) {
		h := mem.RSSHash(frame)
		if q := mem.RSSQueue(h, 3); q < 0 || q > 2 {
			t.Fatalf("queue %d of 3", q)
		}
	})
}
