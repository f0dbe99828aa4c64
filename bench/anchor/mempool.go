package anchor

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// MempoolSecondsPerCase is how long the harness runs each of its six cases.
const MempoolSecondsPerCase = 1.0

const (
	mempoolBuildTimeout = 60 * time.Second
	mempoolRunTimeout   = 40 * time.Second
	// harnessDir is the harness's directory relative to the repository root.
	harnessDir = "bench/dpdk"
	modulePath = "github.com/peregrine-net/peregrine"
)

// MempoolCase is one line of the harness's output.
type MempoolCase struct {
	// Bulk is the objects per get and per put call; Keep the objects taken
	// before all are put back.
	Bulk, Keep int
	// ConstantN is true when the compiler saw Bulk as a constant.
	ConstantN bool
	// NsPerObj is the time to get one object and put it back (one get and
	// one put per object, amortised over bulks); CyclesPerObj the same in
	// TSC cycles; RatePerSec its inverse, objects cycled per second (the
	// autotest's rate_persec).
	NsPerObj, CyclesPerObj, RatePerSec float64
}

// MempoolFigures are rte_mempool costs on one lcore with a per-lcore cache
// of 512 objects (mempool_perf_autotest's "with cache" case, cores=1),
// bulk size passed at run time (constant_n=0).
type MempoolFigures struct {
	// ns to get one object and put it back, in bulks of 32, keeping 32 or
	// 128 objects out between the gets and the puts.
	CachedBulk32Keep32NsPerObj  float64
	CachedBulk32Keep128NsPerObj float64
	// Cases holds every case the harness printed (also bulk 1 and the
	// constant-bulk variants), for context.
	Cases []MempoolCase
	// Raw is the harness's output.
	Raw string
}

// Case returns the case with the given parameters, if the harness ran it.
func (f MempoolFigures) Case(bulk, keep int, constantN bool) (MempoolCase, bool) {
	for _, c := range f.Cases {
		if c.Bulk == bulk && c.Keep == keep && c.ConstantN == constantN {
			return c, true
		}
	}
	return MempoolCase{}, false
}

// MempoolPerf builds bench/dpdk/mempool_bench if needed (bench/dpdk/build.sh,
// found from the working directory upwards or from this package's source
// directory) and runs it on lcore 0 for six cases of MempoolSecondsPerCase
// each: about 7 s, plus about 2 s for a first build.
func MempoolPerf(ctx context.Context) (MempoolFigures, error) {
	return mempoolPerf(ctx, MempoolSecondsPerCase)
}

func mempoolPerf(ctx context.Context, secondsPerCase float64) (MempoolFigures, error) {
	bin, err := buildMempoolHarness(ctx)
	if err != nil {
		return MempoolFigures{}, err
	}
	args := append(ealBaseArgs(), "-l", "0", "-m", "256", "--log-level=lib.eal:error",
		"--", "-t", strconv.FormatFloat(secondsPerCase, 'f', -1, 64))
	runCtx, cancel := context.WithTimeout(ctx, mempoolRunTimeout)
	defer cancel()
	out, err := runTool(runCtx, bin, nil, args...)
	if err != nil {
		return MempoolFigures{Raw: out}, err
	}
	return parseMempool(out)
}

// buildMempoolHarness runs build.sh and returns the harness binary's path
// (the script's last line of output).
func buildMempoolHarness(ctx context.Context) (string, error) {
	for _, tool := range []string{"gcc", "pkg-config"} {
		if _, err := lookTool(tool); err != nil {
			return "", err
		}
	}
	if err := exec.CommandContext(ctx, "pkg-config", "--exists", "libdpdk").Run(); err != nil {
		return "", fmt.Errorf("anchor: pkg-config finds no libdpdk (%s): %w", installHint, ErrNotInstalled)
	}
	script, err := findBuildScript()
	if err != nil {
		return "", err
	}
	buildCtx, cancel := context.WithTimeout(ctx, mempoolBuildTimeout)
	defer cancel()
	out, err := runTool(buildCtx, "bash", nil, script)
	if err != nil {
		return "", fmt.Errorf("anchor: building the mempool harness: %w", err)
	}
	bin := strings.TrimSpace(tail(out, 1))
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("anchor: %s printed %q, not a harness binary: %w", script, bin, ErrUnexpectedOutput)
	}
	return bin, nil
}

