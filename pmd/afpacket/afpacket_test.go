package afpacket_test

import (
	"bytes"
	"encoding/binary"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/pmd"
	"github.com/peregrine-net/peregrine/pmd/afpacket"
	"github.com/peregrine-net/peregrine/pmd/netns"
	"github.com/peregrine-net/peregrine/pmd/netns/netnstest"
)

// testFrame writes an Ethernet frame of size bytes from src to dst with
// EtherType 0x88b5 and a payload derived from seq.
func testFrame(b []byte, dst, src net.HardwareAddr, seq uint32) {
	copy(b[0:6], dst)
	copy(b[6:12], src)
	binary.BigEndian.PutUint16(b[12:14], 0x88b5)
	binary.BigEndian.PutUint32(b[14:18], seq)
	for i := 18; i < len(b); i++ {
		b[i] = byte(i) ^ byte(seq)
	}
}

func makeFrames(t testing.TB, pool *mbuf.Pool, hs []mbuf.Handle, size int, dst, src net.HardwareAddr, seq uint32) {
	require.Equal(t, len(hs), pool.AllocBulk(hs))
	for i, h := range hs {
		require.True(t, pool.SetLen(h, size))
		testFrame(pool.Data(h), dst, src, seq+uint32(i))
	}
}

// receiveN polls rx until n frames arrived or it stays idle for a while,
// returning copies of what came.
func receiveN(t testing.TB, pool *mbuf.Pool, rx *afpacket.Port, queue, n int) [][]byte {
	out, err := receiveFrames(pool, rx, queue, n)
	require.NoError(t, err)
	return out
}

// receiveFrames is receiveN for goroutines other than the test's.
func receiveFrames(pool *mbuf.Pool, rx *afpacket.Port, queue, n int) ([][]byte, error) {
	var out [][]byte
	bufs := make([]mbuf.Handle, 64)
	for idle := 0; len(out) < n && idle < 100; {
		k := rx.RxBurst(queue, bufs)
		if k == 0 {
			idle++
			if _, err := rx.WaitRx(queue, 5*time.Millisecond); err != nil {
				return out, err
			}
			continue
		}
		idle = 0
		for _, h := range bufs[:k] {
			out = append(out, bytes.Clone(pool.Data(h)))
		}
		pool.Free(bufs[:k])
	}
	return out, nil
}

func TestOptionsValidation(t *testing.T) {
	pool := newPool(t, 64)
	cases := []struct {
		opts afpacket.Options
		want string
	}{
		{afpacket.Options{}, "Options.Interface is empty"},
		{afpacket.Options{Interface: "much-too-long-ifname"}, "longer than 15"},
		{afpacket.Options{Interface: "x", Queues: 65}, "Options.Queues 65"},
		{afpacket.Options{Interface: "x", BlockSize: 5000}, "Options.BlockSize 5000"},
		{afpacket.Options{Interface: "x", BlockCount: -1}, "Options.BlockCount -1"},
		{afpacket.Options{Interface: "x", FrameSize: 100}, "Options.FrameSize 100"},
		{afpacket.Options{Interface: "x", FrameSize: 3000}, "Options.FrameSize 3000"},
		{afpacket.Options{Interface: "x", BlockTimeout: time.Microsecond}, "Options.BlockTimeout"},
		{afpacket.Options{Interface: "x", Fanout: 9}, "Options.Fanout 9"},
		{afpacket.Options{Interface: "x", TxSlots: -1}, "Options.TxSlots -1"},
	}
	for _, c := range cases {
		_, err := afpacket.New(pool, c.opts)
		require.ErrorContains(t, err, c.want)
	}
	_, err := afpacket.New(nil, afpacket.Options{Interface: "lo"})
	require.ErrorContains(t, err, "pool is nil")
}

