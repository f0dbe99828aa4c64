package rpc

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/peregrine-net/peregrine"
	"github.com/peregrine-net/peregrine/bench/internal/benchtopo"
	"github.com/peregrine-net/peregrine/bench/report"
	"github.com/peregrine-net/peregrine/core/hist"
	"github.com/peregrine-net/peregrine/pmd/netns"
)

// Options configure a run.
type Options struct {
	Out io.Writer
	// Count is the round trips each row measures (0: DefaultCount), after
	// a tenth of it (at least 10) of warm-up.
	Count int
	// RowTime bounds a row's measured time (0: DefaultRowTime; its warm-up:
	// a tenth of it): a row ends after Count round trips or RowTime,
	// whichever comes first.
	RowTime time.Duration
	// FileSize is the bytes of the file transfer (0: DefaultFileSize).
	FileSize int64
	// Idle is the endpoints' idle policy (the zero value is adaptive, the
	// binary's default).
	Idle peregrine.Idle
	// NoPin leaves the endpoints' loops unpinned.
	NoPin bool
	// Prefix names the namespaces PREFIX-a and PREFIX-b ("": pgrpc<pid>).
	Prefix string
	// Only, when set, runs the rows of these doors alone (raw, api,
	// sidecar, tcp); the ratios that need another door are not printed.
	Only []string
	// Rounds runs every row (and the file transfers) this many times,
	// one round of them after another (0: once); the figures and ratios
	// are each row's medians, and a ratio of two rows is taken within
	// each round and the median round's given. On a shared or virtual
	// machine a row's wall time drifts by tens of percent from one
	// minute to the next: rounds interleave the doors a ratio compares,
	// and its median is the drift's, not one unlucky row's.
	Rounds int
}

const (
	// DefaultCount is Options.Count's default.
	DefaultCount = 100_000
	// DefaultRowTime is Options.RowTime's default.
	DefaultRowTime = 5 * time.Second
	// DefaultFileSize is Options.FileSize's default: 1 GiB.
	DefaultFileSize = 1 << 30
	// Chunk is the file transfer's message size.
	Chunk = 64 << 10
	// chunksInFlight is the file transfer's messages in flight.
	chunksInFlight = 8
)

// Sizes are the messages' sizes; Depths the round trips in flight on the
// one connection.
var (
	Sizes  = []int{64, 1024}
	Depths = []int{1, 32}
)

// Doors are the ways in, in the order they are measured.
// api-caller is the public package with its endpoints polled by their
// callers (Options.Poll: PollCaller) rather than by their loops.
// raw-loops is the raw door in the public API's layout: each endpoint
// polled by its own pinned goroutine. The doors a ratio compares run back
// to back — raw-loops, api-caller, sidecar — and the api door, whose
// one-in-flight rows run out their RowTime on two CPUs, after them: on a
// virtual machine a row's cost moves by half from one minute to the next,
// and seconds between two rows let the ratio read that instead.
var Doors = []string{"raw", "raw-loops", "api-caller", "sidecar", "api", "tcp"}

// Wheres are the media: in memory (mem: ports; kernel TCP over loopback)
// and an AF_XDP veth pair between two namespaces (kernel TCP over it).
var Wheres = []string{"mem", "veth"}

// Rows returns every row's name, in order, for --help and tests.
func Rows() []string {
	var out []string
	for _, w := range Wheres {
		for _, d := range Doors {
			for _, s := range Sizes {
				for _, k := range Depths {
					out = append(out, rowName(w, d, s, k))
				}
			}
		}
	}
	return out
}

func rowName(where, door string, size, depth int) string {
	sz := fmt.Sprintf("%db", size)
	if size >= 1024 {
		sz = fmt.Sprintf("%dk", size/1024)
	}
	return fmt.Sprintf("%s_%s_%s_x%d", where, door, sz, depth)
}

