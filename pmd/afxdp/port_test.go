package afxdp

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/internal/tools/toolstest"
	"github.com/peregrine-net/peregrine/pmd"
	"github.com/peregrine-net/peregrine/pmd/afxdp/internal/xsk"
	"github.com/peregrine-net/peregrine/pmd/netns"
	"github.com/peregrine-net/peregrine/pmd/netns/netnstest"
)

// TestRoundTripLayout sends frames of several sizes and checks where they
// land: at the pool's headroom, for pools with the default headroom and
// with one below XDP_PACKET_HEADROOM, and with 4096-byte frames.
func TestRoundTripLayout(t *testing.T) {
	tp := topo(t, 1)
	for _, c := range []struct {
		frameSize, headroom, wantOff int
	}{
		{2048, 256, 256},
		{2048, 512, 512},
		{4096, 128, xdpPacketHeadroom}, // the kernel cannot start earlier
		{4096, 256, 256},
	} {
		pool, err := mbuf.New(mbuf.Options{Name: "layout", Frames: 2048, FrameSize: c.frameSize, Headroom: c.headroom})
		require.NoError(t, err)
		tx, err := New(pool, Options{Interface: tp.IfA, Namespace: tp.A, RingSize: 256})
		require.NoError(t, err)
		rx, err := New(pool, Options{Interface: tp.IfB, Namespace: tp.B, RingSize: 256})
		require.NoError(t, err)
		for _, size := range []int{60, 1000, 1514} {
			sendFrames(t, tx, pool, 0, 10, size)
			bufs := make([]mbuf.Handle, 16)
			got := 0
			for empty := 0; got < 10 && empty < 1<<18; {
				n := rx.RxBurst(0, bufs)
				if n == 0 {
					empty++
					continue
				}
				for _, h := range bufs[:n] {
					m := pool.Meta(h)
					require.Equal(t, c.wantOff, int(m.DataOff), "frame %d/headroom %d: data offset", c.frameSize, c.headroom)
					require.Equal(t, size, int(m.DataLen))
					require.Equal(t, uint16(0), m.Queue)
					require.Equal(t, byte(0x88), pool.Data(h)[12])
				}
				pool.Free(bufs[:n])
				got += n
			}
			require.Equal(t, 10, got, "frame %d/headroom %d: %d-byte frames", c.frameSize, c.headroom, size)
		}
		require.NoError(t, tx.Close())
		require.NoError(t, rx.Close())
		require.Zero(t, pool.InUse(), "every frame back after Close")
		require.NoError(t, pool.Close())
	}
}

// TestCloseReturnsEveryFrame closes ports while frames sit on the RX ring
// unreceived, on the fill ring and in flight: the pool must be whole again.
func TestCloseReturnsEveryFrame(t *testing.T) {
	tp := topo(t, 2)
	pool, err := mbuf.New(mbuf.Options{Name: "close", Frames: 8192, Debug: true})
	require.NoError(t, err)
	tx, err := New(pool, Options{Interface: tp.IfA, Namespace: tp.A, Queues: 2, RingSize: 512})
	require.NoError(t, err)
	rx, err := New(pool, Options{Interface: tp.IfB, Namespace: tp.B, Queues: 2, RingSize: 512})
	require.NoError(t, err)
	require.Equal(t, 4*256, pool.InUse(), "the kernel holds Queues*FillLevel frames per port (default RingSize/2)")
	for q := range 2 {
		sendFrames(t, tx, pool, q, 300, 100)
	}
	// Receive part of queue 0 only; the rest stays on the RX rings.
	require.Equal(t, 100, receiveFrames(t, rx, pool, 0, 100, 100))
	require.NoError(t, tx.Close())
	require.NoError(t, rx.Close())
	require.Zero(t, pool.InUse())
	require.NoError(t, pool.Close())
}

