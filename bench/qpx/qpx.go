// Package qpx is the `peregrine bench qpx` scenario: global-to-
// local QP translation and the RoCEv2 stage, each against a baseline
// measured in the same run on the same data.
//
//   - qpx_lookup_vs_map_64 and _65536: Table.Translate per packet against
//     a Go map[uint32]int32 keyed by QPN, the same live QPNs looked up in
//     the same random order (goal ≥ 2).
//   - icrc_vs_crc32_ieee: bytes per second of the RoCEv2 ICRC (masked
//     view, in place) against hash/crc32 IEEE over the same bytes of the
//     same frames (goal ≥ 0.90).
//   - roce_stage_cost_vs_floor: ns per packet of the stage's whole work
//     (parse, translate, access and PSN check, ICRC check, rewrite and
//     ICRC patch), both directions in turn, against a floor on the same
//     frames: locate each frame's headers (wire.ParseRoCE) and run
//     hash/crc32 over the bytes the ICRC covers, nothing else (goal ≤
//     1.5). Over a mix of 64-byte and 1 KiB frames; each size is printed.
//   - stage Mpps per core at 64 B and 1 KiB (the stage's work, no port
//     I/O), retire_reopen_ns (Close then Open on a full table) and
//     allocs_per_packet (goal 0).
//
// The frames live in ordinary memory, not an mbuf pool: the stage reads
// and writes them in place either way.
package qpx

import (
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"time"

	"github.com/peregrine-net/peregrine/bench/report"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/qpx"
	"github.com/peregrine-net/peregrine/core/roce"
	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/pmd/mem"
)

// Options configures a run.
type Options struct {
	Out io.Writer
	// Lookups per translation measurement (0: 2^22).
	Lookups int
	// Passes over the frame set per stage measurement (0: 400).
	Passes int
	// Rounds: each figure is the best of this many (0: 3).
	Rounds int
}

// Run measures and prints the report; it returns the pass and fail counts.
func Run(ctx context.Context, o Options) (pass, fail int, err error) {
	if o.Lookups == 0 {
		o.Lookups = 1 << 22
	}
	if o.Passes == 0 {
		o.Passes = 400
	}
	if o.Rounds == 0 {
		o.Rounds = 3
	}
	rep := report.New(o.Out)
	fmt.Fprintf(o.Out, "# bench qpx: %s, GOMAXPROCS %d\n", runtime.Version(), runtime.GOMAXPROCS(0))

	for _, n := range []int{64, 65536} {
		if ctx.Err() != nil {
			return 0, 0, ctx.Err()
		}
		qNs, mNs, err := LookupVsMap(n, o.Lookups, o.Rounds)
		if err != nil {
			return 0, 0, err
		}
		for _, s := range []struct { // --report's figure
			name string
			ns   float64
		}{{"qpx", qNs}, {"map", mNs}} {
			fmt.Fprintln(o.Out, report.Point{Figure: "qpx_lookup_ns_vs_live_qps", Series: s.name, X: float64(n), Y: s.ns, XLabel: "live_QPs", YLabel: "ns_per_lookup"}.Line())
		}
		rep.Add(report.Ratio{Name: fmt.Sprintf("qpx_lookup_vs_map_%d", n), Value: mNs / qNs, Op: report.AtLeast, Target: 2,
			Detail: fmt.Sprintf("%d live QPs, random order: qpx Translate %.2f ns, map[uint32]int32 %.2f ns", n, qNs, mNs)})
	}

	sets, err := frameSets()
	if err != nil {
		return 0, 0, err
	}
	var icrcNs, crcNs float64
	var bytes int
	for _, fs := range sets {
		i, c := ICRCVsCRC(fs, o.Passes, o.Rounds)
		icrcNs += i
		crcNs += c
		bytes += fs.covered
	}
	rep.Add(report.Ratio{Name: "icrc_vs_crc32_ieee", Value: crcNs / icrcNs, Op: report.AtLeast, Target: 0.90,
		Detail: fmt.Sprintf("%.2f GB/s ICRC vs %.2f GB/s crc32 IEEE over the same %d covered bytes (64 B and 1 KiB frames)",
			float64(bytes)/icrcNs, float64(bytes)/crcNs, bytes)})

	var stageNs, floorNs float64
	var mpps [2]float64
	for i, fs := range sets {
		if ctx.Err() != nil {
			return 0, 0, ctx.Err()
		}
		s, f, err := StageVsFloor(fs, o.Passes, o.Rounds)
		if err != nil {
			return 0, 0, err
		}
		stageNs += s
		floorNs += f
		mpps[i] = 1e3 / s
		fmt.Fprintln(o.Out, report.Point{Figure: "roce_stage_ns_vs_frame_size", Series: "stage", X: float64(fs.size), Y: s, XLabel: "frame_size_B", YLabel: "ns_per_packet"}.Line())
		fmt.Fprintln(o.Out, report.Point{Figure: "roce_stage_ns_vs_frame_size", Series: "floor", X: float64(fs.size), Y: f, XLabel: "frame_size_B", YLabel: "ns_per_packet"}.Line())
		rep.Note("%d-byte frames: stage %.1f ns/packet, floor %.1f ns/packet (%.2fx)", fs.size, s, f, s/f)
	}
	rep.Add(report.Ratio{Name: "roce_stage_cost_vs_floor", Value: stageNs / floorNs, Op: report.AtMost, Target: 1.5,
		Detail: fmt.Sprintf("mean over 64 B and 1 KiB frames: stage %.1f ns/packet, floor (parse + crc32 over the ICRC-covered bytes) %.1f ns/packet",
			stageNs/2, floorNs/2)})
	fmt.Fprintf(o.Out, "MPPS roce_stage_64B %.2f\nMPPS roce_stage_1KiB %.2f\n", mpps[0], mpps[1])
	rep.Note("Mpps per core of the stage's work alone (no port I/O)")

	for _, n := range []int{64, 65536} {
		ns, err := RetireReopen(n, o.Lookups/16)
		if err != nil {
			return 0, 0, err
		}
		fmt.Fprintf(o.Out, "FIGURE retire_reopen_ns_%d %.1f\n", n, ns)
	}
	allocs, err := AllocsPerPacket(sets[0])
	if err != nil {
		return 0, 0, err
	}
	rep.Add(report.Ratio{Name: "allocs_per_packet", Value: allocs, Op: report.AtMost, Target: 0,
		Detail: "heap allocations per packet of the stage's Poll through mem ports, both directions"})
	pass, fail = rep.Summary()
	return pass, fail, nil
}