// result is one row's measurement.
type result struct {
	ops            uint64
	wall           time.Duration
	p50, p99, p999 float64 // µs
	allocs         float64 // heap allocations of the whole process per round trip
}

func (r result) rate() float64 { return float64(r.ops) / r.wall.Seconds() }

// nsPerOp is the wall time of a round trip: its cost at one in flight.
func (r result) nsPerOp() float64 { return float64(r.wall.Nanoseconds()) / float64(r.ops) }

// Addresses: the endpoints' own, and the kernel's on the veth ends (kernel
// TCP's); all in 198.18.0.0/15.
var (
	ipA    = netip.MustParseAddr("198.18.7.101")
	ipB    = netip.MustParseAddr("198.18.7.102")
	vethA  = netip.MustParsePrefix("198.18.7.1/24")
	vethB  = netip.MustParsePrefix("198.18.7.2/24")
	ifA    = "rpc0"
	ifB    = "rpc1"
	memSeq atomic.Uint64
)

// media is where a set of rows runs: the two port specs, the CPUs, and for
// veth the namespaces the kernel TCP rows use.
type media struct {
	where      string
	specA      string
	specB      string
	cpuA, cpuB int
	nsA, nsB   *netns.NS // nil in memory
	tcpAddr    string    // the server's kernel address
}