// TestTxRingFullRefuses takes the sending end down so the kernel stops
// draining the TX ring: TxBurst must then refuse, leave the refused frames
// to the caller untouched, and count them in TxDropped.
func TestTxRingFullRefuses(t *testing.T) {
	tp := topo(t, 1)
	pool := newPool(t, 4096, 2048)
	tx := openPort(t, pool, Options{Interface: tp.IfA, Namespace: tp.A, RingSize: 64})
	_, err := tp.A.Exec("ip", "link", "set", tp.IfA, "down")
	require.NoError(t, err)
	hs := make([]mbuf.Handle, 32)
	accepted := 0
	for {
		require.Equal(t, len(hs), pool.AllocBulk(hs))
		for i, h := range hs {
			require.True(t, pool.SetLen(h, 60))
			pool.Data(h)[59] = byte(i)
		}
		n := tx.TxBurst(0, hs)
		accepted += n
		if n < len(hs) {
			for i, h := range hs[n:] {
				require.Equal(t, byte(n+i), pool.Data(h)[59], "refused frame changed")
			}
			pool.Free(hs[n:])
			require.Equal(t, uint64(len(hs)-n), tx.Stats().TxDropped)
			break
		}
		require.LessOrEqual(t, accepted, 64, "a 64-entry TX ring took more than 64 frames while the link was down")
	}
	require.Equal(t, 64, accepted, "the TX ring takes exactly its size")
}

