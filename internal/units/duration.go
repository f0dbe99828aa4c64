package units

import (
	"strconv"
	"time"
)

// FormatDuration prints d with three significant digits and a unit (ns,
// µs, ms, s): "176 ms", "655 µs", "2.05 s". Every figure a user reads —
// latencies, RTTs, drains — goes through it, never a raw Go duration
// ("176.234ms").
func FormatDuration(d time.Duration) string {
	switch {
	case d == 0:
		return "0 ns"
	case d < 0:
		return "-" + FormatDuration(-d)
	}
	v, unit := float64(d), "ns"
	for _, u := range []struct {
		scale float64
		name  string
	}{{1e3, "µs"}, {1e6, "ms"}, {1e9, "s"}} {
		// 999.7 µs reads "1.00 ms", not "1000 µs".
		if float64(d) >= u.scale*0.9995 {
			v, unit = float64(d)/u.scale, u.name
		}
	}
	return Sig3(v) + " " + unit
}

// FormatLatency is FormatDuration of a latency in nanoseconds, or "n/a"
// when none was measured (samples 0).
func FormatLatency(ns, samples uint64) string {
	if samples == 0 {
		return "n/a"
	}
	return FormatDuration(time.Duration(ns))
}

// Sig3 prints v with three significant digits, the integer part whole:
// 1.23, 12.3, 123, 1234.
func Sig3(v float64) string {
	switch {
	case v >= 99.95:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 9.995:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}