// Run measures every row, prints the report and returns its verdicts.
func Run(ctx context.Context, o Options) (pass, fail int, err error) {
	if o.Count == 0 {
		o.Count = DefaultCount
	}
	if o.RowTime == 0 {
		o.RowTime = DefaultRowTime
	}
	if o.FileSize == 0 {
		o.FileSize = DefaultFileSize
	}
	if o.Prefix == "" {
		o.Prefix = fmt.Sprintf("pgrpc%d", os.Getpid())
	}
	doors := Doors
	if len(o.Only) > 0 {
		doors = o.Only
		for _, d := range doors {
			if !slices.Contains(Doors, d) {
				return 0, 0, fmt.Errorf("bench rpc: unknown door %q (use %v)", d, Doors)
			}
		}
	}
	cpuA, cpuB, err := benchtopo.TwoCPUs()
	if err != nil {
		return 0, 0, fmt.Errorf("bench rpc: %w", err)
	}
	rounds := max(1, o.Rounds)
	rep := report.New(o.Out)
	rep.Note("bench rpc: request-response, %v B messages, %v in flight on one connection, %d round trips a row (or %v, whichever first) after %d of warm-up (or a tenth of that time); endpoints' loops %s%s, CPUs %d and %d; %s, GOMAXPROCS %d (%s); %d round(s), figures from each row's medians, ratios of two rows from the median round",
		Sizes, Depths, o.Count, o.RowTime, warmup(o.Count), o.Idle, map[bool]string{false: " pinned", true: " unpinned"}[o.NoPin], cpuA, cpuB, runtime.Version(), runtime.GOMAXPROCS(0), apiLayout(o.NoPin), rounds)
	handoffFloor(o.Out)
	rows := map[string][]result{}
	fileRuns := map[string][]float64{} // door/where -> goodput of each round, bytes/s
	fileErrs := map[string]error{}
	var ceils []*ceiling // the veth pair's AF_XDP frame ceiling, each round's
	var ceil *ceiling    // their median (nil: not measured)
	var ceilErr error
	show := func(row string, r result) { printRow(o.Out, row, r) }
	if rounds > 1 {
		show = func(row string, r result) { noteRow(o.Out, row, r) }
	}
	pingPong := func() (float64, error) {
		pp, err := benchtopo.PingPong(cpuA, cpuB, benchtopo.PingPongRounds)
		if err != nil {
			return 0, fmt.Errorf("bench rpc: %w", err)
		}
		return float64(pp.Nanoseconds()), nil
	}
	var pingPongs [][2]float64 // each round's cross-core round trip before and after it, ns
	for round := range rounds {
		before, err := pingPong()
		if err != nil {
			return 0, 0, err
		}
		if rounds > 1 {
			fmt.Fprintf(o.Out, "  # round %d of %d: a cache line's round trip between CPUs %d and %d %.0f ns\n", round+1, rounds, cpuA, cpuB, before)
		}
		c, err := runRound(ctx, o, doors, cpuA, cpuB, rep, rows, fileRuns, fileErrs, show)
		if err != nil {
			return 0, 0, err
		}
		after, err := pingPong()
		if err != nil {
			return 0, 0, err
		}
		pingPongs = append(pingPongs, [2]float64{before, after})
		if rounds > 1 {
			fmt.Fprintf(o.Out, "  # round %d of %d done: a cache line's round trip %.0f ns\n", round+1, rounds, after)
		}
		if c.c != nil {
			ceils = append(ceils, c.c)
		} else if c.err != nil {
			ceilErr = c.err
		}
	}
	if len(ceils) > 0 {
		slices.SortFunc(ceils, func(a, b *ceiling) int { return cmp.Compare(a.payloadBps(), b.payloadBps()) })
		ceil = ceils[len(ceils)/2]
		if rounds > 1 {
			ceil.figure(o.Out)
		}
	}
	got := map[string]result{}
	for _, row := range Rows() {
		if rs := rows[row]; len(rs) > 0 {
			got[row] = medianOf(rs)
			if rounds > 1 {
				printRow(o.Out, row, got[row])
			}
		}
	}
	files := map[string]float64{}
	for k, v := range fileRuns {
		slices.Sort(v)
		files[k] = v[len(v)/2]
		if rounds > 1 {
			door, where, _ := strings.Cut(k, "/")
			fmt.Fprintf(o.Out, "FIGURE rpc_%s_%s_file_transfer_gbps %.3f\n", where, door, files[k]*8/1e9)
		}
	}
	var pps []float64
	for _, p := range pingPongs {
		pps = append(pps, p[0], p[1])
	}
	slices.Sort(pps)
	fmt.Fprintf(o.Out, "FIGURE rpc_crosscore_pingpong_ns %.0f\n", pps[len(pps)/2])
	rep.Note("rpc_crosscore_pingpong_ns: one cache line's round trip between CPUs %d and %d, %d times before and after each round (the median batch of a thousand; the median of those): the floor under every exchange between the doors' loops and callers on the two CPUs. On two virtual CPUs it moves between about 90 and 400 ns from one minute to the next, and the in-memory rows with it, the sidecar's most",
		cpuA, cpuB, benchtopo.PingPongRounds)
	ratios(rep, o, got, byRound(rows, rounds), pingPongs, files, fileErrs, ceil, ceilErr)
	pass, fail = rep.Summary()
	return pass, fail, nil
}

// roundCeiling is a round's veth frame ceiling (c nil: not measured).
type roundCeiling struct {
	c   *ceiling
	err error
}

// runRound measures every row once, on each medium, adding each row's
// result to rows and each file transfer's goodput to files.
func runRound(ctx context.Context, o Options, doors []string, cpuA, cpuB int, rep *report.Report, rows map[string][]result, files map[string][]float64, fileErrs map[string]error, show func(string, result)) (ceil roundCeiling, err error) {
	for _, where := range Wheres {
		m := &media{where: where, cpuA: cpuA, cpuB: cpuB}
		if where == "veth" {
			if os.Geteuid() != 0 {
				rep.Note("veth rows skipped: needs root (namespaces, veth, AF_XDP sockets)")
				continue
			}
			cleanup, err := m.vethPair(o.Prefix)
			if err != nil {
				return ceil, fmt.Errorf("bench rpc: %w", err)
			}
			// Before the doors: the ceiling opens the endpoints' ports.
			ceil.c, ceil.err = vethCeiling(ctx, o, m)
			if ctx.Err() != nil {
				cleanup()
				return ceil, ctx.Err()
			}
			err = runMedia(ctx, o, m, doors, rows, files, fileErrs, show)
			cleanup()
			if err != nil {
				return ceil, err
			}
			continue
		}
		n := memSeq.Add(1)
		m.specA = fmt.Sprintf("mem:rpc%d-%d/0", os.Getpid(), n)
		m.specB = fmt.Sprintf("mem:rpc%d-%d/1", os.Getpid(), n)
		m.tcpAddr = "127.0.0.1"
		if err := runMedia(ctx, o, m, doors, rows, files, fileErrs, show); err != nil {
			return ceil, err
		}
	}
	return ceil, nil
}