// LookupVsMap returns ns per lookup of qpx Translate and of a Go map, n
// live QPs, the same random sequence of their numbers.
func LookupVsMap(n, lookups, rounds int) (qpxNs, mapNs float64, err error) {
	tb, err := qpx.New(qpx.Options{Slots: n, Seed: 0x9e3779b97f4a7c15})
	if err != nil {
		return 0, 0, err
	}
	m := make(map[uint32]int32, n)
	qs := make([]uint32, n)
	for i := range qs {
		q, l, err := tb.Open(qpx.Context{})
		if err != nil {
			return 0, 0, err
		}
		qs[i] = q
		m[q] = int32(l)
	}
	r := rand.New(rand.NewPCG(1, 2))
	keys := make([]uint32, 1<<16)
	for i := range keys {
		keys[i] = qs[r.IntN(n)]
	}
	passes := max(1, lookups/len(keys))
	qpxNs, mapNs = 1e18, 1e18
	var sink int
	for range rounds {
		start := time.Now()
		for range passes {
			for _, k := range keys {
				l, ok := tb.Translate(k)
				if ok {
					sink += l
				}
			}
		}
		qpxNs = min(qpxNs, float64(time.Since(start).Nanoseconds())/float64(passes*len(keys)))
		var hits uint64
		start = time.Now()
		for range passes {
			for _, k := range keys {
				l, ok := m[k]
				if ok {
					hits++
					sink += int(l)
				}
			}
		}
		mapNs = min(mapNs, float64(time.Since(start).Nanoseconds())/float64(passes*len(keys)))
		sink += int(hits)
	}
	if sink == 42 {
		fmt.Print("")
	}
	return qpxNs, mapNs, nil
}

// frameSet is a set of RoCEv2 frames of one size for QPs of one table.
type frameSet struct {
	size    int
	frames  [][]byte
	views   []wire.RoCEView
	covered int // ICRC-covered bytes over the set
	qpns    []uint32
}

const (
	setQPs    = 64
	setFrames = 1024
)

