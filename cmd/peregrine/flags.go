package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/peregrine-net/peregrine/app/config"
	"github.com/peregrine-net/peregrine/app/traffic"
	"github.com/peregrine-net/peregrine/core/lcore"
	"github.com/peregrine-net/peregrine/internal/units"
)

// The flag rules every subcommand shares, so the same mistake gets the same
// answer everywhere. Each check names the flag as the user typed it, the
// value, and what would be accepted. The rules, as --help states them:
//
//   - --duration: not negative; 0 means "until stopped" (a signal, --count,
//     --idle-exit) where the subcommand documents it, and is refused where
//     a run must end on its own (demo).
//   - --stats-period and other periods: at least 1ms.
//   - counts (--burst, --flows, --window, …): a closed range given in the
//     error.
//   - sizes and rates: internal/units (1500, 4KiB, 1MB; 1mpps, 10gbit).
//   - --frames: at least config.MinFramesPerLoop per poll loop, at most
//     mbuf.MaxFrames.

// usageError marks an error as the user's: a bad flag value, an unknown
// flag, a missing argument. main exits 2 for it, 1 for a run that failed.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// usage wraps the first non-nil error as a usageError.
func usage(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return usageError{err}
		}
	}
	return nil
}

// minPeriod is the shortest --stats-period: a ticker needs a positive
// interval, and a line per millisecond is already more than a terminal
// shows.
const minPeriod = time.Millisecond

func checkInt(flag string, v, lo, hi int) error {
	if v < lo || v > hi {
		return fmt.Errorf("--%s %d is out of range: use %d..%d", flag, v, lo, hi)
	}
	return nil
}

// checkDuration applies the duration rule: never negative; zero only when
// zeroMeans says what it means (empty: zero is refused too).
func checkDuration(flag string, d time.Duration, zeroMeans string) error {
	switch {
	case d < 0:
		if zeroMeans != "" {
			return fmt.Errorf("--%s %v is negative: use a positive duration such as 10s, or 0 to %s", flag, d, zeroMeans)
		}
		return fmt.Errorf("--%s %v is negative: use a positive duration such as 10s", flag, d)
	case d == 0 && zeroMeans == "":
		return fmt.Errorf("--%s 0 is not allowed: use a positive duration such as 5s", flag)
	}
	return nil
}

// checkPositiveDuration refuses a period or timeout below min.
func checkPositiveDuration(flag string, d, min time.Duration) error {
	if d < min {
		return fmt.Errorf("--%s %v is too short: use %v or more, e.g. 1s", flag, d, min)
	}
	return nil
}

func checkPeriod(d time.Duration) error { return checkPositiveDuration("stats-period", d, minPeriod) }

// checkFrames and checkFrameSize are app/config's pool rules (one rule
// for flags and config files), naming the flag.
func checkFrames(n, loops, extra, frameSize int) error {
	if err := config.CheckFrames(n, loops, extra, frameSize); err != nil {
		return fmt.Errorf("--frames %w", err)
	}
	return nil
}

func checkFrameSize(n int) error {
	if err := config.CheckFrameSize(n); err != nil {
		return fmt.Errorf("--frame-size %w", err)
	}
	return nil
}

// allowedCPUs is the set of CPUs this process may run on.
func allowedCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, err
	}
	var cpus []int
	for c := range lcore.MaxCPU + 1 {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// checkCPUs refuses a CPU this process may not use, naming the ones it may.
func checkCPUs(flag, typed string, cpus []int) error {
	allowed, err := allowedCPUs()
	if err != nil {
		return nil // the loop's own check reports it when it starts
	}
	ok := make(map[int]bool, len(allowed))
	for _, c := range allowed {
		ok[c] = true
	}
	for _, c := range cpus {
		if !ok[c] {
			return fmt.Errorf("--%s %s: CPU %d is not one this process may use: use CPUs from %s", flag, typed, c, lcore.FormatCPUList(allowed))
		}
	}
	return nil
}

// parseCPUs reads a CPU list flag and checks each CPU is usable.
func parseCPUs(flag, s string) ([]int, error) {
	cpus, err := lcore.ParseCPUList(s)
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", flag, err)
	}
	return cpus, checkCPUs(flag, s, cpus)
}

// checkCPU is checkCPUs for a flag naming one CPU.
func checkCPU(flag string, cpu int) error {
	if cpu < 0 || cpu > lcore.MaxCPU {
		allowed, _ := allowedCPUs()
		return fmt.Errorf("--%s %d is not a CPU number: use one of %s", flag, cpu, lcore.FormatCPUList(allowed))
	}
	return checkCPUs(flag, fmt.Sprint(cpu), []int{cpu})
}

func checkIdle(s string) error {
	if _, err := lcore.ParseIdleMode(s); err != nil {
		return fmt.Errorf("--idle: %w", err)
	}
	return nil
}

// parseRate reads a --rate: "max", "" or "0" is as fast as possible; else
// a rate as internal/units reads it, a bit rate turned into frames per
// second with the mean frame size.
func parseRate(s string, meanFrame float64) (float64, error) {
	if t := strings.ToLower(strings.TrimSpace(s)); t == "" || t == "max" {
		return 0, nil
	}
	r, err := units.ParseRate(s)
	if err != nil {
		return 0, err
	}
	return r.FramesPerSecond(meanFrame), nil
}

// checkSizesAndRate validates a --size spec and a --rate for generated
// traffic.
func checkSizesAndRate(size, rate string) error {
	sizes, err := traffic.ParseSizes(size, traffic.MaxFrame)
	if err != nil {
		return fmt.Errorf("--size: %w", err)
	}
	if _, err := parseRate(rate, sizes.Mean()); err != nil {
		return fmt.Errorf("--rate: %w (or max)", err)
	}
	return nil
}

// maxFlows is the most flows a generator tells apart (UDP source ports
// from traffic.BaseSrcPort up).
const maxFlows = 65535 - traffic.BaseSrcPort

// parseByteSizes reads a comma-separated list of message sizes (512,4KiB,
// 1MiB), each within lo..hi bytes.
func parseByteSizes(spec string, lo, hi int) ([]int, error) {
	var out []int
	for item := range strings.SplitSeq(spec, ",") {
		n, err := units.ParseSize(strings.TrimSpace(item))
		if err != nil {
			return nil, err
		}
		if n < int64(lo) || n > int64(hi) {
			return nil, fmt.Errorf("size %q is out of range: use %d..%d bytes, e.g. 512, 4KiB, 1MiB", item, lo, hi)
		}
		out = append(out, int(n))
	}
	if len(out) == 0 {
		return nil, errors.New("no sizes given")
	}
	return out, nil
}

// formatInts writes a list flag's default as the user would type it.
func formatInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, ",")
}