// medianOf is a row's median over rounds: the round trip's cost (ops and
// wall) of the round with the median cost, and each latency percentile's
// median; the allocations, the fewest any round made — an allocation the
// round trip makes shows in every round, while the runtime's own refills
// (a parked goroutine's sudog after a GC emptied their cache: a few in
// 100,000 round trips, in some rounds) do not.
func medianOf(rs []result) result {
	mid := func(f func(result) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	byCost := slices.Clone(rs)
	slices.SortFunc(byCost, func(a, b result) int { return cmp.Compare(a.nsPerOp(), b.nsPerOp()) })
	m := byCost[len(byCost)/2]
	m.p50 = mid(func(r result) float64 { return r.p50 })
	m.p99 = mid(func(r result) float64 { return r.p99 })
	m.p999 = mid(func(r result) float64 { return r.p999 })
	for _, r := range rs {
		m.allocs = min(m.allocs, r.allocs)
	}
	return m
}

// runMedia measures every door's rows on one medium.
func runMedia(ctx context.Context, o Options, m *media, doors []string, rows map[string][]result, files map[string][]float64, fileErrs map[string]error, show func(string, result)) error {
	for _, name := range doors {
		if err := ctx.Err(); err != nil {
			return err
		}
		procs := runtime.GOMAXPROCS(doorProcs(name))
		// A door is opened for each depth (its echo server set up for
		// that many callers: see openMsgDoor) and once more for the file.
		with := func(depth int, run func(d door) error) error {
			d, err := openDoor(o, m, name, depth)
			if err != nil {
				return fmt.Errorf("bench rpc: %s %s: %w", m.where, name, err)
			}
			return errors.Join(run(d), d.close())
		}
		var err error
		for _, depth := range Depths {
			if err = with(depth, func(d door) error {
				for _, size := range Sizes {
					row := rowName(m.where, name, size, depth)
					res, err := d.rows(ctx, size, depth, rowLen{o.Count, o.RowTime})
					if err != nil {
						return fmt.Errorf("bench rpc: %s: %w", row, err)
					}
					rows[row] = append(rows[row], res)
					show(row, res)
				}
				return nil
			}); err != nil {
				break
			}
		}
		if err == nil && (name == "sidecar" || name == "tcp") {
			err = with(chunksInFlight, func(d door) error {
				// A transfer that fails is a result, not the end of the
				// run: its ratio fails and says why.
				bps, err := d.file(ctx, o.FileSize)
				if err != nil {
					if ctx.Err() != nil {
						return err
					}
					fileErrs[name+"/"+m.where] = err
					fmt.Fprintf(o.Out, "  # %s %s file transfer failed: %v\n", m.where, name, err)
				} else {
					files[name+"/"+m.where] = append(files[name+"/"+m.where], bps)
					if o.Rounds > 1 {
						fmt.Fprintf(o.Out, "  # %s %s file transfer: %.3f Gbit/s\n", m.where, name, bps*8/1e9)
					} else {
						fmt.Fprintf(o.Out, "FIGURE rpc_%s_%s_file_transfer_gbps %.3f\n", m.where, name, bps*8/1e9)
					}
				}
				return nil
			})
		}
		runtime.GOMAXPROCS(procs)
		if err != nil {
			return err
		}
	}
	return nil
}

// printRow prints a row's figures, e.g. FIGURE rpc_mem_api_1k_x1_ops_per_s 210000.
func printRow(w io.Writer, name string, r result) {
	fmt.Fprintf(w, "FIGURE rpc_%s_ops_per_s %.0f\n", name, r.rate())
	noteRow(w, name, r)
}

// noteRow prints a row's measurement as a note (a round's, when the
// figures are the rounds' medians).
func noteRow(w io.Writer, name string, r result) {
	fmt.Fprintf(w, "  # %s: %d round trips in %v, %.0f ns each; p50/p99/p99.9 %.1f/%.1f/%.1f µs; %.3f allocations a round trip (whole process)\n",
		name, r.ops, r.wall.Round(time.Millisecond), r.nsPerOp(), r.p50, r.p99, r.p999, r.allocs)
}

// ratios adds the goals' rows from what was measured; a ratio whose rows
// did not run is noted, not judged.
// byRound returns each round's rows (round i's result of every row).
func byRound(rows map[string][]result, rounds int) []map[string]result {
	out := make([]map[string]result, rounds)
	for i := range out {
		out[i] = map[string]result{}
		for row, rs := range rows {
			if i < len(rs) {
				out[i][row] = rs[i]
			}
		}
	}
	return out
}

// medianRound evaluates a ratio on each round's rows and returns the rows
// of the round whose value is the median, and every round's value in
// round order. A ratio of two doors is taken within a round, from rows
// measured a minute apart: on a virtual machine a row's cost can move by
// half between minutes (both doors alike), and the ratio of two rows'
// medians across rounds could set one door's fast minute against the
// other's slow one.
func medianRound(rounds []map[string]result, value func(map[string]result) float64) (map[string]result, []float64) {
	vs := make([]float64, len(rounds))
	order := make([]int, len(rounds))
	for i, g := range rounds {
		vs[i], order[i] = value(g), i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(vs[a], vs[b]) })
	return rounds[order[len(order)/2]], vs
}

