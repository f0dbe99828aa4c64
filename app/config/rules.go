package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/peregrine-net/peregrine/app/traffic"
	"github.com/peregrine-net/peregrine/app/txnload"
	"github.com/peregrine-net/peregrine/core/lcore"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/rt/swift"
	"github.com/peregrine-net/peregrine/internal/units"
)

// The value rules a configuration file and the command-line flags share,
// so the same mistake gets the same answer in both. Each returns an error
// that starts with the value and says what would be accepted; the caller
// puts the field's path ("pool.frames: ") or the flag ("--frames ") in
// front.

// MinFramesPerLoop is the smallest pool each poll loop needs: its mbuf
// cache keeps up to mbuf.DefaultCacheSize frames that no other loop can
// take, and its bursts and port rings need as many again. Below this a
// run stalls with every frame parked in a cache.
const MinFramesPerLoop = 2 * mbuf.DefaultCacheSize

// MaxPoolBytes bounds frames × frame size: far above any run here, and
// below what would take a machine's memory on a typo.
const MaxPoolBytes = 4 << 30

// MaxBurst is the most frames a stage moves per burst.
const MaxBurst = 256

// MaxFlows is the most flows a generator tells apart (UDP source ports
// from traffic.BaseSrcPort up).
const MaxFlows = 65535 - traffic.BaseSrcPort

// AFXDPFillFrames is what an AF_XDP port keeps in its fill ring, on top of
// the loops' caches.
const AFXDPFillFrames = 2048

// TransportFrames is what a transport workload holds on top of the loops'
// caches: granted and unsolicited data in flight, the reorder engines'
// held packets and a fabric's delayed frames (measured: one loop and 1024
// frames stalls, 1536 completes at windows 32 to 4096).
const TransportFrames = 512

// CheckFrames refuses a pool of n frames too small for loops poll loops
// (MinFramesPerLoop each) plus extra frames the ports or the workload
// keep, or larger than the pool or MaxPoolBytes allow. frameSize 0 is the
// pool's default.
func CheckFrames(n, loops, extra, frameSize int) error {
	least := MinFramesPerLoop*max(loops, 1) + extra
	if frameSize == 0 {
		frameSize = mbuf.DefaultFrameSize
	}
	most := min(mbuf.MaxFrames, MaxPoolBytes/frameSize)
	if n < least || n > most {
		return fmt.Errorf("%d is out of range: use %d..%d (each of %d poll loop(s) keeps up to %d frames in its cache, and bursts and port rings need as many again; at most %d MiB of %d-byte frames)",
			n, least, most, max(loops, 1), mbuf.DefaultCacheSize, MaxPoolBytes>>20, frameSize)
	}
	return nil
}

// CheckFrameSize refuses a pool frame size the ports cannot use.
func CheckFrameSize(n int) error {
	switch n {
	case 2048, 4096, 8192, 16384:
		return nil
	}
	return fmt.Errorf("%d is not supported: use 2048, 4096, 8192 or 16384", n)
}

// CheckRange refuses v outside lo..hi.
func CheckRange(v, lo, hi int) error {
	if v < lo || v > hi {
		return fmt.Errorf("%d is out of range: use %d..%d", v, lo, hi)
	}
	return nil
}

// CheckDuration refuses a negative duration; zero is refused too unless
// zeroMeans says what it means.
func CheckDuration(d time.Duration, zeroMeans string) error {
	switch {
	case d < 0 && zeroMeans != "":
		return fmt.Errorf("%v is negative: use a positive duration such as 10s, or 0 to %s", d, zeroMeans)
	case d < 0:
		return fmt.Errorf("%v is negative: use a positive duration such as 10s", d)
	case d == 0 && zeroMeans == "":
		return errors.New("0 is not allowed: use a positive duration such as 5s")
	}
	return nil
}

// CheckAtLeast refuses a period or timeout below least.
func CheckAtLeast(d, least time.Duration) error {
	if d < least {
		return fmt.Errorf("%v is too short: use %v or more, e.g. 1s", d, least)
	}
	return nil
}