// findBuildScript looks for bench/dpdk/build.sh in the peregrine checkout
// that holds the working directory, then next to this package's source
// (a binary built from a checkout, run from elsewhere).
func findBuildScript() (string, error) {
	var tried []string
	if wd, err := os.Getwd(); err == nil {
		for dir := wd; ; dir = filepath.Dir(dir) {
			if isPeregrineRoot(dir) {
				return filepath.Join(dir, harnessDir, "build.sh"), nil
			}
			if filepath.Dir(dir) == dir {
				break
			}
		}
		tried = append(tried, wd+" and its parents")
	}
	if _, file, _, ok := runtime.Caller(0); ok {
		root := filepath.Join(filepath.Dir(file), "..", "..")
		if isPeregrineRoot(root) {
			return filepath.Join(root, harnessDir, "build.sh"), nil
		}
		tried = append(tried, root)
	}
	return "", fmt.Errorf("anchor: no peregrine checkout with %s/build.sh in %s (run from the repository): %w",
		harnessDir, strings.Join(tried, ", "), ErrNotInstalled)
}

func isPeregrineRoot(dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, harnessDir, "build.sh")); err != nil {
		return false
	}
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	return strings.Contains(string(mod), "module "+modulePath+"\n")
}

// parseMempool reads the harness's output: "MEMPOOL cached key=value ..."
// lines, then "MEMPOOL done".
func parseMempool(out string) (MempoolFigures, error) {
	figures := MempoolFigures{Raw: out}
	done := false
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "MEMPOOL done" {
			done = true
			continue
		}
		rest, ok := strings.CutPrefix(line, "MEMPOOL cached ")
		if !ok {
			continue
		}
		c, err := parseMempoolCase(rest)
		if err != nil {
			return MempoolFigures{Raw: out}, fmt.Errorf("anchor: mempool harness line %q: %w", line, err)
		}
		figures.Cases = append(figures.Cases, c)
	}
	if !done {
		return MempoolFigures{Raw: out}, fmt.Errorf("anchor: mempool harness did not print \"MEMPOOL done\": %w", ErrUnexpectedOutput)
	}
	for _, want := range []struct {
		keep int
		dst  *float64
	}{
		{32, &figures.CachedBulk32Keep32NsPerObj},
		{128, &figures.CachedBulk32Keep128NsPerObj},
	} {
		c, ok := figures.Case(32, want.keep, false)
		if !ok {
			return MempoolFigures{Raw: out}, fmt.Errorf("anchor: mempool harness printed no bulk=32 keep=%d constant_n=0 case: %w", want.keep, ErrUnexpectedOutput)
		}
		*want.dst = c.NsPerObj
	}
	return figures, nil
}

func parseMempoolCase(fields string) (MempoolCase, error) {
	var (
		c    MempoolCase
		seen = map[string]bool{}
	)
	for _, field := range strings.Fields(fields) {
		key, value, ok := strings.Cut(field, "=")
		if !ok {
			return MempoolCase{}, fmt.Errorf("field %q is not key=value: %w", field, ErrUnexpectedOutput)
		}
		var err error
		switch key {
		case "bulk":
			c.Bulk, err = strconv.Atoi(value)
		case "keep":
			c.Keep, err = strconv.Atoi(value)
		case "constant_n":
			c.ConstantN = value == "1"
		case "ns_per_obj":
			c.NsPerObj, err = strconv.ParseFloat(value, 64)
		case "cycles_per_obj":
			c.CyclesPerObj, err = strconv.ParseFloat(value, 64)
		case "rate_persec":
			c.RatePerSec, err = strconv.ParseFloat(value, 64)
		default:
			continue
		}
		if err != nil {
			return MempoolCase{}, fmt.Errorf("field %q: %w", field, errors.Join(err, ErrUnexpectedOutput))
		}
		seen[key] = true
	}
	for _, key := range []string{"bulk", "keep", "constant_n", "ns_per_obj", "rate_persec"} {
		if !seen[key] {
			return MempoolCase{}, fmt.Errorf("no %s= field: %w", key, ErrUnexpectedOutput)
		}
	}
	if c.NsPerObj <= 0 {
		return MempoolCase{}, fmt.Errorf("ns_per_obj %v is not positive: %w", c.NsPerObj, ErrUnexpectedOutput)
	}
	return c, nil
}