// TestTxBatchHoldsFullBurstsUntilFlush: in copy mode full bursts wait on
// the TX ring, without a system call, until TxBatch frames are there, a
// short burst comes, or TxFlush; then all of them go.
func TestTxBatchHoldsFullBurstsUntilFlush(t *testing.T) {
	tp := topo(t, 1)
	pool := newPool(t, 4096, 2048)
	tx := openPort(t, pool, Options{Interface: tp.IfA, Namespace: tp.A, ZeroCopy: ZeroCopyOff, TxBatch: 128})
	rx := openPort(t, pool, Options{Interface: tp.IfB, Namespace: tp.B})
	ring := tx.queues[0].tx.ring
	burst := func(n int) {
		hs := make([]mbuf.Handle, n)
		require.Equal(t, n, pool.AllocBulk(hs))
		for _, h := range hs {
			require.True(t, pool.SetLen(h, 60))
			b := pool.Data(h)
			copy(b[0:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
			b[12], b[13] = 0x88, 0xb5
		}
		require.Equal(t, n, tx.TxBurst(0, hs))
	}

	burst(port.FullBurst)
	burst(2 * port.FullBurst)
	require.Equal(t, uint32(3*port.FullBurst), ring.Pending(), "full bursts below TxBatch wait on the ring")
	tx.TxFlush(0)
	require.Zero(t, ring.Pending(), "TxFlush sends them (copy mode: before it returns)")
	require.Equal(t, 3*port.FullBurst, receiveFrames(t, rx, pool, 0, 3*port.FullBurst, 60))

	burst(port.FullBurst)
	burst(5)
	require.Zero(t, ring.Pending(), "a short burst sends what was held with it")
	require.Equal(t, port.FullBurst+5, receiveFrames(t, rx, pool, 0, port.FullBurst+5, 60))

	for range 4 {
		burst(port.FullBurst)
	}
	require.Zero(t, ring.Pending(), "TxBatch frames go at once")
	require.Equal(t, 4*port.FullBurst, receiveFrames(t, rx, pool, 0, 4*port.FullBurst, 60))
}

// TestZeroAllocs checks RxBurst and TxBurst in steady state, with the
// ports' own caches and with the caller's (UseCaches). The caller's cache
// is closed before the ports: Close must not need it.
func TestZeroAllocs(t *testing.T) {
	tp := topo(t, 1)
	pool := newPool(t, 8192, 2048)
	tx := openPort(t, pool, Options{Interface: tp.IfA, Namespace: tp.A, RingSize: 512})
	rx := openPort(t, pool, Options{Interface: tp.IfB, Namespace: tp.B, RingSize: 512})
	cache := pool.NewCache()
	defer cache.Close()
	hs := make([]mbuf.Handle, 32)
	bufs := make([]mbuf.Handle, 64)
	round := func() {
		n := cache.AllocBulk(hs)
		for _, h := range hs[:n] {
			pool.SetLen(h, 64)
			copy(pool.Data(h), []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 1, 0x88, 0xb5})
		}
		sent := tx.TxBurst(0, hs[:n])
		cache.Free(hs[sent:n])
		for range 4 {
			k := rx.RxBurst(0, bufs)
			cache.Free(bufs[:k])
		}
	}
	for range 100 {
		round() // warm up: caches filled, rings cycled
	}
	require.Zero(t, testing.AllocsPerRun(200, round), "allocations per TxBurst+RxBurst round")
	// Again with the ports stocking from and freeing to the test's cache.
	require.NoError(t, rx.UseCaches(0, cache, nil))
	require.NoError(t, tx.UseCaches(0, nil, cache))
	require.ErrorIs(t, tx.UseCaches(1, cache, cache), ErrInvalidOptions)
	for range 100 {
		round()
	}
	require.Zero(t, testing.AllocsPerRun(200, round), "allocations per round with UseCaches")
	// Drain what is still in flight so the leak check sees a quiet pool.
	for range 1000 {
		cache.Free(bufs[:rx.RxBurst(0, bufs)])
	}
}

// TestUDPFilterPassesTheRest attaches the program with udp_port on B: UDP
// to that port reaches the afxdp socket, while other traffic, including
// the ARP exchange that precedes it, reaches B's kernel stack.
func TestUDPFilterPassesTheRest(t *testing.T) {
	skipUnlessRoot(t)
	addrA, addrB := netip.MustParsePrefix("198.18.0.1/30"), netip.MustParsePrefix("198.18.0.2/30")
	tp := netnstest.TwoNS(t, netns.VethOptions{GRO: true, AddrA: addrA, AddrB: addrB})
	pool := newPool(t, 4096, 2048)
	const filtered, other = 9000, 9001
	rx := openPort(t, pool, Options{Interface: tp.IfB, Namespace: tp.B, UDPPort: filtered, RingSize: 256})

	var kernelFiltered, kernelOther *net.UDPConn
	require.NoError(t, tp.B.Do(func() (err error) {
		if kernelFiltered, err = net.ListenUDP("udp4", &net.UDPAddr{IP: addrB.Addr().AsSlice(), Port: filtered}); err != nil {
			return err
		}
		kernelOther, err = net.ListenUDP("udp4", &net.UDPAddr{IP: addrB.Addr().AsSlice(), Port: other})
		return err
	}))
	defer kernelFiltered.Close()
	defer kernelOther.Close()
	var sender *net.UDPConn
	require.NoError(t, tp.A.Do(func() (err error) {
		sender, err = net.ListenUDP("udp4", &net.UDPAddr{IP: addrA.Addr().AsSlice()})
		return err
	}))
	defer sender.Close()

	// Ping B from A: ARP and ICMP reach B's kernel through XDP_PASS.
	ping(t, tp.A, addrB.Addr())

	// The first datagram needs ARP in both directions, through XDP_PASS.
	_, err := sender.WriteToUDP([]byte("to-kernel"), &net.UDPAddr{IP: addrB.Addr().AsSlice(), Port: other})
	require.NoError(t, err)
	buf := make([]byte, 64)
	require.NoError(t, kernelOther.SetReadDeadline(time.Now().Add(10*time.Second))) // a hang guard, not a wait
	n, _, err := kernelOther.ReadFromUDP(buf)
	require.NoError(t, err, "a datagram to port %d must reach B's kernel stack (ARP and non-matching UDP pass)", other)
	require.Equal(t, "to-kernel", string(buf[:n]))

	// Now one to the filtered port, then a marker to the other port: when
	// the marker arrives, the first was already redirected or delivered.
	_, err = sender.WriteToUDP([]byte("to-afxdp"), &net.UDPAddr{IP: addrB.Addr().AsSlice(), Port: filtered})
	require.NoError(t, err)
	_, err = sender.WriteToUDP([]byte("marker"), &net.UDPAddr{IP: addrB.Addr().AsSlice(), Port: other})
	require.NoError(t, err)
	n, _, err = kernelOther.ReadFromUDP(buf)
	require.NoError(t, err)
	require.Equal(t, "marker", string(buf[:n]))

	bufs := make([]mbuf.Handle, 8)
	var got []byte
	for empty := 0; got == nil && empty < 1<<18; empty++ {
		if k := rx.RxBurst(0, bufs); k > 0 {
			require.Equal(t, 1, k, "only the datagram to port %d is redirected", filtered)
			got = append([]byte(nil), pool.Data(bufs[0])...)
			pool.Free(bufs[:k])
		}
	}
	require.NotNil(t, got, "the datagram to port %d did not reach the afxdp socket", filtered)
	require.Equal(t, "to-afxdp", string(got[len(got)-len("to-afxdp"):]))
	raw, err := kernelFiltered.SyscallConn()
	require.NoError(t, err)
	var recvErr error
	require.NoError(t, raw.Read(func(fd uintptr) bool {
		_, _, recvErr = unix.Recvfrom(int(fd), buf, unix.MSG_DONTWAIT)
		return true
	}))
	require.ErrorIs(t, recvErr, unix.EAGAIN, "B's kernel stack must not see the datagram to port %d", filtered)
}

// ping sends one ICMP echo request from inside ns to dst and requires the
// reply.
func ping(t *testing.T, ns *netns.NS, dst netip.Addr) {
	t.Helper()
	var conn net.PacketConn
	require.NoError(t, ns.Do(func() (err error) {
		conn, err = net.ListenPacket("ip4:icmp", "0.0.0.0")
		return err
	}))
	defer conn.Close()
	const id, seq = 0x7067, 1
	req := []byte{8, 0, 0, 0, id >> 8, id & 0xff, 0, seq, 'p', 'e', 'r', 'e', 'g', 'r', 'i', 'n', 'e'}
	binary.BigEndian.PutUint16(req[2:], icmpChecksum(req))
	_, err := conn.WriteTo(req, &net.IPAddr{IP: dst.AsSlice()})
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second))) // a hang guard, not a wait
	buf := make([]byte, 1500)
	for {
		n, from, err := conn.ReadFrom(buf)
		require.NoError(t, err, "no echo reply from %v", dst)
		// Go strips the IPv4 header of ip4 sockets; any other ICMP
		// message is skipped.
		if n >= 8 && buf[0] == 0 && binary.BigEndian.Uint16(buf[4:]) == id && from.String() == dst.String() {
			return
		}
	}
}