// roundsNote lists the rounds' values of a ratio taken within each round,
// each with that round's cross-core round trip before and after it
// (pingPongs, ns).
func roundsNote(vs []float64, pingPongs [][2]float64) string {
	if len(vs) < 2 {
		return ""
	}
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = fmt.Sprintf("%.3f", v)
		if i < len(pingPongs) {
			s[i] += fmt.Sprintf(" (cache line %.0f/%.0f ns)", pingPongs[i][0], pingPongs[i][1])
		}
	}
	return fmt.Sprintf("; the median round's, of %s", strings.Join(s, ", "))
}

// fasterAPI is the public API's cost in memory at one 1 KiB round trip in
// flight, in its faster mode (loop or caller), and the mode.
func fasterAPI(g map[string]result) (float64, string) {
	if c, a := g["mem_api-caller_1k_x1"].nsPerOp(), g["mem_api_1k_x1"].nsPerOp(); c < a {
		return c, "caller"
	}
	return g["mem_api_1k_x1"].nsPerOp(), "loop"
}

// ratios adds the front door's ratios. Those of two rows are taken within
// each round and the median round's is given (medianRound); allocations
// are the fewest any round made (medianOf) and the file ratio is of the
// two transfers' medians.
func ratios(rep *report.Report, o Options, got map[string]result, rounds []map[string]result, pingPongs [][2]float64, files map[string]float64, fileErrs map[string]error, ceil *ceiling, ceilErr error) {
	noted := map[string]bool{}
	have := func(names ...string) bool {
		for _, n := range names {
			if _, ok := got[n]; !ok {
				if !noted[n] {
					rep.Note("no row %s: the ratios that need it are not printed", n)
				}
				noted[n] = true
				return false
			}
		}
		return true
	}
	if a, c, r, f := "mem_api_1k_x1", "mem_api-caller_1k_x1", "mem_raw-loops_1k_x1", "mem_raw_1k_x1"; have(a, c, r, f) {
		// The public API's cost is its faster mode's: an application
		// picks the mode that suits it, and both are printed. Its
		// baseline is the transport in the API's layout (each endpoint
		// polled on its own CPU); one goroutine polling both, which no
		// application of two endpoints on two machines can do, is the
		// floor printed beside it.
		g, vs := medianRound(rounds, func(g map[string]result) float64 { best, _ := fasterAPI(g); return best / g[r].nsPerOp() })
		best, mode := fasterAPI(g)
		rep.Add(report.Ratio{Name: "api_vs_raw_cost_1k", Value: best / g[r].nsPerOp(), Op: report.AtMost, Target: 1.15,
			Detail: fmt.Sprintf("ns per 1 KiB round trip in memory, one in flight: public API %.0f (the faster mode, %s; loop %.0f, caller %.0f) ÷ raw txn, each endpoint on its own CPU, %.0f (one goroutine polling both: %.0f)%s",
				best, mode, g[a].nsPerOp(), g[c].nsPerOp(), g[r].nsPerOp(), g[f].nsPerOp(), roundsNote(vs, pingPongs))})
	}
	if s, a, c := "mem_sidecar_1k_x1", "mem_api_1k_x1", "mem_api-caller_1k_x1"; have(s, a, c) {
		// Against the in-process door's faster mode, as above: the
		// sidecar's own echo server runs in it.
		g, vs := medianRound(rounds, func(g map[string]result) float64 { in, _ := fasterAPI(g); return g[s].nsPerOp() / in })
		in, mode := fasterAPI(g)
		rep.Add(report.Ratio{Name: "sidecar_vs_inprocess_cost_1k", Value: g[s].nsPerOp() / in, Op: report.AtMost, Target: 1.3,
			Detail: fmt.Sprintf("ns per 1 KiB round trip in memory, one in flight: sidecar %.0f ÷ in-process %.0f (the faster mode, %s)%s", g[s].nsPerOp(), in, mode, roundsNote(vs, pingPongs))})
	}
	if s, t := "veth_sidecar_1k_x32", "veth_tcp_1k_x32"; have(s, t) {
		g, vs := medianRound(rounds, func(g map[string]result) float64 { return g[s].rate() / g[t].rate() })
		rep.Add(report.Ratio{Name: "rpc_1k_vs_kernel_tcp_ops", Value: g[s].rate() / g[t].rate(), Op: report.AtLeast, Target: 2.0,
			Detail: fmt.Sprintf("1 KiB round trips/s over AF_XDP veth, 32 in flight: sidecar %.0f ÷ kernel TCP %.0f%s%s", g[s].rate(), g[t].rate(),
				floor(g, "veth_raw-loops_1k_x32", func(r result) float64 { return r.rate() / g[t].rate() }, "%.2f× kernel TCP"), roundsNote(vs, pingPongs))})
	}
	if s, t := "veth_sidecar_1k_x1", "veth_tcp_1k_x1"; have(s, t) {
		g, vs := medianRound(rounds, func(g map[string]result) float64 { return g[s].p99 / g[t].p99 })
		rep.Add(report.Ratio{Name: "rpc_1k_p99_vs_kernel_tcp", Value: g[s].p99 / g[t].p99, Op: report.AtMost, Target: 0.5,
			Detail: fmt.Sprintf("p99 of 1 KiB round trips over veth, one in flight: sidecar %.1f µs ÷ kernel TCP %.1f µs%s%s", g[s].p99, g[t].p99,
				floor(g, "veth_raw-loops_1k_x1", func(r result) float64 { return r.p99 / g[t].p99 }, "p99 %.2f× kernel TCP's"), roundsNote(vs, pingPongs))})
	}
	if s := "mem_sidecar_1k_x1"; have(s) {
		rep.Add(report.Ratio{Name: "sidecar_allocs_per_op", Value: got[s].allocs, Op: report.AtMost, Target: 0,
			Detail: fmt.Sprintf("heap allocations per 1 KiB round trip through the sidecar in memory, steady state, whole process (appliance, client, echo server): %.4f", got[s].allocs)})
	}
	s, t := files["sidecar/veth"], files["tcp/veth"]
	if e := errors.Join(fileErrs["sidecar/veth"], fileErrs["tcp/veth"]); e != nil {
		rep.Add(report.Ratio{Name: fileRatioName(o.FileSize), Value: math.NaN(), Op: report.AtLeast, Target: 1.0,
			Detail: fmt.Sprintf("a file transfer over AF_XDP veth failed: %v", e)})
	} else if s > 0 && t > 0 {
		rep.Add(report.Ratio{Name: fileRatioName(o.FileSize), Value: s / t, Op: report.AtLeast, Target: 1.0,
			Detail: fmt.Sprintf("%d bytes in %d B messages, %d in flight, over AF_XDP veth: sidecar %.3f Gbit/s (%s) ÷ kernel TCP %.3f Gbit/s (64 KiB GSO segments: not held to that ceiling)",
				o.FileSize, Chunk, chunksInFlight, s*8/1e9, ceil.share(s, ceilErr), t*8/1e9)})
	} else {
		rep.Note("%s not printed: it needs the sidecar and tcp file transfers over veth", fileRatioName(o.FileSize))
	}
}