func frameSets() ([]frameSet, error) {
	var out []frameSet
	for _, size := range []int{64, 1024} {
		fs := frameSet{size: size}
		for q := range setQPs {
			fs.qpns = append(fs.qpns, qpx.FirstQPN+uint32(q))
		}
		a := wire.Addrs{
			SrcMAC: [6]byte{2, 0, 0, 0, 0, 1}, DstMAC: [6]byte{2, 0, 0, 0, 0, 2},
			SrcIP: netip.MustParseAddr("198.18.0.1"), DstIP: netip.MustParseAddr("198.18.0.2"),
			SrcPort: 49152, NoUDPChecksum: true,
		}
		// Frame size without FCS: headers 14+20+8+12, ICRC 4.
		payload := make([]byte, size-14-20-8-12-4)
		for i := range setFrames {
			q := i % setQPs
			spec := roce.FrameSpec{Addrs: a, BTH: wire.BTH{Opcode: 0x04, PKey: 0xffff, DestQP: fs.qpns[q], PSN: uint32(i / setQPs)}, Payload: payload}
			b := make([]byte, 2048)
			n, err := spec.Encode(b)
			if err != nil {
				return nil, err
			}
			var v wire.RoCEView
			if err := wire.ParseRoCE(b[:n], wire.RoCEv2Port, &v); err != nil {
				return nil, err
			}
			fs.frames = append(fs.frames, b[:n])
			fs.views = append(fs.views, v)
			fs.covered += v.ICRCOff - (v.L3Off - 8)
		}
		out = append(out, fs)
	}
	return out, nil
}

// ICRCVsCRC returns ns per pass over the set of the ICRC and of crc32
// IEEE over the same covered bytes.
func ICRCVsCRC(fs frameSet, passes, rounds int) (icrcNs, crcNs float64) {
	icrcNs, crcNs = 1e18, 1e18
	var sink uint32
	for range rounds {
		start := time.Now()
		for range passes {
			for i, b := range fs.frames {
				sink ^= fs.views[i].ICRC(b)
			}
		}
		icrcNs = min(icrcNs, float64(time.Since(start).Nanoseconds())/float64(passes))
		start = time.Now()
		for range passes {
			for i, b := range fs.frames {
				v := &fs.views[i]
				sink ^= crc32.Update(0, crc32.IEEETable, b[v.L3Off-8:v.ICRCOff])
			}
		}
		crcNs = min(crcNs, float64(time.Since(start).Nanoseconds())/float64(passes))
	}
	if sink == 42 {
		fmt.Print("")
	}
	return icrcNs, crcNs
}

// stageFor builds a stage over two idle mem pairs (the work is driven
// through ProcessToHost and ProcessToNet) with the set's QPs open, each
// sending back to its own number so that a frame translated to the host
// and back is the frame it was.
func stageFor(fs frameSet) (*roce.Stage, *qpx.Table, func(), error) {
	pool, err := mbuf.New(mbuf.Options{Name: "bench-qpx", Frames: 1024})
	if err != nil {
		return nil, nil, nil, err
	}
	a, b, err := mem.NewPair(pool, mem.PairOptions{Name: "bench-qpx"})
	if err != nil {
		pool.Close()
		return nil, nil, nil, err
	}
	tb, err := qpx.New(qpx.Options{Slots: setQPs})
	if err != nil {
		return nil, nil, nil, err
	}
	for _, q := range fs.qpns {
		if _, err := tb.Bind(q, qpx.Context{DestQPN: q, PKey: 0xffff, Access: qpx.AccessAll}); err != nil {
			return nil, nil, nil, err
		}
	}
	st, err := roce.New(roce.Options{Net: a, Host: b, Pool: pool, Table: tb})
	if err != nil {
		return nil, nil, nil, err
	}
	cleanup := func() {
		st.Stop(0)
		a.Close()
		b.Close()
		pool.Close()
	}
	return st, tb, cleanup, nil
}

// StageVsFloor returns ns per packet of the stage's work (each frame to
// the host and back, two packets) and of the floor over the same frames.
func StageVsFloor(fs frameSet, passes, rounds int) (stageNs, floorNs float64, err error) {
	st, tb, cleanup, err := stageFor(fs)
	if err != nil {
		return 0, 0, err
	}
	defer cleanup()
	resetPSN := func() {
		for l := range tb.Slots() {
			if tb.Live(l) {
				c := tb.Context(l)
				c.ExpectedPSN, c.NextPSN = 0, 0
			}
		}
	}
	stageNs, floorNs = 1e18, 1e18
	var sink uint32
	for range rounds {
		var elapsed time.Duration
		for range passes {
			resetPSN() // every pass sends PSNs 0.. again, in order
			start := time.Now()
			for _, b := range fs.frames {
				if !st.ProcessToHost(b) {
					return 0, 0, fmt.Errorf("bench qpx: the stage dropped a frame to the host: %v", st.Stats())
				}
			}
			for _, b := range fs.frames {
				if !st.ProcessToNet(b) {
					return 0, 0, fmt.Errorf("bench qpx: the stage dropped a frame to the network")
				}
			}
			elapsed += time.Since(start)
		}
		stageNs = min(stageNs, float64(elapsed.Nanoseconds())/float64(2*passes*len(fs.frames)))
		var v wire.RoCEView
		start := time.Now()
		for range 2 * passes {
			for _, b := range fs.frames {
				if wire.ParseRoCE(b, wire.RoCEv2Port, &v) == nil {
					sink ^= crc32.Update(0, crc32.IEEETable, b[v.L3Off-8:v.ICRCOff])
				}
			}
		}
		floorNs = min(floorNs, float64(time.Since(start).Nanoseconds())/float64(2*passes*len(fs.frames)))
	}
	if sink == 42 {
		fmt.Print("")
	}
	return stageNs, floorNs, nil
}