func TestSpecErrors(t *testing.T) {
	env := &pmd.Env{Pool: newPool(t, 64)}
	for spec, want := range map[string]error{
		"afpacket:":                     pmd.ErrBadSpec,
		"afpacket:lo?bogus=1":           pmd.ErrBadParam,
		"afpacket:lo?queues=0":          pmd.ErrBadParam,
		"afpacket:lo?fanout=random":     pmd.ErrBadParam,
		"afpacket:lo?promisc=maybe":     pmd.ErrBadParam,
		"afpacket:lo?netns=":            pmd.ErrBadParam,
		"afpacket:lo?block_timeout=0":   pmd.ErrBadParam,
		"afpacket:lo?netns=pgt-missing": netns.ErrNotExist,
	} {
		_, err := pmd.Open(env, spec)
		require.ErrorIs(t, err, want, spec)
	}
	_, err := pmd.Open(&pmd.Env{}, "afpacket:lo")
	require.ErrorIs(t, err, pmd.ErrNoPool)
}

func TestNotRootNamesCapability(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("runs only without root: checks the error that names CAP_NET_RAW")
	}
	_, err := afpacket.New(newPool(t, 64), afpacket.Options{Interface: "lo"})
	require.ErrorIs(t, err, afpacket.ErrPermission)
	require.ErrorContains(t, err, "CAP_NET_RAW")
}

func TestUnknownInterfaceListsChoices(t *testing.T) {
	topo := netnstest.TwoNS(t, netns.VethOptions{})
	_, err := afpacket.New(newPool(t, 64), afpacket.Options{Interface: "nosuch0", Netns: topo.A.Name})
	require.ErrorIs(t, err, afpacket.ErrNoInterface)
	require.ErrorContains(t, err, `"nosuch0"`)
	require.ErrorContains(t, err, topo.A.Name)
	require.ErrorContains(t, err, "lo, "+topo.IfA)
	// The namespace's interface is not visible outside it.
	_, err = afpacket.New(newPool(t, 64), afpacket.Options{Interface: topo.IfA})
	require.ErrorIs(t, err, afpacket.ErrNoInterface)
}

func TestOpenThroughRegistry(t *testing.T) {
	topo := netnstest.TwoNS(t, netns.VethOptions{GRO: true, MTU: 2000})
	pool := newPool(t, 256)
	env := &pmd.Env{Pool: pool}
	spec := "afpacket:" + topo.IfB + "?netns=" + topo.B.Name + "&queues=2&block_size=8192&block_count=4&frame_size=4096&qdisc_bypass=1&promisc=1&fanout=lb"
	p, err := pmd.Open(env, spec)
	require.NoError(t, err)
	defer p.Close()
	info := p.Info()
	require.Equal(t, spec, info.Name)
	require.Equal(t, afpacket.DriverName, info.Driver)
	require.Equal(t, 2, info.Queues)
	require.Equal(t, 2000, info.MTU)
	require.Equal(t, topo.MACB, info.MAC)
	out, err := topo.B.Exec("ip", "-d", "link", "show", topo.IfB)
	require.NoError(t, err)
	require.Contains(t, string(out), "promiscuity 1")
	require.NoError(t, p.Close())
	out, err = topo.B.Exec("ip", "-d", "link", "show", topo.IfB)
	require.NoError(t, err)
	require.Contains(t, string(out), "promiscuity 0", "promiscuous mode ends with the port")
}

// TestVLANTagKept sends a VLAN-tagged frame and an untagged one: both must
// arrive byte for byte, a tag the kernel strips into the ring's header
// being put back.
func TestVLANTagKept(t *testing.T) {
	topo := netnstest.TwoNS(t, netns.VethOptions{GRO: true})
	pool := newPool(t, 256)
	tx, rx := openPair(t, pool, topo, afpacket.Options{})

	hs := make([]mbuf.Handle, 2)
	makeFrames(t, pool, hs, 200, topo.MACB, topo.MACA, 7)
	tagged := pool.Data(hs[1])
	copy(tagged[16:], tagged[12:len(tagged)-4]) // make room for the tag
	binary.BigEndian.PutUint32(tagged[12:], 0x8100_0000|5<<13|42)
	want := [][]byte{bytes.Clone(pool.Data(hs[0])), bytes.Clone(tagged)}
	require.Equal(t, 2, tx.TxBurst(0, hs))
	require.Equal(t, want, receiveN(t, pool, rx, 0, 2))
}