// fileRatioName names the file ratio by the size moved, so that a smaller
// run is never read as the 1 GiB goal.
func fileRatioName(size int64) string {
	if size == 1<<30 {
		return "file_transfer_1gib_vs_kernel_tcp"
	}
	return fmt.Sprintf("file_transfer_%db_vs_kernel_tcp", size)
}

// warmup is the round trips before the measured ones.
func warmup(count int) int { return max(10, count/10) }

// epoch is the origin of the times requests carry (monotonic).
var epoch = time.Now()

func now() int64 { return int64(time.Since(epoch)) }

// stamp writes the send time into a request.
func stamp(msg []byte) { binary.LittleEndian.PutUint64(msg, uint64(now())) }

// stamped reads it back from the response.
func stamped(msg []byte) int64 { return int64(binary.LittleEndian.Uint64(msg)) }

// meter counts a row's round trips from any number of callers, each with
// its own histogram, and times the measured ones. A row ends after count
// measured round trips or limit of measured time, whichever comes first
// (its warm-up likewise after a tenth of either): a door that is slow on
// this machine reports its rate over a bounded time rather than holding
// the run for minutes.
type meter struct {
	warm, count int64
	limit       int64 // ns; 0: no limit
	start       int64
	n, k        atomic.Int64 // round trips seen; measured
	t0, t1      atomic.Int64 // the measured phase's start and end (0: not yet)
	ops         int64        // measured round trips, set by the one that ends the row
	hs          []hist.Histogram
	allocs      allocMeter
	perOp       float64
}