// RetireReopen returns ns per Close of a live QP and Open of a new one on
// a full table of n slots.
func RetireReopen(n, ops int) (float64, error) {
	tb, err := qpx.New(qpx.Options{Slots: n})
	if err != nil {
		return 0, err
	}
	live := make([]uint32, n)
	for i := range live {
		if live[i], _, err = tb.Open(qpx.Context{}); err != nil {
			return 0, err
		}
	}
	ops = max(ops, n)
	start := time.Now()
	for i := range ops {
		j := i % n
		if err := tb.Close(live[j]); err != nil {
			return 0, err
		}
		if live[j], _, err = tb.Open(qpx.Context{}); err != nil {
			return 0, err
		}
	}
	return float64(time.Since(start).Nanoseconds()) / float64(ops), nil
}

// AllocsPerPacket runs the stage's Poll through mem ports, each frame of
// the set to the host and back, and returns heap allocations per packet.
func AllocsPerPacket(fs frameSet) (float64, error) {
	pool, err := mbuf.New(mbuf.Options{Name: "bench-qpx-allocs", Frames: 2048})
	if err != nil {
		return 0, err
	}
	defer pool.Close()
	netPeer, net, err := mem.NewPair(pool, mem.PairOptions{Name: "net"})
	if err != nil {
		return 0, err
	}
	host, hostPeer, err := mem.NewPair(pool, mem.PairOptions{Name: "host"})
	if err != nil {
		return 0, err
	}
	tb, err := qpx.New(qpx.Options{Slots: setQPs})
	if err != nil {
		return 0, err
	}
	for _, q := range fs.qpns {
		if _, err := tb.Bind(q, qpx.Context{DestQPN: q, PKey: 0xffff, Access: qpx.AccessAll}); err != nil {
			return 0, err
		}
	}
	st, err := roce.New(roce.Options{Net: net, Host: host, Pool: pool, Table: tb})
	if err != nil {
		return 0, err
	}
	hs := make([]mbuf.Handle, 32)
	move := func(from, to interface {
		RxBurst(int, []mbuf.Handle) int
		TxBurst(int, []mbuf.Handle) int
	}) {
		for {
			n := from.RxBurst(0, hs)
			if n == 0 {
				return
			}
			if sent := to.TxBurst(0, hs[:n]); sent < n {
				pool.Free(hs[sent:n])
			}
		}
	}
	inject := func(batch [][]byte) {
		k := pool.AllocBulk(hs[:len(batch)])
		for i := range k {
			pool.SetLen(hs[i], len(batch[i]))
			copy(pool.Data(hs[i]), batch[i])
		}
		netPeer.TxBurst(0, hs[:k])
	}
	run := func() {
		for i := 0; i < len(fs.frames); i += 32 {
			inject(fs.frames[i : i+32])
			st.Poll(0)               // to the host
			move(hostPeer, hostPeer) // the host sends each frame back as it came
			st.Poll(0)               // to the network
			n := netPeer.RxBurst(0, hs)
			pool.Free(hs[:n])
		}
	}
	run() // warm up
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	const passes = 4
	for range passes {
		for l := range tb.Slots() {
			if tb.Live(l) {
				c := tb.Context(l)
				c.ExpectedPSN, c.NextPSN = 0, 0
			}
		}
		run()
	}
	runtime.ReadMemStats(&after)
	st.Stop(0)
	for _, p := range []interface{ Close() error }{netPeer, net, host, hostPeer} {
		p.Close()
	}
	if err := pool.CheckLeaks(); err != nil {
		return 0, err
	}
	s := st.Stats()
	if d := s.ToHost.Dropped() + s.ToNet.Dropped(); d != 0 {
		return 0, fmt.Errorf("bench qpx: the stage dropped %d frames: %v / %v", d, s.ToHost, s.ToNet)
	}
	// Whole allocations per packet, as testing.AllocsPerRun counts them: a
	// runtime goroutine's occasional allocation is not the stage's.
	return float64((after.Mallocs - before.Mallocs) / uint64(passes*2*len(fs.frames))), nil
}