// AllowedCPUs is the set of CPUs this process may run on.
func AllowedCPUs() ([]int, error) {
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

// CheckCPUs refuses a CPU that does not exist or that this process may
// not use, naming the ones it may.
func CheckCPUs(cpus []int) error {
	allowed, err := AllowedCPUs()
	if err != nil {
		return nil // the loop's own check reports it when it starts
	}
	for _, cpu := range cpus {
		if cpu < 0 || cpu > lcore.MaxCPU {
			return fmt.Errorf("CPU %d does not exist: use CPUs from %s", cpu, lcore.FormatCPUList(allowed))
		}
		if !slices.Contains(allowed, cpu) {
			return fmt.Errorf("CPU %d is not one this process may use: use CPUs from %s", cpu, lcore.FormatCPUList(allowed))
		}
	}
	return nil
}

// CheckCPU refuses one loop's CPU as CheckCPUs does; -1, unpinned, is
// always allowed.
func CheckCPU(cpu int) error {
	if cpu == -1 {
		return nil
	}
	if err := CheckCPUs([]int{cpu}); err != nil {
		return fmt.Errorf("%w (or -1 for an unpinned loop)", err)
	}
	return nil
}

// CheckTargetRegion refuses message sizes whose target region, at the
// given window, would exceed MaxRegion.
func CheckTargetRegion(window int, sizes []int) error {
	if need := txnload.TargetMemoryLen(window, sizes); need > MaxRegion {
		return fmt.Errorf("with window %d these need a %d B target region (2 × window × largest size): at most %d B; lower the window or the largest size", window, need, MaxRegion)
	}
	return nil
}

// CheckIdle refuses an idle policy lcore does not know.
func CheckIdle(s string) error {
	if _, err := lcore.ParseIdleMode(s); err != nil {
		return err
	}
	return nil
}

// CheckPSNWindow refuses a transport PSN window rt does not take.
func CheckPSNWindow(n int) error {
	if n < rt.MinWindowSize || n > rt.MaxWindowSize || n%64 != 0 {
		return fmt.Errorf("%d is out of range: use %d..%d, a multiple of 64", n, rt.MinWindowSize, rt.MaxWindowSize)
	}
	return nil
}

// ParseRate reads a rate: "max" (or "", left out) is as fast as possible
// (0); else a rate as internal/units reads it, a bit rate turned into
// frames per second with the mean frame size. A zero rate is refused:
// pktgen and testpmd users read it as "send nothing", and as fast as
// possible is spelled max.
func ParseRate(s string, meanFrame float64) (float64, error) {
	if t := strings.ToLower(strings.TrimSpace(s)); t == "" || t == "max" {
		return 0, nil
	}
	r, err := units.ParseRate(s)
	if err != nil {
		return 0, err
	}
	if r.IsZero() {
		return 0, fmt.Errorf("rate %q would send nothing: give a rate such as 1mpps or 10gbit, or max for as fast as possible", s)
	}
	return r.FramesPerSecond(meanFrame), nil
}

// ParseByteSizes reads message sizes (512, 4KiB, 1MiB), each within
// lo..hi bytes.
func ParseByteSizes(items []string, lo, hi int) ([]int, error) {
	var out []int
	for _, item := range items {
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
		return nil, errors.New("no sizes given (e.g. [512, 4KiB, 64KiB])")
	}
	return out, nil
}

// CheckTransportMemory refuses a transport workload whose buffers would
// exceed MaxRegion: the initiator's source and destination (and the
// target's region) of 2 × window × the largest size, plus sends Send
// buffers and postRecv receive WQEs of the largest size each. It runs
// before anything is allocated, so a typo is an error, not an OOM.
func CheckTransportMemory(window, sends, postRecv int, sizes []int) error {
	largest := 0
	for _, s := range sizes {
		largest = max(largest, s)
	}
	need := int64(txnload.TargetMemoryLen(window, sizes)) + int64(sends+postRecv)*int64(largest)
	if need > MaxRegion {
		return fmt.Errorf("window %d and %d Sends and %d receive WQEs of up to %d B need %d B of buffers: at most %d B; lower the window, the counts or the largest size", window, sends, postRecv, largest, need, MaxRegion)
	}
	return nil
}

// CheckMinCwnd refuses a congestion window floor Swift does not take (0:
// Swift's default).
func CheckMinCwnd(w float64) error {
	if w == 0 {
		return nil
	}
	if !(w >= 0.001 && w <= swift.DefaultParams().MaxCwnd) {
		return fmt.Errorf("%v packets is out of range: use 0 (Swift's default, 0.01) or 0.001..%v", w, swift.DefaultParams().MaxCwnd)
	}
	return nil
}

// CheckTargetDelay refuses a congestion target delay Swift does not take.
func CheckTargetDelay(d time.Duration) error {
	if err := CheckAtLeast(d, time.Microsecond); err != nil {
		return err
	}
	if d > swift.MaxBaseTarget {
		return fmt.Errorf("%v is too long: use at most %v", d, swift.MaxBaseTarget)
	}
	return nil
}
