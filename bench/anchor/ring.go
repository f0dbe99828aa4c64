package anchor

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// RingPerfRuns is how many times RingPerf runs ring_perf_autotest; each
// figure is the median over the runs. One two-core measurement is only
// 32768 bulks per thread (about a millisecond), so single runs on a shared
// 2-vCPU machine scatter by 2x; the whole autotest takes ~4.5 s here.
const RingPerfRuns = 3

// ringRunTimeout bounds one ring_perf_autotest run (normally ~4.5 s).
const ringRunTimeout = 40 * time.Second

// RingFigures are rte_ring costs from ring_perf_autotest, legacy (pointer
// element) API, bulk size 32, in TSC cycles per element. Each is the median
// over RingPerfRuns runs.
type RingFigures struct {
	// SPSCBulk32TwoCores and MPMCBulk32TwoCores come from the lines
	//   legacy APIs: SP/SC: bulk (size: 32): X
	//   legacy APIs: MP/MC: bulk (size: 32): X
	// under "### Testing using two physical cores ###" (lcore 0 enqueues,
	// lcore 1 dequeues, 32768 bulks each). The autotest prints the SUM of
	// the two threads' own averages: enqueuer cycles / elements enqueued +
	// dequeuer cycles / elements dequeued. The threads run at the same time,
	// so the figure is about twice the wall-clock cycles per element moved.
	// Compare with peregrine measured the same way (sum of both sides).
	// The machine notes' earlier 4.3 (SP/SC) and 9.3 (MP/MC) are these two
	// lines: the "elem APIs: element size 16B" repeats of them run 1.5-2x
	// higher (10.6 / 19.5 in the same run as 7.8 / 12.2). Quiet runs on
	// 2026-11-21 gave 6.0-6.6 and 11.0-12.1 (bench/ANCHORS.md).
	SPSCBulk32TwoCores float64
	MPMCBulk32TwoCores float64
	// SPSCBulk32OneCore and MPMCBulk32OneCore come from "### Testing bulk
	// enq/deq ###" (one lcore enqueues 32 then dequeues 32, 2^23 times).
	// DPDK 22.11 prints cycles per bulk there; these are divided by 32, so
	// they are cycles per element for one enqueue plus one dequeue.
	SPSCBulk32OneCore float64
	MPMCBulk32OneCore float64
	// Pair names the two-lcore section used: "two physical cores", or "two
	// hyperthreads" where lcores 0 and 1 share a core.
	Pair string
	// Runs is the number of autotest runs the medians are over.
	Runs int
	// Samples holds each run's figures, in run order: the spread shows how
	// quiet the machine was (a busy lcore 0 or 1 inflates the two-core
	// figures by 10-100x).
	Samples []RingSample
	// Raw is the output of every run, separated by "=== run N ===" lines.
	Raw string
}

// RingSample is one ring_perf_autotest run's figures (see RingFigures).
type RingSample struct {
	SPSCBulk32TwoCores, MPMCBulk32TwoCores float64
	SPSCBulk32OneCore, MPMCBulk32OneCore   float64
}

// RingPerf runs `dpdk-test` with DPDK_TEST=ring_perf_autotest on lcores 0
// and 1, RingPerfRuns times, and returns the median figures. It takes about
// 15 s here.
func RingPerf(ctx context.Context) (RingFigures, error) {
	return ringPerf(ctx, RingPerfRuns)
}