// rowLen is how long a row runs: count measured round trips, or limit of
// measured time when that comes first (0: no limit).
type rowLen struct {
	count int
	limit time.Duration
}

func newMeter(n rowLen, callers int) *meter {
	return &meter{warm: int64(warmup(n.count)), count: int64(n.count), limit: int64(n.limit), start: now(),
		hs: make([]hist.Histogram, callers)}
}

// done records the round trip of a response sent at sent (caller g's
// histogram) and reports whether more are wanted.
func (m *meter) done(g int, sent int64) bool {
	t := now()
	i := m.n.Add(1)
	t0 := m.t0.Load()
	if t0 == 0 {
		if i < m.warm && (m.limit == 0 || t-m.start < m.limit/10) {
			return true
		}
		// The first to see the warm-up over starts the measured phase.
		if m.t0.CompareAndSwap(0, t) {
			m.allocs.start()
		}
		return true
	}
	if m.t1.Load() != 0 {
		return false
	}
	m.hs[g].Record(uint64(t - sent))
	k := m.k.Add(1)
	if k < m.count && (m.limit == 0 || t-t0 < m.limit) {
		return true
	}
	if m.t1.CompareAndSwap(0, t) {
		m.ops = k
		m.perOp = m.allocs.perOp(uint64(k))
	}
	return false
}