func icmpChecksum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// TestForeignProgramIsLeftAlone attaches a program of "someone else" to the
// interface: opening must fail with ErrForeignProgram, and the program must
// still be attached afterwards.
func TestForeignProgramIsLeftAlone(t *testing.T) {
	tp := topo(t, 1)
	pool := newPool(t, 4096, 2048)
	foreign, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: "someone_else", Type: ebpf.XDP, License: "MIT",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, xdpPass), asm.Return()},
	})
	require.NoError(t, err)
	defer foreign.Close()
	info, err := foreign.Info()
	require.NoError(t, err)
	id, ok := info.ID()
	require.True(t, ok)
	var l link.Link
	require.NoError(t, tp.B.Do(func() error {
		ifc, err := net.InterfaceByName(tp.IfB)
		if err != nil {
			return err
		}
		l, err = link.AttachXDP(link.XDPOptions{Program: foreign, Interface: ifc.Index, Flags: link.XDPDriverMode})
		return err
	}))
	defer l.Close()

	for _, mode := range []Mode{ModeAuto, ModeNative, ModeGeneric} {
		_, err = New(pool, Options{Interface: tp.IfB, Namespace: tp.B, Mode: mode, RingSize: 64})
		require.ErrorIs(t, err, ErrForeignProgram, "mode %s", mode)
		require.Contains(t, err.Error(), "someone_else", "the error names the program")
		require.Contains(t, err.Error(), "will not detach")
		require.Zero(t, pool.InUse(), "a failed open returns its frames")
	}
	require.NoError(t, tp.B.Do(func() error {
		ifc, err := net.InterfaceByName(tp.IfB)
		if err != nil {
			return err
		}
		mode, prog, err := xdpState(ifc.Index)
		if err != nil {
			return err
		}
		require.Equal(t, uint32(id), prog, "the foreign program is still attached")
		require.Equal(t, uint8(xsk.XDPAttachedDrv), mode)
		return nil
	}))
}