// TestRxTime: Meta.RxTime is the kernel's receive time mapped onto the
// port's clock. With a virtual clock standing still at T, it must lie in
// [T - time the round trip took, T].
func TestRxTime(t *testing.T) {
	topo := netnstest.TwoNS(t, netns.VethOptions{GRO: true})
	pool := newPool(t, 256)
	const at = clock.Time(1_000_000_000_000)
	tx, rx := openPair(t, pool, topo, afpacket.Options{Clock: clock.NewVirtual(at)})
	require.NotZero(t, rx.Info().Caps&port.CapRxTimestamp)

	hs := make([]mbuf.Handle, 1)
	makeFrames(t, pool, hs, 100, topo.MACB, topo.MACA, 1)
	start := time.Now()
	require.Equal(t, 1, tx.TxBurst(0, hs))
	bufs := make([]mbuf.Handle, 4)
	n := 0
	for range 100 {
		if n = rx.RxBurst(0, bufs); n > 0 {
			break
		}
		_, err := rx.WaitRx(0, 10*time.Millisecond)
		require.NoError(t, err)
	}
	took := time.Since(start)
	require.Equal(t, 1, n)
	m := pool.Meta(bufs[0])
	require.Equal(t, uint16(0), m.Queue)
	require.LessOrEqual(t, m.RxTime, int64(at))
	require.GreaterOrEqual(t, m.RxTime, int64(at)-int64(took), "frame older than the test")
	pool.Free(bufs[:n])
}

// TestOversizeRxDropped: a frame larger than an mbuf's room is dropped and
// counted, and the next frame still arrives.
func TestOversizeRxDropped(t *testing.T) {
	topo := netnstest.TwoNS(t, netns.VethOptions{GRO: true, MTU: 4000})
	pool := newPool(t, 256) // room: 2048 - 256 = 1792 bytes
	tx, rx := openPair(t, pool, topo, afpacket.Options{})

	// The 2500-byte frame is sent from a pool of 4 KiB frames.
	pool4k, err := mbuf.New(mbuf.Options{Name: "4k", Frames: 64, FrameSize: 4096})
	require.NoError(t, err)
	defer pool4k.Close()
	tx4k, err := afpacket.New(pool4k, afpacket.Options{Interface: topo.IfA, Netns: topo.A.Name, FrameSize: 4096})
	require.NoError(t, err)
	defer tx4k.Close()
	big := make([]mbuf.Handle, 1)
	makeFrames(t, pool4k, big, 2500, topo.MACB, topo.MACA, 1)
	require.Equal(t, 1, tx4k.TxBurst(0, big))
	small := make([]mbuf.Handle, 1)
	makeFrames(t, pool, small, 100, topo.MACB, topo.MACA, 2)
	want := bytes.Clone(pool.Data(small[0]))
	require.Equal(t, 1, tx.TxBurst(0, small))

	got := receiveN(t, pool, rx, 0, 1)
	require.Equal(t, [][]byte{want}, got)
	st := rx.Stats()
	require.Equal(t, uint64(1), st.RxDropped)
	require.Equal(t, uint64(1), st.RxPackets)
}

// TestOversizeTxRejected: a frame longer than MTU+14 is taken, freed and
// counted as an error, never sent.
func TestOversizeTxRejected(t *testing.T) {
	topo := netnstest.TwoNS(t, netns.VethOptions{GRO: true, MTU: 1000})
	pool := newPool(t, 256)
	tx, rx := openPair(t, pool, topo, afpacket.Options{})
	hs := make([]mbuf.Handle, 4)
	makeFrames(t, pool, hs[0:1], 1015, topo.MACB, topo.MACA, 1)
	makeFrames(t, pool, hs[1:2], 1014, topo.MACB, topo.MACA, 2)
	makeFrames(t, pool, hs[2:4], 1018, topo.MACB, topo.MACA, 3)
	binary.BigEndian.PutUint16(pool.Data(hs[2])[12:], 0x8100) // tagged: 4 more bytes allowed
	binary.BigEndian.PutUint16(pool.Data(hs[3])[12:], 0x0800) // untagged: too long
	want := [][]byte{bytes.Clone(pool.Data(hs[1])), bytes.Clone(pool.Data(hs[2]))}
	require.Equal(t, 4, tx.TxBurst(0, hs))
	st := tx.Stats()
	require.Equal(t, uint64(2), st.TxPackets)
	require.Equal(t, uint64(2), st.Errors)
	require.Equal(t, want, receiveN(t, pool, rx, 0, 2))
	require.Zero(t, pool.InUse())
}

