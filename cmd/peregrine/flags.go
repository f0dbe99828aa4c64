package main

import (
	"fmt"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/peregrine-net/peregrine/app/config"
	"github.com/peregrine-net/peregrine/app/traffic"
	"github.com/peregrine-net/peregrine/core/lcore"
	"github.com/peregrine-net/peregrine/internal/units"
	"github.com/peregrine-net/peregrine/pmd"
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
//   - a flag that does nothing in the mode chosen is refused (inert), and
//     a flag that holds one value refuses a second (onceValue).
//
// How a command keeps the contract (contract_test.go checks it over the
// whole command tree): every check runs before anything opens — in flag
// parsing (a pflag.Value's Set), Args, or the command's PreRunE — and
// returns usage(err), which main maps to exit 2; RunE opens and runs, and
// its errors exit 1. A flag that takes bytes is a sizeVar.

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

// The value rules below are app/config's (rules.go): one rule for flags
// and config files, one message, with the flag in front where the file
// puts the field's path.

// flagged puts the flag in front of a rule's error ("--window 0 is out of
// range: use 1..4096"); nil stays nil.
func flagged(flag string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("--%s %w", flag, err)
}

func checkInt(flag string, v, lo, hi int) error { return flagged(flag, config.CheckRange(v, lo, hi)) }

// checkDuration applies the duration rule: never negative; zero only when
// zeroMeans says what it means (empty: zero is refused too).
func checkDuration(flag string, d time.Duration, zeroMeans string) error {
	return flagged(flag, config.CheckDuration(d, zeroMeans))
}

// checkPositiveDuration refuses a period or timeout below min.
func checkPositiveDuration(flag string, d, min time.Duration) error {
	return flagged(flag, config.CheckAtLeast(d, min))
}

func checkPeriod(d time.Duration) error { return checkPositiveDuration("stats-period", d, minPeriod) }

// checkFrames and checkFrameSize are the pool rules.
func checkFrames(n, loops, extra, frameSize int) error {
	return flagged("frames", config.CheckFrames(n, loops, extra, frameSize))
}

func checkFrameSize(n int) error { return flagged("frame-size", config.CheckFrameSize(n)) }

// allowedCPUs is the set of CPUs this process may run on.
func allowedCPUs() ([]int, error) { return config.AllowedCPUs() }

// checkCPUs refuses a CPU that does not exist or this process may not
// use, naming the ones it may.
func checkCPUs(flag, typed string, cpus []int) error {
	if err := config.CheckCPUs(cpus); err != nil {
		return fmt.Errorf("--%s %s: %w", flag, typed, err)
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

// checkCPU is checkCPUs for a flag naming one CPU. Flags pin: unlike a
// config's lcores[].cpu, -1 (unpinned) is not a value they take.
func checkCPU(flag string, cpu int) error { return checkCPUs(flag, fmt.Sprint(cpu), []int{cpu}) }

func checkIdle(s string) error {
	if err := config.CheckIdle(s); err != nil {
		return fmt.Errorf("--idle: %w", err)
	}
	return nil
}

// parseRate reads a --rate: "max", "" or "0" is as fast as possible; else
// a rate as internal/units reads it, a bit rate turned into frames per
// second with the mean frame size.
func parseRate(s string, meanFrame float64) (float64, error) { return config.ParseRate(s, meanFrame) }

// genMaxFrame is the largest frame gen generates: what a 16 KiB pool frame
// holds after its headroom (AF_XDP carries it as several chunks).
const genMaxFrame = 16384 - mbuf.DefaultHeadroom

// checkGenFrames validates gen's --size and --rate, and that its largest
// frame fits a pool frame of --frame-size (not checked when gen receives or
// replays, which generate nothing).
func checkGenFrames(size, rate string, frameSize int, generates bool) error {
	if err := checkSizesAndRate(size, rate, genMaxFrame); err != nil || generates {
		return err
	}
	sizes, _ := traffic.ParseSizes(size, genMaxFrame)
	if room := frameSize - mbuf.DefaultHeadroom; frameSize > 0 && sizes.Max() > room {
		need := 2048
		for need-mbuf.DefaultHeadroom < sizes.Max() {
			need *= 2
		}
		return fmt.Errorf("--size %s: a %d-byte frame does not fit a %d-byte pool frame (%d after its headroom): give --frame-size %d", size, sizes.Max(), frameSize, room, need)
	}
	return nil
}

// checkSizesAndRate validates a --size spec (frames up to maxFrame) and a
// --rate for generated traffic.
func checkSizesAndRate(size, rate string, maxFrame int) error {
	sizes, err := traffic.ParseSizes(size, maxFrame)
	if err != nil {
		return fmt.Errorf("--size: %w", err)
	}
	if _, err := parseRate(rate, sizes.Mean()); err != nil {
		return fmt.Errorf("--rate: %w (or max)", err)
	}
	return nil
}

// maxFlows is the most flows a generator tells apart.
const maxFlows = config.MaxFlows

// parseByteSizes reads a comma-separated list of message sizes (512,4KiB,
// 1MiB), each within lo..hi bytes.
func parseByteSizes(spec string, lo, hi int) ([]int, error) {
	return config.ParseByteSizes(strings.Split(spec, ","), lo, hi)
}

// formatInts writes a list flag's default as the user would type it.
func formatInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, ",")
}

// sizeValue is an int flag holding a byte count as internal/units reads
// it (1500, 4KiB, 1MB): every flag that takes bytes takes the same
// spellings.
type sizeValue struct{ p *int }

// idleVar registers --idle, the idle policy of the command's poll loops,
// with the default every subcommand and a config file share.
func idleVar(f *pflag.FlagSet, p *string) {
	f.StringVar(p, "idle", config.DefaultIdle, "what an idle poll loop does: adaptive (spin 100µs after work, yield until 500µs, then sleep), busy, yield, or sleep (a back-off doubling to 1ms)")
}

// sizeVar registers a size flag with default def.
func sizeVar(f *pflag.FlagSet, p *int, name string, def int, help string) {
	*p = def
	f.Var(sizeValue{p}, name, help)
}

func (v sizeValue) Set(s string) error {
	n, err := units.ParseSize(strings.TrimSpace(s))
	if err != nil {
		return err
	}
	if n > math.MaxInt32 {
		return fmt.Errorf("size %q is too large (at most %d bytes)", s, math.MaxInt32)
	}
	*v.p = int(n)
	return nil
}

func (v sizeValue) String() string { return strconv.Itoa(*v.p) }
func (v sizeValue) Type() string   { return "size" }

// onceValue refuses a second value for a flag that holds one: the later
// one would silently replace the first (two --port given to a command
// that opens one port).
type onceValue struct {
	pflag.Value
	set bool
}

func (v *onceValue) Set(s string) error {
	if v.set {
		return fmt.Errorf("given twice (first %s): this flag takes one value, give it once", v.Value.String())
	}
	v.set = true
	return v.Value.Set(s)
}

// takesOne reports whether a flag holds one value (not a list, a count or
// a switch, which may be repeated).
func takesOne(f *pflag.Flag) bool {
	t := f.Value.Type()
	return t != "bool" && t != "count" && !strings.HasSuffix(t, "Slice") && !strings.HasSuffix(t, "Array")
}

// onceEach wraps every single-valued flag of the command tree under root
// in onceValue.
func onceEach(root *cobra.Command) {
	seen := map[*pflag.Flag]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, fs := range []*pflag.FlagSet{c.Flags(), c.PersistentFlags()} {
			fs.VisitAll(func(f *pflag.Flag) {
				if !seen[f] && takesOne(f) {
					f.Value = &onceValue{Value: f.Value}
				}
				seen[f] = true
			})
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// inert refuses flags given on the command line that do nothing in the
// mode chosen, naming them and why: a flag silently ignored reads as
// obeyed.
func inert(fs *pflag.FlagSet, why string, names ...string) error {
	if fs == nil {
		return nil
	}
	for _, n := range names {
		if f := fs.Lookup(n); f != nil && f.Changed {
			return fmt.Errorf("--%s does nothing %s: remove it", n, why)
		}
	}
	return nil
}

// checkPorts parses each port spec and refuses an unknown driver, and a
// port opened twice, before anything is opened.
func checkPorts(flag string, specs ...string) error {
	for i, s := range specs {
		if err := config.CheckSpec(s); err != nil {
			return fmt.Errorf("--%s %w", flag, err)
		}
		for _, earlier := range specs[:i] {
			if pmd.SamePort(s, earlier) {
				return fmt.Errorf("--%s %s opens the same port as --%s %s: give each port once", flag, s, flag, earlier)
			}
		}
	}
	return nil
}

// samePorts refuses two flags naming one port.
func samePorts(flagA, a, flagB, b string) error {
	if pmd.SamePort(a, b) {
		return fmt.Errorf("--%s %s opens the same port as --%s %s: give each its own port", flagB, b, flagA, a)
	}
	return nil
}

// because is a check's reason: empty for no error (never "(<nil>)"), else
// ": " and the error.
func because(err error) string {
	if err == nil {
		return ""
	}
	return ": " + err.Error()
}

// typedName is the name the user typed of a flag and its deprecated
// aliases: an error names the flag as typed.
func typedName(fs *pflag.FlagSet, name string, aliases ...string) string {
	for _, a := range aliases {
		if f := fs.Lookup(a); f != nil && f.Changed {
			return a
		}
	}
	return name
}