// TestSharedInterface opens two ports on two queues of one interface with
// one Attachments; each receives its queue's frames, and the program goes
// away with the last of them. Without shared Attachments the second open
// fails, naming peregrine's own program.
func TestSharedInterface(t *testing.T) {
	tp := topo(t, 2)
	pool := newPool(t, 8192, 2048)
	tx := openPort(t, pool, Options{Interface: tp.IfA, Namespace: tp.A, Queues: 2, RingSize: 256})
	shared := NewAttachments()
	rx0, err := New(pool, Options{Interface: tp.IfB, Namespace: tp.B, Queue: 0, RingSize: 256, Attachments: shared})
	require.NoError(t, err)
	rx1, err := New(pool, Options{Interface: tp.IfB, Namespace: tp.B, Queue: 1, RingSize: 256, Attachments: shared})
	require.NoError(t, err)

	_, err = New(pool, Options{Interface: tp.IfB, Namespace: tp.B, Queue: 1, RingSize: 256, Attachments: shared})
	require.ErrorIs(t, err, ErrQueueBusy)
	_, err = New(pool, Options{Interface: tp.IfB, Namespace: tp.B, Queue: 1, RingSize: 256, Attachments: shared, UDPPort: 53})
	require.ErrorIs(t, err, ErrInvalidOptions, "a different filter cannot share the program")
	_, err = New(pool, Options{Interface: tp.IfB, Namespace: tp.B, Queue: 1, RingSize: 256})
	require.ErrorIs(t, err, ErrForeignProgram)
	require.Contains(t, err.Error(), ProgramName)

	sendFrames(t, tx, pool, 0, 20, 64)
	sendFrames(t, tx, pool, 1, 30, 64)
	require.Equal(t, 20, receiveFrames(t, rx0, pool, 0, 20, 64))
	require.Equal(t, 30, receiveFrames(t, rx1, pool, 0, 30, 64))

	require.NoError(t, rx0.Close())
	sendFrames(t, tx, pool, 1, 10, 64)
	require.Equal(t, 10, receiveFrames(t, rx1, pool, 0, 10, 64), "queue 1 keeps working after queue 0's port closed")
	require.NoError(t, rx1.Close())
	require.NoError(t, tp.B.Do(func() error {
		ifc, err := net.InterfaceByName(tp.IfB)
		if err != nil {
			return err
		}
		_, prog, err := xdpState(ifc.Index)
		require.Zero(t, prog, "the last port detached the program")
		return err
	}))
}

// TestBusyPoll opens a receiver with preferred busy polling, which enters
// the kernel on every empty poll, and moves frames through it.
func TestBusyPoll(t *testing.T) {
	tp := topo(t, 1)
	pool := newPool(t, 4096, 2048)
	tx := openPort(t, pool, Options{Interface: tp.IfA, Namespace: tp.A, RingSize: 256, BusyBudget: 64})
	rx := openPort(t, pool, Options{Interface: tp.IfB, Namespace: tp.B, RingSize: 256, BusyBudget: 64})
	sendFrames(t, tx, pool, 0, 50, 128)
	require.Equal(t, 50, receiveFrames(t, rx, pool, 0, 50, 128))

	// Empty polls busy-poll only a socket whose NAPI context the kernel
	// has named: a socket that never received (a forwarder's output port,
	// like tx) has none and skips the syscall. Whether the receiver gets
	// one depends on the kernel (6.18's veth names none to AF_XDP copy-mode
	// sockets, so busy polling there never polls anything).
	bufs := make([]mbuf.Handle, 8)
	for range 3 * (napiCheckMask + 1) {
		require.Zero(t, tx.RxBurst(0, bufs))
		require.Zero(t, rx.RxBurst(0, bufs))
	}
	require.Zero(t, tx.queues[0].sock.NAPIID())
	require.False(t, tx.queues[0].rx.napiKnown, "a socket that never received does not busy-poll")
	napi := rx.queues[0].sock.NAPIID()
	require.Equal(t, napi != 0, rx.queues[0].rx.napiKnown, "the receiver busy-polls exactly when the kernel named its NAPI (%d)", napi)
	t.Logf("the receiver's NAPI id: %d", napi)
}