func ringPerf(ctx context.Context, runs int) (RingFigures, error) {
	path, err := lookTool("dpdk-test")
	if err != nil {
		return RingFigures{}, err
	}
	args := append(ealBaseArgs(), "-l", "0,1", "-m", "512", "--log-level=lib.eal:error")
	// The env var makes dpdk-test run one command and exit with its result
	// (stdin is not read), which the cmdline "quit" dance cannot guarantee.
	env := append(os.Environ(), "DPDK_TEST=ring_perf_autotest")

	var (
		raw     strings.Builder
		samples []RingSample
		pair    string
	)
	for run := 1; run <= runs; run++ {
		runCtx, cancel := context.WithTimeout(ctx, ringRunTimeout)
		out, err := runTool(runCtx, path, env, args...)
		cancel()
		fmt.Fprintf(&raw, "=== run %d ===\n%s", run, out)
		if err != nil {
			return RingFigures{Raw: raw.String()}, fmt.Errorf("anchor: ring_perf_autotest run %d: %w", run, err)
		}
		sample, runPair, err := parseRingPerf(out)
		if err != nil {
			return RingFigures{Raw: raw.String()}, fmt.Errorf("anchor: ring_perf_autotest run %d: %w", run, err)
		}
		samples = append(samples, sample)
		pair = runPair
	}
	medianOf := func(field func(RingSample) float64) float64 {
		values := make([]float64, len(samples))
		for i, s := range samples {
			values[i] = field(s)
		}
		return median(values)
	}
	return RingFigures{
		SPSCBulk32TwoCores: medianOf(func(s RingSample) float64 { return s.SPSCBulk32TwoCores }),
		MPMCBulk32TwoCores: medianOf(func(s RingSample) float64 { return s.MPMCBulk32TwoCores }),
		SPSCBulk32OneCore:  medianOf(func(s RingSample) float64 { return s.SPSCBulk32OneCore }),
		MPMCBulk32OneCore:  medianOf(func(s RingSample) float64 { return s.MPMCBulk32OneCore }),
		Pair:               pair,
		Runs:               len(samples),
		Samples:            samples,
		Raw:                raw.String(),
	}, nil
}

// ringSection* are the autotest's section titles (between "### Testing "
// and " ###").
const (
	ringSectionBulk         = "bulk enq/deq"
	ringSectionPhysical     = "using two physical cores"
	ringSectionHyperthreads = "using two hyperthreads"
)

// parseRingPerf reads one ring_perf_autotest output. Only "legacy APIs:"
// lines count: the autotest repeats every section for 16-byte elements
// ("elem APIs: element size 16B:"), which peregrine does not compare with.
// It returns the figures and the name of the two-lcore section used.
func parseRingPerf(out string) (RingSample, string, error) {
	const (
		prefix   = "legacy APIs: "
		spscLine = "SP/SC: bulk (size: 32): "
		mpmcLine = "MP/MC: bulk (size: 32): "
	)
	// values[section][line] = figure as printed
	values := map[string]map[string]float64{}
	section := ""
	passed := false
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "### Testing ") && strings.HasSuffix(line, " ###"):
			section = strings.TrimSuffix(strings.TrimPrefix(line, "### Testing "), " ###")
		case line == "Test OK":
			passed = true
		case strings.HasPrefix(line, prefix):
			rest := strings.TrimPrefix(line, prefix)
			for _, key := range []string{spscLine, mpmcLine} {
				if !strings.HasPrefix(rest, key) {
					continue
				}
				v, err := strconv.ParseFloat(strings.TrimPrefix(rest, key), 64)
				if err != nil {
					return RingSample{}, "", fmt.Errorf("anchor: ring_perf_autotest line %q: %w", line, ErrUnexpectedOutput)
				}
				if values[section] == nil {
					values[section] = map[string]float64{}
				}
				values[section][key] = v
			}
		}
	}
	if !passed {
		return RingSample{}, "", fmt.Errorf("anchor: ring_perf_autotest did not print \"Test OK\": %w", ErrUnexpectedOutput)
	}

	var sample RingSample
	pairSection := ringSectionPhysical
	if _, ok := values[pairSection]; !ok {
		pairSection = ringSectionHyperthreads
	}
	for _, want := range []struct {
		section, key string
		dst          *float64
		perBulk      bool
	}{
		{pairSection, spscLine, &sample.SPSCBulk32TwoCores, false},
		{pairSection, mpmcLine, &sample.MPMCBulk32TwoCores, false},
		{ringSectionBulk, spscLine, &sample.SPSCBulk32OneCore, true},
		{ringSectionBulk, mpmcLine, &sample.MPMCBulk32OneCore, true},
	} {
		v, ok := values[want.section][want.key]
		if !ok {
			return RingSample{}, "", fmt.Errorf("anchor: ring_perf_autotest has no %q line under %q (needs 2 lcores on one socket): %w",
				prefix+want.key, "### Testing "+want.section+" ###", ErrUnexpectedOutput)
		}
		if want.perBulk {
			v /= 32
		}
		*want.dst = v
	}
	return sample, strings.TrimPrefix(pairSection, "using "), nil
}