// TestTxSlotsBoundTheBurst: a transmit ring of TxSlots slots takes at most
// that many frames in one TxBurst; the caller keeps the rest and they go
// with the next bursts.
func TestTxSlotsBoundTheBurst(t *testing.T) {
	topo := netnstest.TwoNS(t, netns.VethOptions{GRO: true})
	pool := newPool(t, 1024)
	// Two 2048-byte slots per 4 KiB block: 32 slots.
	tx, rx := openPair(t, pool, topo, afpacket.Options{BlockSize: 4096, BlockCount: 64, TxSlots: 31})
	hs := make([]mbuf.Handle, 64)
	makeFrames(t, pool, hs, 100, topo.MACB, topo.MACA, 0)
	want := make([][]byte, len(hs))
	for i, h := range hs {
		want[i] = bytes.Clone(pool.Data(h))
	}
	n := tx.TxBurst(0, hs)
	require.Equal(t, 32, n, "31 slots round up to 16 blocks of 2")
	for sent, tries := n, 0; sent < len(hs); tries++ {
		require.Less(t, tries, 1<<16)
		sent += tx.TxBurst(0, hs[sent:])
	}
	tx.TxFlush(0)
	require.Equal(t, want, receiveN(t, pool, rx, 0, len(hs)))
	require.Zero(t, pool.InUse())
}

// TestTxBatchHoldsFullBurstsUntilFlush: full bursts wait in their slots,
// without a system call, until TxBatch frames are there, a short burst
// comes, or TxFlush; then all of them go.
func TestTxBatchHoldsFullBurstsUntilFlush(t *testing.T) {
	topo := netnstest.TwoNS(t, netns.VethOptions{GRO: true})
	pool := newPool(t, 1024)
	tx, rx := openPair(t, pool, topo, afpacket.Options{TxBatch: 128})
	seq := uint32(0)
	burst := func(n int) {
		hs := make([]mbuf.Handle, n)
		makeFrames(t, pool, hs, 100, topo.MACB, topo.MACA, seq)
		seq += uint32(n)
		require.Equal(t, n, tx.TxBurst(0, hs))
	}
	burst(port.FullBurst)
	burst(2 * port.FullBurst)
	require.Equal(t, 3*port.FullBurst, afpacket.TxHeld(tx, 0), "full bursts below TxBatch wait")
	tx.TxFlush(0)
	require.Zero(t, afpacket.TxHeld(tx, 0))
	require.Len(t, receiveN(t, pool, rx, 0, 3*port.FullBurst), 3*port.FullBurst)

	burst(port.FullBurst)
	burst(5)
	require.Zero(t, afpacket.TxHeld(tx, 0), "a short burst sends what waited with it")
	require.Len(t, receiveN(t, pool, rx, 0, port.FullBurst+5), port.FullBurst+5)

	for range 4 {
		burst(port.FullBurst)
	}
	require.Zero(t, afpacket.TxHeld(tx, 0), "TxBatch frames go at once")
	require.Len(t, receiveN(t, pool, rx, 0, 4*port.FullBurst), 4*port.FullBurst)
	require.Zero(t, pool.InUse())
}

// TestDropsAreCounted floods the receiver while nobody reads it: every
// frame sent is either received or counted in RxDropped.
func TestDropsAreCounted(t *testing.T) {
	topo := netnstest.TwoNS(t, netns.VethOptions{GRO: true})
	pool := newPool(t, 1024)
	tx, rx := openPair(t, pool, topo, afpacket.Options{BlockSize: 8192, BlockCount: 4})
	const total = 2000 // far more than 4 blocks of 8 KiB hold
	hs := make([]mbuf.Handle, 50)
	sent := 0
	for sent < total {
		makeFrames(t, pool, hs, 1000, topo.MACB, topo.MACA, uint32(sent))
		n := tx.TxBurst(0, hs)
		pool.Free(hs[n:])
		sent += n
	}
	tx.TxFlush(0) // full bursts wait for TxBatch frames or a flush
	got := receiveN(t, pool, rx, 0, total)
	st := rx.Stats()
	require.Less(t, len(got), total, "the small ring must have overflowed")
	require.Equal(t, uint64(len(got)), st.RxPackets)
	require.Equal(t, uint64(total), st.RxPackets+st.RxDropped, "every frame is received or counted as dropped")
}