// TestBusyPollOptionsApplied opens ports with the busy-polling parameters
// of the spec and reads the socket options back from the kernel.
func TestBusyPollOptionsApplied(t *testing.T) {
	tp := topo(t, 1)
	pool := newPool(t, 4096, 2048)
	for _, c := range []struct {
		params string
		want   xsk.BusyPoll
	}{
		{"", xsk.BusyPoll{}},
		{"&busy_poll=50&busy_budget=16&prefer_busy=1", xsk.BusyPoll{Usec: 50, Budget: 16, Prefer: true}},
		{"&busy_budget=32", xsk.BusyPoll{Usec: 20, Budget: 32, Prefer: true}},
		{"&busy_poll=30&prefer_busy=0", xsk.BusyPoll{Usec: 30, Budget: 64}},
	} {
		p, err := pmd.Open(&pmd.Env{Pool: pool}, fmt.Sprintf("afxdp:%s?netns=%s&ring=256%s", tp.IfB, tp.B.Name, c.params))
		require.NoError(t, err, c.params)
		got, err := p.(*Port).queues[0].sock.BusyPollSettings()
		polls := p.(*Port).queues[0].rx.busyPoll
		require.NoError(t, p.Close())
		require.NoError(t, err)
		if got.Budget == -1 {
			c.want.Budget = -1 // the kernel does not report it; setsockopt took it
		}
		if c.want.Usec == 0 {
			// Off: the socket keeps the system's defaults (net.core.busy_read).
			require.False(t, got.Prefer, c.params)
			require.False(t, polls, c.params)
		} else {
			require.Equal(t, c.want, got, c.params)
			require.True(t, polls, c.params)
		}
	}
	for _, bad := range []string{"&busy_poll=-1", "&busy_budget=70000", "&prefer_busy=maybe", "&busy_poll=2000000"} {
		_, err := pmd.Open(&pmd.Env{Pool: pool}, fmt.Sprintf("afxdp:%s?netns=%s&ring=256%s", tp.IfB, tp.B.Name, bad))
		require.ErrorIs(t, err, pmd.ErrBadParam, bad)
	}
}

// TestFillLevel: a port keeps FillLevel frames on its fill ring, not
// RingSize, while frames flow through it.
func TestFillLevel(t *testing.T) {
	tp := topo(t, 1)
	pool := newPool(t, 4096, 2048)
	tx := openPort(t, pool, Options{Interface: tp.IfA, Namespace: tp.A, RingSize: 256, FillLevel: 32})
	require.Equal(t, 32, pool.InUse(), "the sender's fill ring")
	rx, err := pmd.Open(&pmd.Env{Pool: pool}, fmt.Sprintf("afxdp:%s?netns=%s&ring=256&fill=64", tp.IfB, tp.B.Name))
	require.NoError(t, err)
	defer func() { require.NoError(t, rx.Close()) }()
	require.Equal(t, 32+64, pool.InUse(), "and the receiver's")
	for range 10 { // 320 frames: the fill ring is restocked as they are received
		sendFrames(t, tx, pool, 0, 32, 60)
		require.Equal(t, 32, receiveFrames(t, rx.(*Port), pool, 0, 32, 60))
	}
	// At most the last burst is still in flight (reclaimed by the next
	// TxBurst); with full fill rings the ports would hold 2×256.
	require.LessOrEqual(t, pool.InUse(), 32+64+32, "the fill levels hold")
}

// TestOpenErrors covers what a user gets wrong.
func TestOpenErrors(t *testing.T) {
	tp := topo(t, 1)
	pool := newPool(t, 4096, 2048)

	_, err := New(pool, Options{Interface: "nope0", Namespace: tp.A, RingSize: 64})
	require.ErrorIs(t, err, ErrNoInterface)
	require.Contains(t, err.Error(), tp.IfA, "the error lists the interfaces there are")
	require.Contains(t, err.Error(), "lo")

	_, err = New(pool, Options{Interface: tp.IfA, Namespace: tp.A, Queue: 1, RingSize: 64})
	require.ErrorIs(t, err, ErrNoQueue)
	require.Contains(t, err.Error(), "has 1 queue(s)")

	_, err = New(pool, Options{Interface: tp.IfA, Namespace: tp.A, ZeroCopy: ZeroCopyOn, RingSize: 64})
	require.ErrorIs(t, err, ErrNotSupported, "veth has no zero-copy AF_XDP")

	_, err = New(pool, Options{Interface: tp.IfA, Namespace: tp.A, RingSize: 8192, FillLevel: 8192})
	require.ErrorIs(t, err, ErrInvalidOptions, "the fill ring needs more frames than the pool has")

	p, err := New(pool, Options{Interface: tp.IfA, Namespace: tp.A, ZeroCopy: ZeroCopyOff, Mode: ModeGeneric, RingSize: 64})
	require.NoError(t, err)
	require.Equal(t, ModeGeneric, p.Mode())
	require.False(t, p.ZeroCopy())
	require.NoError(t, p.Close())
	require.Zero(t, pool.InUse())
}