func (m *meter) finished() bool { return m.t1.Load() != 0 }

// result merges the histograms.
func (m *meter) result() result {
	var h hist.Histogram
	for i := range m.hs {
		h.Merge(&m.hs[i])
	}
	us := func(q float64) float64 { return float64(h.Quantile(q)) / 1e3 }
	return result{ops: uint64(m.ops), wall: time.Duration(m.t1.Load() - m.t0.Load()),
		p50: us(0.5), p99: us(0.99), p999: us(0.999), allocs: m.perOp}
}

// allocMeter counts the process's heap allocations between the warm-up's
// end and the last round trip (ReadMemStats stops the world: twice a row).
type allocMeter struct{ before uint64 }

func (a *allocMeter) start() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	a.before = ms.Mallocs
}

func (a *allocMeter) perOp(ops uint64) float64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.Mallocs-a.before) / float64(ops)
}

// vethPair creates the namespaces and the veth pair and names the ports
// and the kernel TCP address on it; cleanup deletes both namespaces.
func (m *media) vethPair(prefix string) (cleanup func(), err error) {
	if m.nsA, m.nsB, cleanup, err = benchtopo.VethPair(prefix, ifA, ifB, vethA, vethB); err != nil {
		return nil, err
	}
	m.specA = fmt.Sprintf("afxdp:%s?netns=%s", ifA, m.nsA.Name)
	m.specB = fmt.Sprintf("afxdp:%s?netns=%s", ifB, m.nsB.Name)
	m.tcpAddr = vethB.Addr().String()
	return cleanup, nil
}

// doorProcs is the processors a door's rows run with. A pinned loop holds
// one while it works: the api door's two leave none to its callers unless
// there are more. The others have at most one pinned busy loop (the
// sidecar's appliance), and their goroutines share the processors: one
// per CPU, Go's default, so that they switch as goroutines rather than
// the OS time-slicing their threads.
func doorProcs(door string) int {
	if door == "api" && apiLoopsPinned(false) {
		return max(runtime.NumCPU(), 6)
	}
	return runtime.NumCPU()
}

// apiPinCPUs is the fewest CPUs the process may use on which the api
// door pins its endpoints' loops: two loops, and a CPU for each side's
// application goroutine. On fewer, two pinned busy loops leave the
// callers only the time the OS slices off them (a 1 KiB round trip in
// memory took 330 µs on two CPUs, against 9.4 µs with the loops
// unpinned, the API's default, sharing Go's processors with the callers).
const apiPinCPUs = 4

// apiLayout says how the api door runs its loops, for the report.
func apiLayout(noPin bool) string {
	if apiLoopsPinned(noPin) {
		return fmt.Sprintf("%d for the api door, whose two pinned loops hold a processor each", doorProcs("api"))
	}
	if noPin {
		return "the api door's loops unpinned too"
	}
	return fmt.Sprintf("the api door's loops unpinned, the API's default: %d CPUs leave none for its callers beside two pinned loops", runtime.NumCPU())
}

// apiLoopsPinned reports whether the api door pins its loops.
func apiLoopsPinned(noPin bool) bool { return !noPin && runtime.NumCPU() >= apiPinCPUs }

// floor describes the transport's own figure under a door's ratio, the
// raw-loops row of the same run: what no door over it can beat.
func floor(got map[string]result, row string, ratio func(result) float64, format string) string {
	r, ok := got[row]
	if !ok {
		return ""
	}
	return fmt.Sprintf(" (the transport alone, %s, in this run: "+format+")", row, ratio(r))
}