// TestFanoutSpreadsFlows opens a 4-queue receiver: distinct IPv4 flows land
// on different queues, each flow on one queue only, and nothing is lost or
// duplicated.
func TestFanoutSpreadsFlows(t *testing.T) {
	topo := netnstest.TwoNS(t, netns.VethOptions{GRO: true, Queues: 4})
	pool := newPool(t, 2048)
	tx, err := afpacket.New(pool, afpacket.Options{Interface: topo.IfA, Netns: topo.A.Name})
	require.NoError(t, err)
	defer tx.Close()
	rx, err := afpacket.New(pool, afpacket.Options{Interface: topo.IfB, Netns: topo.B.Name, Queues: 4})
	require.NoError(t, err)
	defer rx.Close()

	const flows, perFlow = 64, 4
	sendFlows(t, pool, tx, topo, flows, perFlow)
	// Each queue's receiver keeps its own results; they are read after Wait.
	got := make([][][]byte, 4)
	errs := make([]error, 4)
	var wg sync.WaitGroup
	for q := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[q], errs[q] = receiveFrames(pool, rx, q, flows*perFlow)
		}()
	}
	wg.Wait()
	flowQueue := map[uint16]int{}
	perQueue := make([]int, 4)
	total := 0
	for q := range 4 {
		require.NoError(t, errs[q])
		for _, f := range got[q] {
			port := binary.BigEndian.Uint16(f[34:36])
			if prev, seen := flowQueue[port]; seen {
				require.Equal(t, prev, q, "flow %d on two queues", port)
			}
			flowQueue[port] = q
			perQueue[q]++
			total++
		}
	}
	require.Equal(t, flows*perFlow, total)
	require.Len(t, flowQueue, flows)
	busy := 0
	for _, n := range perQueue {
		if n > 0 {
			busy++
		}
	}
	require.GreaterOrEqual(t, busy, 3, "64 flows over 4 queues: %v", perQueue)
	st := rx.Stats()
	require.Equal(t, uint64(total), st.RxPackets)
	for q, qs := range st.Queues {
		require.Equal(t, uint64(perQueue[q]), qs.RxPackets)
	}
}

// udpFrame writes a minimal IPv4/UDP frame 198.18.0.1:sport → 198.18.0.2:9.
func udpFrame(b []byte, dst, src net.HardwareAddr, sport uint16, seq uint32) {
	copy(b[0:6], dst)
	copy(b[6:12], src)
	binary.BigEndian.PutUint16(b[12:], 0x0800)
	ip := b[14:34]
	ip[0], ip[1] = 0x45, 0
	binary.BigEndian.PutUint16(ip[2:], uint16(len(b)-14))
	binary.BigEndian.PutUint32(ip[4:], 0)
	ip[8], ip[9] = 64, 17
	copy(ip[12:16], []byte{198, 18, 0, 1})
	copy(ip[16:20], []byte{198, 18, 0, 2})
	binary.BigEndian.PutUint16(ip[10:], 0)
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
	udp := b[34:]
	binary.BigEndian.PutUint16(udp[0:], sport)
	binary.BigEndian.PutUint16(udp[2:], 9)
	binary.BigEndian.PutUint16(udp[4:], uint16(len(udp)))
	binary.BigEndian.PutUint16(udp[6:], 0)
	binary.BigEndian.PutUint32(udp[8:], seq)
}

func TestClosedPort(t *testing.T) {
	topo := netnstest.TwoNS(t, netns.VethOptions{GRO: true})
	pool := newPool(t, 64)
	tx, rx := openPair(t, pool, topo, afpacket.Options{})
	require.NoError(t, tx.Close())
	require.NoError(t, rx.Close())
	_, err := rx.Wait(time.Millisecond)
	require.Error(t, err)
	_, err = rx.WaitRx(0, time.Millisecond)
	require.Error(t, err)
	_, err = rx.WaitRx(5, time.Millisecond)
	require.ErrorContains(t, err, "out of range")
}
