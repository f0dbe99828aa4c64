// Package capture is the `peregrine bench capture` scenario: what a port's
// capture=FILE parameter (the promise: "its cost when on is in a benchmark
// and is zero when off") costs per packet, measured through app.New as a
// user opens a port.
//
// Off, the port is not wrapped at all — app.Pipeline.open returns the
// driver's own port when the spec has no capture parameter — so the
// no-capture path is the plain path exactly, not even a nil check. The
// scenario checks that structurally (the port's type) and on the clock
// (the same bursts through a mem pair opened by pmd/mem directly).
//
// On, every received and transmitted frame is copied into a per-queue
// staging buffer and appended to the file (pcap.Mirror). The baseline for
// that is the floor of writing a capture at all: the same frames written
// as pcap records by gopacket's pcapgo.Writer into a buffered file, in the
// same run. The mirror's added cost per packet (on minus off) must stay
// within 1.5 times that floor: it adds a timestamp, a staging copy and a
// lock per burst to what any capture writer does.
//
// Frames are 64 B in bursts of 32, transmitted on one end of a mem pair
// and received on the other (the capture records them once, at TX).
package capture

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/peregrine-net/peregrine/app"
	"github.com/peregrine-net/peregrine/bench/report"
	"github.com/peregrine-net/peregrine/core/lcore"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/pmd/mem"
)

// Options configure a run.
type Options struct {
	Out io.Writer
	// Packets per measurement (0: 1<<20); Rounds alternating measurements
	// of each, the best kept (0: 3).
	Packets, Rounds int
	// Dir holds the capture files (""; a temporary directory, removed).
	Dir string
}

const (
	burst     = 32
	frameSize = 64
)

// Run measures and prints the report; it returns the pass and fail counts.
func Run(ctx context.Context, o Options) (pass, fail int, err error) {
	if o.Packets == 0 {
		o.Packets = 1 << 20
	}
	if o.Rounds == 0 {
		o.Rounds = 3
	}
	if o.Dir == "" {
		if o.Dir, err = os.MkdirTemp("", "peregrine-bench-capture"); err != nil {
			return 0, 0, err
		}
		defer os.RemoveAll(o.Dir)
	}
	rep := report.New(o.Out)
	rep.Note("bench capture: %d B frames in bursts of %d through a mem pair, %d packets per measurement, best of %d alternating rounds; %s, GOMAXPROCS %d",
		frameSize, burst, o.Packets, o.Rounds, runtime.Version(), runtime.GOMAXPROCS(0))

	wrapped, err := offIsUnwrapped()
	if err != nil {
		return 0, 0, err
	}
	rep.Add(report.Ratio{Name: "capture_off_wrapped_ports", Value: float64(wrapped), Op: report.AtMost, Target: 0,
		Detail: "ports opened by app.New without capture= that are not the driver's own port (a wrapper, a check on the path)"})

	best := map[string]float64{"plain": math.Inf(1), "off": math.Inf(1), "on": math.Inf(1), "pcapgo": math.Inf(1)}
	// Allocations are process-wide: the runtime's own now and then land
	// in one round. One per packet (or per burst) shows in every round, so
	// each mode's fewest over the rounds is its figure.
	allocs := map[string]float64{"off": math.Inf(1), "on": math.Inf(1)}
	for round := range o.Rounds {
		for _, m := range []string{"plain", "off", "on", "pcapgo"} {
			if err := ctx.Err(); err != nil {
				return 0, 0, err
			}
			ns, a, err := measure(m, o.Packets, filepath.Join(o.Dir, fmt.Sprintf("%s-%d.pcap", m, round)))
			if err != nil {
				return 0, 0, fmt.Errorf("bench capture: %s: %w", m, err)
			}
			best[m] = min(best[m], ns)
			if m == "on" || m == "off" {
				allocs[m] = min(allocs[m], a)
			}
		}
	}
	for _, m := range []string{"plain", "off", "on", "pcapgo"} {
		fmt.Fprintf(o.Out, "FIGURE capture_%s_ns_per_packet %.2f\n", m, best[m])
	}
	// Off is the driver's own port (capture_off_wrapped_ports proves it),
	// so timing it against mem.NewPair's times the same code twice: on a
	// quiet machine the two read 0.85..1.13 of each other from run to run.
	// A goal on that would judge the machine, not the code: printed only.
	fmt.Fprintf(o.Out, "  # capture off vs plain port %.3f (no goal: the same code, see capture_off_wrapped_ports): %.2f ns/packet through app.New's port without capture=, %.2f through mem.NewPair's\n",
		best["off"]/best["plain"], best["off"], best["plain"])
	added := best["on"] - best["off"]
	rep.Add(report.Ratio{Name: "capture_on_added_vs_pcapgo_write", Value: added / best["pcapgo"], Op: report.AtMost, Target: 1.5,
		Detail: fmt.Sprintf("capture on %.2f ns/packet, off %.2f: %.2f added; pcapgo.Writer into a buffered file %.2f ns/packet (the floor of writing a capture)",
			best["on"], best["off"], added, best["pcapgo"])})
	rep.Add(report.Ratio{Name: "capture_allocs_per_packet", Value: max(allocs["on"], allocs["off"]), Op: report.AtMost, Target: 0,
		Detail: fmt.Sprintf("heap allocations per packet, capture on %.4f and off %.4f (runtime.MemStats.Mallocs over a measurement, the fewest of the rounds)", allocs["on"], allocs["off"])})
	pass, fail = rep.Summary()
	return pass, fail, nil
}

