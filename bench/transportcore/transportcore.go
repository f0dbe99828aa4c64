// Package transportcore is the `peregrine bench transport-core` scenario:
// the CAM against Go's map with the same keys, the simulator's
// speed, and the transport's per-packet receive cost against plain
// mem-port forwarding measured in the same run.
//
// The CAM figures are single-key Lookup, and Delete plus Insert, against
// map[cam.TransportKey]uint32 with the same keys in the same order
// (perf.CAMVsMap). The receive cost (perf.RxCost) is the
// endpoint's whole Poll over bursts of in-order data packets with UDP
// checksums, the transport's default; the ratio uses that figure, and the
// figure without UDP checksums (IPv4 allows it, rt.Options.NoUDPChecksum)
// follows it as a comment line. The baseline is bench/foundation's
// MemIOForward: handles moved between mem ports by one pinned loop, no
// packet byte read.
package transportcore

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/peregrine-net/peregrine/bench/foundation"
	"github.com/peregrine-net/peregrine/bench/perf"
	"github.com/peregrine-net/peregrine/bench/report"
)

// Options configures a run.
type Options struct {
	Out io.Writer
	// CPU pins the forwarding baseline's loop (0 → CPU 1, like DPDK's
	// first forwarding lcore).
	CPU int
	// Ops is the operations per CAM measurement (0 → 2^22).
	Ops int
	// SimPackets is how many packets the simulation runs (0 → 2^20).
	SimPackets int
	// RxPackets is how many packets the receive-cost measurement takes
	// (0 → 2^20).
	RxPackets int
	// FwdDuration is the mem-forwarding baseline's length (0 → 2 s).
	FwdDuration time.Duration
}

// Run measures and prints the report; it returns the pass and fail counts.
func Run(ctx context.Context, opts Options) (pass, fail int, err error) {
	if opts.CPU == 0 {
		opts.CPU = 1
	}
	if opts.Ops == 0 {
		opts.Ops = 1 << 22
	}
	if opts.SimPackets == 0 {
		opts.SimPackets = 1 << 20
	}
	if opts.RxPackets == 0 {
		opts.RxPackets = 1 << 20
	}
	if opts.FwdDuration == 0 {
		opts.FwdDuration = 2 * time.Second
	}
	rep := report.New(opts.Out)
	fmt.Fprintf(opts.Out, "# bench transport-core: %s, GOMAXPROCS %d\n", runtime.Version(), runtime.GOMAXPROCS(0))

	for _, n := range []int{64, 64 << 10} {
		if ctx.Err() != nil {
			return 0, 0, ctx.Err()
		}
		camL, mapL, camC, mapC := perf.CAMVsMap(n, opts.Ops)
		rep.Add(report.Ratio{Name: fmt.Sprintf("cam_lookup_%d_speedup_vs_map", n), Value: mapL / camL, Op: report.AtLeast, Target: 2,
			Detail: fmt.Sprintf("lookup hit, (CID, window, PSN) keys, random order: cam %.2f ns, map[key]uint32 %.2f ns", camL, mapL)})
		rep.Add(report.Ratio{Name: fmt.Sprintf("cam_churn_%d_speedup_vs_map", n), Value: mapC / camC, Op: report.AtLeast, Target: 2,
			Detail: fmt.Sprintf("one delete + one insert: cam %.2f ns, map %.2f ns", camC, mapC)})
	}

	pps, err := perf.SimPacketsPerSecond(1, opts.SimPackets)
	if err != nil {
		return 0, 0, fmt.Errorf("transportcore: simulation: %w", err)
	}
	rep.Add(report.Ratio{Name: "sim_mpkts_per_sec_one_core", Value: pps / 1e6, Op: report.AtLeast, Target: 1,
		Detail: fmt.Sprintf("%.0f transport packets simulated per second (two endpoints, fabric, virtual clock)", pps)})

	// The ratio is taken with UDP checksums, the transport's default (and
	// the only integrity check a frame has); the figure without them is
	// printed beside it for reference.
	rxNs, err := perf.RxCost(perf.RxCostOptions{Packets: opts.RxPackets})
	if err != nil {
		return 0, 0, fmt.Errorf("transportcore: receive cost: %w", err)
	}
	rxNoCsumNs, err := perf.RxCost(perf.RxCostOptions{Packets: opts.RxPackets, NoUDPChecksum: true})
	if err != nil {
		return 0, 0, fmt.Errorf("transportcore: receive cost without UDP checksums: %w", err)
	}
	floorNs, err := perf.RxCost(perf.RxCostOptions{Packets: opts.RxPackets, HeadersOnly: true})
	if err != nil {
		return 0, 0, fmt.Errorf("transportcore: header-reading floor: %w", err)
	}
	mpps, _, err := foundation.MemIOForward(opts.CPU, opts.FwdDuration)
	if err != nil {
		return 0, 0, fmt.Errorf("transportcore: forwarding baseline: %w", err)
	}
	fwdNs := 1e3 / mpps
	rep.Add(report.Ratio{Name: "rx_cost_vs_mem_forwarding", Value: rxNs / fwdNs, Op: report.AtMost, Target: 3,
		Detail: fmt.Sprintf("transport RX path %.1f ns/packet with UDP checksums (parse, CID lookup, window update, ACK generation); mem-port io forwarding %.1f ns/packet", rxNs, fwdNs)})
	rep.Note("without UDP checksums (rt.Options.NoUDPChecksum, IPv4): RX path %.1f ns/packet, %.1fx mem forwarding; not the ratio above, which keeps the default", rxNoCsumNs, rxNoCsumNs/fwdNs)
	// io forwarding moves handles and never reads a frame; a receive path
	// must read each header from memory the device (here: the bench) wrote.
	rep.Note("floor: taking the same frames in bursts and reading their header cache lines, nothing else, costs %.1f ns/packet, %.1fx mem forwarding (the goal allows %.1f ns for the whole path)", floorNs, floorNs/fwdNs, 3*fwdNs)
	pass, fail = rep.Summary()
	return pass, fail, nil
}
