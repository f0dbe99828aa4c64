package lcore

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// MaxCPU is the largest CPU number a loop can be pinned to (the size of the
// kernel's cpu_set_t as golang.org/x/sys/unix.CPUSet models it, minus one).
const MaxCPU = 1023

// ParseCPUList parses a Linux CPU list such as "0", "0,1", "0-3" or
// "0-1,3" (the format of taskset -c and /sys/devices/system/cpu/online) and
// returns the CPUs in ascending order. Spaces around items are ignored. A CPU
// listed twice is an error, as is anything beyond MaxCPU; the error names the
// offending item.
func ParseCPUList(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("lcore: empty cpu list (use e.g. \"0\", \"0-3\" or \"0-1,3\")")
	}
	var cpus []int
	seen := make(map[int]bool)
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		lo, hi, isRange := strings.Cut(item, "-")
		first, err := parseCPU(lo)
		if err != nil {
			return nil, fmt.Errorf("lcore: cpu list %q: bad item %q: %w (use N or N-M, e.g. \"0-1,3\")", s, item, err)
		}
		last := first
		if isRange {
			if last, err = parseCPU(hi); err != nil {
				return nil, fmt.Errorf("lcore: cpu list %q: bad item %q: %w (use N or N-M, e.g. \"0-1,3\")", s, item, err)
			}
			if last < first {
				return nil, fmt.Errorf("lcore: cpu list %q: bad item %q: range runs backwards (write %d-%d)", s, item, last, first)
			}
		}
		for c := first; c <= last; c++ {
			if seen[c] {
				return nil, fmt.Errorf("lcore: cpu list %q: item %q repeats cpu %d (list each cpu once)", s, item, c)
			}
			seen[c] = true
			cpus = append(cpus, c)
		}
	}
	slices.Sort(cpus)
	return cpus, nil
}

func parseCPU(s string) (int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("missing cpu number")
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || strings.HasPrefix(s, "+") {
		return 0, fmt.Errorf("%q is not a cpu number", s)
	}
	if n > MaxCPU {
		return 0, fmt.Errorf("cpu %d is beyond %d, the largest this package can pin", n, MaxCPU)
	}
	return n, nil
}

// FormatCPUList formats CPUs in the list format ParseCPUList reads, with runs
// collapsed into ranges: [0 1 2 3 6] gives "0-3,6". The input need not be
// sorted; duplicates are dropped.
func FormatCPUList(cpus []int) string {
	sorted := slices.Compact(slices.Sorted(slices.Values(cpus)))
	var b strings.Builder
	for i := 0; i < len(sorted); {
		j := i
		for j+1 < len(sorted) && sorted[j+1] == sorted[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(sorted[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(sorted[j]))
		}
		i = j + 1
	}
	return b.String()
}