// offIsUnwrapped opens mem pairs with app.New, without and with capture=,
// and counts the ports without capture= whose type is not the driver's.
func offIsUnwrapped() (int, error) {
	pool, err := mbuf.New(mbuf.Options{Name: "bench-capture-type", Frames: 1024})
	if err != nil {
		return 0, err
	}
	defer pool.Close()
	a, b, err := mem.NewPair(pool, mem.PairOptions{Name: "bench-capture-type"})
	if err != nil {
		return 0, err
	}
	want := reflect.TypeOf(a)
	a.Close()
	b.Close()
	p, err := app.New(app.Options{Pool: mbuf.Options{Frames: 2048}, Ports: []string{"mem:bench-capture-off/0", "mem:bench-capture-off/1"},
		Lcores: []app.Lcore{{Name: "a", CPU: -1}}})
	if err != nil {
		return 0, err
	}
	defer p.Stop()
	n := 0
	for _, pt := range p.Ports() {
		if reflect.TypeOf(pt) != want {
			n++
		}
	}
	return n, nil
}

// measure moves packets bursts and returns the nanoseconds and heap
// allocations per packet: plain (mem.NewPair), off (app.New, no
// capture=), on (app.New, capture=file) or pcapgo (the frames written by
// pcapgo.Writer to file, no port).
func measure(mode string, packets int, file string) (ns, allocs float64, err error) {
	var pool *mbuf.Pool
	var tx, rx port.Port
	switch mode {
	case "plain", "pcapgo":
		if pool, err = mbuf.New(mbuf.Options{Name: "bench-capture", Frames: 2048}); err != nil {
			return 0, 0, err
		}
		defer pool.Close()
		a, b, err := mem.NewPair(pool, mem.PairOptions{Name: "bench-capture-plain"})
		if err != nil {
			return 0, 0, err
		}
		defer a.Close()
		defer b.Close()
		tx, rx = a, b
	default:
		spec := "mem:bench-capture/0"
		if mode == "on" {
			spec = app.WithCapture(spec, file)
		}
		p, err := app.New(app.Options{Pool: mbuf.Options{Frames: 2048}, Ports: []string{spec, "mem:bench-capture/1"},
			Lcores: []app.Lcore{{Name: "a", CPU: -1}}, Idle: lcore.IdlePolicy{}})
		if err != nil {
			return 0, 0, err
		}
		defer p.Stop()
		pool, tx, rx = p.Pool(), p.Port(0), p.Port(1)
	}
	bufs := make([]mbuf.Handle, burst)
	var step func() error
	if mode == "pcapgo" {
		f, err := os.Create(file)
		if err != nil {
			return 0, 0, err
		}
		defer f.Close()
		bw := bufio.NewWriterSize(f, 256<<10)
		w := pcapgo.NewWriter(bw)
		if err := w.WriteFileHeader(65535, layers.LinkTypeEthernet); err != nil {
			return 0, 0, err
		}
		if pool.AllocBulk(bufs) != burst {
			return 0, 0, fmt.Errorf("pool empty")
		}
		defer pool.Free(bufs)
		for _, h := range bufs {
			pool.SetLen(h, frameSize)
		}
		ci := gopacket.CaptureInfo{CaptureLength: frameSize, Length: frameSize}
		step = func() error {
			ci.Timestamp = time.Now()
			for _, h := range bufs {
				if err := w.WritePacket(ci, pool.Data(h)); err != nil {
					return err
				}
			}
			return nil
		}
		defer bw.Flush()
	} else {
		step = func() error {
			if pool.AllocBulk(bufs) != burst {
				return fmt.Errorf("pool empty")
			}
			for _, h := range bufs {
				pool.SetLen(h, frameSize)
			}
			sent := tx.TxBurst(0, bufs)
			pool.Free(bufs[sent:])
			got := rx.RxBurst(0, bufs[:sent])
			pool.Free(bufs[:got])
			if got != sent {
				return fmt.Errorf("received %d of %d", got, sent)
			}
			return nil
		}
	}
	for range 64 { // warm up: caches, the staging buffers
		if err := step(); err != nil {
			return 0, 0, err
		}
	}
	bursts := max(1, packets/burst)
	var ms0, ms1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms0)
	start := time.Now()
	for range bursts {
		if err := step(); err != nil {
			return 0, 0, err
		}
	}
	elapsed := time.Since(start)
	runtime.ReadMemStats(&ms1)
	pkts := float64(bursts * burst)
	return float64(elapsed.Nanoseconds()) / pkts, float64(ms1.Mallocs-ms0.Mallocs) / pkts, nil
}