// TestMTULimits: frames bigger than a pool frame are refused at open, and
// native mode names the veth XDP limit while auto falls back to generic.
func TestMTULimits(t *testing.T) {
	skipUnlessRoot(t)
	tp := netnstest.TwoNS(t, netns.VethOptions{MTU: 3600, GRO: true})
	small := newPool(t, 1024, 2048)
	_, err := New(small, Options{Interface: tp.IfB, Namespace: tp.B, RingSize: 64})
	require.ErrorIs(t, err, ErrFrameTooSmall)
	require.Contains(t, err.Error(), "MTU 3600")

	big := newPool(t, 1024, 4096)
	_, err = New(big, Options{Interface: tp.IfB, Namespace: tp.B, Mode: ModeNative, RingSize: 64})
	require.ErrorIs(t, err, ErrNotSupported)
	require.Contains(t, err.Error(), "at most 3506", "the error gives the veth limit")
	p, err := New(big, Options{Interface: tp.IfB, Namespace: tp.B, RingSize: 64})
	require.NoError(t, err)
	require.Equal(t, ModeGeneric, p.Mode(), "auto falls back to generic mode")
	require.NoError(t, p.Close())
}

// TestNeedsPrivilege runs the open as nobody with no capabilities, in a
// child process: it must fail with ErrPermission naming the capabilities.
func TestNeedsPrivilege(t *testing.T) {
	if childMode() {
		pool, err := mbuf.New(mbuf.Options{Frames: 1024})
		require.NoError(t, err)
		_, err = New(pool, Options{Interface: "lo", RingSize: 64})
		require.ErrorIs(t, err, ErrPermission)
		require.Contains(t, err.Error(), "CAP_BPF")
		return
	}
	skipUnlessRoot(t)
	setpriv := toolstest.Path(t, "setpriv")
	cmd := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all",
		testBinary(t), "-test.run=^TestNeedsPrivilege$", "-test.count=1")
	cmd.Env = append(cmd.Environ(), childEnv+"=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "unprivileged child:\n%s", out)
}

const childEnv = "PEREGRINE_AFXDP_UNPRIVILEGED_CHILD"

func childMode() bool { return os.Getenv(childEnv) == "1" }

// testBinary copies the test binary where an unprivileged user may run it.
func testBinary(t *testing.T) string {
	exe, err := os.Executable()
	require.NoError(t, err)
	dir, err := os.MkdirTemp("", "afxdp-priv")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	data, err := os.ReadFile(exe)
	require.NoError(t, err)
	bin := filepath.Join(dir, "afxdp.test")
	require.NoError(t, os.WriteFile(bin, data, 0o755))
	return bin
}

// TestJumboFramesAcrossChunks: with pool frames above a page the port
// carries frames larger than a UMEM chunk as several descriptors
// (multi-buffer) and hands the receiver each one whole, byte for byte, in
// one pool frame; nothing leaks.
func TestJumboFramesAcrossChunks(t *testing.T) {
	skipUnlessRoot(t)
	tp := netnstest.TwoNS(t, netns.VethOptions{GRO: true, MTU: 9000})
	pool := newPoolWith(t, mbuf.Options{Name: "jumbo", Frames: 2048, FrameSize: 16384})
	tx := openPort(t, pool, Options{Interface: tp.IfA, Namespace: tp.A, RingSize: 512, Mode: ModeGeneric})
	rx := openPort(t, pool, Options{Interface: tp.IfB, Namespace: tp.B, RingSize: 512, Mode: ModeGeneric})
	sizes := []int{60, 1514, 3839, 3840, 3841, 4096, 8000, 9014}
	bufs := make([]mbuf.Handle, 16)
	for _, size := range sizes {
		hs := make([]mbuf.Handle, 8)
		require.Equal(t, len(hs), pool.AllocBulk(hs))
		var want [][]byte
		for i, h := range hs {
			require.True(t, pool.SetLen(h, size))
			b := pool.Data(h)
			for j := range b {
				b[j] = byte(i*7 + j*13)
			}
			copy(b[0:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
			b[12], b[13] = 0x88, 0xb5
			want = append(want, bytes.Clone(b))
		}
		require.Equal(t, len(hs), tx.TxBurst(0, hs))
		tx.TxFlush(0)
		var got [][]byte
		for empty := 0; len(got) < len(hs) && empty < 1<<18; {
			n := rx.RxBurst(0, bufs)
			if n == 0 {
				empty++
				continue
			}
			for _, h := range bufs[:n] {
				require.Equal(t, pool.Headroom(), int(pool.Meta(h).DataOff), "%d-byte frame starts at the headroom", size)
				got = append(got, bytes.Clone(pool.Data(h)))
			}
			pool.Free(bufs[:n])
		}
		require.Equal(t, want, got, "%d-byte frames arrive whole and in order", size)
	}
	require.NoError(t, tx.Close())
	require.NoError(t, rx.Close())
	require.Zero(t, pool.InUse(), "every frame back after Close")
}

// TestReceiveResumesAfterFillRingRanDry is a receiver starved of CPU: it
// does not poll while three times its fill level arrives, so the kernel
// fills every lent frame and then drops, counting an empty fill ring. Its
// next polls must receive what the kernel kept and stock the fill ring
// again from the frames they free, so that later frames all arrive — in
// copy mode nothing needs waking for that, and without a CPU to run on a
// loop can do no more than this.
func TestReceiveResumesAfterFillRingRanDry(t *testing.T) {
	tp := topo(t, 1)
	pool := newPool(t, 4096, 2048)
	tx := openPort(t, pool, Options{Interface: tp.IfA, Namespace: tp.A, RingSize: 256})
	rx := openPort(t, pool, Options{Interface: tp.IfB, Namespace: tp.B, RingSize: 256})
	const fill = 128 // FillLevel: RingSize/2
	for range 3 {
		sendFrames(t, tx, pool, 0, fill, 100)
	}
	k := rx.KernelStats()[0]
	require.Positive(t, k.RxFillRingEmptyDescs, "the kernel found the fill ring empty (%+v)", k)
	require.Equal(t, fill, receiveFrames(t, rx, pool, 0, 3*fill, 100), "what the kernel kept: one fill level")
	require.Equal(t, uint64(fill), rx.Stats().RxPackets)
	dropped := rx.KernelStats()[0].RxFillRingEmptyDescs
	for range 4 {
		sendFrames(t, tx, pool, 0, fill/2, 100)
		require.Equal(t, fill/2, receiveFrames(t, rx, pool, 0, fill/2, 100), "reception resumed with the fill ring stocked again")
	}
	require.Equal(t, dropped, rx.KernelStats()[0].RxFillRingEmptyDescs, "no drop once the receiver polls")
}

// TestQueueHeldByAnotherSocket: a queue that a live AF_XDP socket outside
// any port holds is refused with ErrQueueBusy once the open's wait for a
// late release (releaseWait) has passed, and taken at once when that
// socket is closed: a socket just closed may hold its queue until the
// kernel's deferred release runs, and the open waits for that.
func TestQueueHeldByAnotherSocket(t *testing.T) {
	tp := topo(t, 1)
	pool := newPool(t, 4096, 2048)
	other := newPool(t, 4096, 2048)
	var holder *xsk.Socket
	require.NoError(t, tp.B.Do(func() error {
		ifc, err := net.InterfaceByName(tp.IfB)
		if err != nil {
			return err
		}
		holder, err = xsk.Open(xsk.Config{Ifindex: ifc.Index, Queue: 0, RingSize: 256, UMEM: other.Arena(), ChunkSize: 2048,
			BindFlags: unix.XDP_COPY})
		return err
	}))
	start := time.Now()
	_, err := New(pool, Options{Interface: tp.IfB, Namespace: tp.B, RingSize: 256})
	require.ErrorIs(t, err, ErrQueueBusy)
	require.ErrorContains(t, err, "in use by another AF_XDP socket")
	require.GreaterOrEqual(t, time.Since(start), releaseWait, "refused before its wait for a late release")

	require.NoError(t, holder.Close())
	openPort(t, pool, Options{Interface: tp.IfB, Namespace: tp.B, RingSize: 256})
}
