package units

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ErrUnit is wrapped by every error about a unit ParseSize or ParseRate
// does not know, so a caller may explain its own syntax instead.
var ErrUnit = errors.New("unknown unit")

// prefix is one multiplier a unit may start with.
type prefix struct {
	name string
	mult float64
}

// sizePrefixes, longest first so "kib" is tried before "k". A size unit is
// one of these followed by an optional "b" ("4KiB", "4kib", "4Ki", "4K",
// "4kB"), or a bare "b".
var sizePrefixes = []prefix{
	{"ki", 1 << 10}, {"mi", 1 << 20}, {"gi", 1 << 30}, {"ti", 1 << 40},
	{"k", 1e3}, {"m", 1e6}, {"g", 1e9}, {"t", 1e12},
	{"", 1},
}

// MaxSize is the largest size ParseSize returns: 2^53, the largest
// integer a float64 holds exactly, and far beyond any buffer.
const MaxSize = 1 << 53

// SizeHelp names the spellings ParseSize accepts, for error messages.
const SizeHelp = "a byte count such as 1500, 4KiB, 64kB, 1MiB, 1MB or 1GiB"

// ParseSize reads a byte count: a number, optionally followed by a unit
// (B; kB, MB, GB, TB powers of 1000; KiB, MiB, GiB, TiB powers of 1024;
// the trailing B may be left out), case-insensitive. A fraction is allowed
// when the result is a whole number of bytes ("1.5KiB" is 1536). Negative,
// fractional-byte and larger-than-MaxSize values are errors that quote s.
func ParseSize(s string) (int64, error) {
	num, mult, ok := splitSize(s)
	if !ok {
		return 0, fmt.Errorf("size %q: %w; use %s", s, ErrUnit, SizeHelp)
	}
	if num == "" {
		return 0, fmt.Errorf("size %q: no number; use %s", s, SizeHelp)
	}
	// Whole numbers exactly, through ParseInt; fractions through ParseFloat.
	if n, err := strconv.ParseInt(num, 10, 64); err == nil {
		if n < 0 {
			return 0, fmt.Errorf("size %q is negative; use %s", s, SizeHelp)
		}
		if m := int64(mult); n > MaxSize/m {
			return 0, fmt.Errorf("size %q is too large (at most %d bytes)", s, int64(MaxSize))
		}
		return n * int64(mult), nil // mult ≤ 2^40 divides into the check above
	}
	v, err := parseNumber(num)
	if err != nil {
		return 0, fmt.Errorf("size %q: %q is not a number; use %s", s, num, SizeHelp)
	}
	if v < 0 {
		return 0, fmt.Errorf("size %q is negative; use %s", s, SizeHelp)
	}
	b := v * mult
	if b > MaxSize {
		return 0, fmt.Errorf("size %q is too large (at most %d bytes)", s, int64(MaxSize))
	}
	if b != math.Trunc(b) {
		return 0, fmt.Errorf("size %q is not a whole number of bytes", s)
	}
	return int64(b), nil
}

// ParseSizeList reads comma-separated sizes ("512,4KiB,64KiB"), each as
// ParseSize reads it.
func ParseSizeList(s string) ([]int64, error) {
	var out []int64
	for item := range strings.SplitSeq(s, ",") {
		n, err := ParseSize(strings.TrimSpace(item))
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

// splitSize separates the number from the unit of a size. ok is false when
// the text after the number is not a size unit.
func splitSize(s string) (num string, mult float64, ok bool) {
	t := strings.ToLower(strings.TrimSpace(s))
	unit := t[numberEnd(t):]
	num = t[:len(t)-len(unit)]
	unit = strings.TrimSpace(unit)
	if unit == "b" {
		return num, 1, true
	}
	bare := strings.TrimSuffix(unit, "b")
	for _, p := range sizePrefixes {
		if bare == p.name && (p.name != "" || unit == "") {
			return num, p.mult, true
		}
	}
	return "", 0, false
}

// numberEnd returns the length of the numeric prefix of t: sign, digits, a
// decimal point and an exponent ("1e6"), as far as they go. An "e" is part
// of the number only when digits follow it.
func numberEnd(t string) int {
	i := 0
	if i < len(t) && (t[i] == '+' || t[i] == '-') {
		i++
	}
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	if i < len(t) && t[i] == 'e' {
		j := i + 1
		if j < len(t) && (t[j] == '+' || t[j] == '-') {
			j++
		}
		if j < len(t) && t[j] >= '0' && t[j] <= '9' {
			for j < len(t) && t[j] >= '0' && t[j] <= '9' {
				j++
			}
			i = j
		}
	}
	return i
}

// parseNumber is strconv.ParseFloat limited to finite decimal numbers (no
// "inf", "nan" or hexadecimal).
func parseNumber(s string) (float64, error) {
	if s == "" || numberEnd(s) != len(s) {
		return 0, fmt.Errorf("%q is not a decimal number", s)
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("%q is not a finite number", s)
	}
	return v, nil
}

// Rate is a transmit rate as the user gave it: frames per second or bits
// per second (at most one is non-zero). The zero Rate means no limit.
type Rate struct {
	PPS  float64 // frames per second
	Bits float64 // bits per second (of the frames as sent, without FCS)
}

// RateHelp names the spellings ParseRate accepts, for error messages.
const RateHelp = "frames per second (1000, 500kpps, 1mpps) or bits per second (100mbit, 10gbit, 10Gbit/s)"

// rateUnits are tried in order; a bit rate's unit may end in "bit",
// "bit/s" or "bps" (bits, not bytes: "10gbps" is ten gigabits).
var ratePrefixes = []prefix{{"k", 1e3}, {"m", 1e6}, {"g", 1e9}, {"t", 1e12}, {"", 1}}

// MaxPPS and MaxBits bound a rate: a hundred times the fastest port there
// is, so a typo (an extra "000") is caught rather than taken as "no limit".
const (
	MaxPPS  = 1e11
	MaxBits = 1e14
)

// ParseRate reads a rate: a number with no unit or with pps, kpps, mpps,
// gpps is frames per second; with bit, kbit, mbit, gbit, tbit (or those
// with "/s", or bps, kbps, mbps, gbps) bits per second; case-insensitive.
// "0" gives the zero Rate. Negative, non-finite and absurdly large rates
// are errors that quote s.
func ParseRate(s string) (Rate, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	unit := t[numberEnd(t):]
	num := t[:len(t)-len(unit)]
	unit = strings.TrimSpace(unit)
	bits := false
	var base string
	switch {
	case strings.HasSuffix(unit, "pps"):
		base = strings.TrimSuffix(unit, "pps")
	case strings.HasSuffix(unit, "bit/s"):
		base, bits = strings.TrimSuffix(unit, "bit/s"), true
	case strings.HasSuffix(unit, "bit"):
		base, bits = strings.TrimSuffix(unit, "bit"), true
	case strings.HasSuffix(unit, "bps"):
		base, bits = strings.TrimSuffix(unit, "bps"), true
	case unit == "":
	default:
		return Rate{}, fmt.Errorf("rate %q: %w; use %s", s, ErrUnit, RateHelp)
	}
	mult := 0.0
	for _, p := range ratePrefixes {
		if base == p.name {
			mult = p.mult
		}
	}
	if mult == 0 {
		return Rate{}, fmt.Errorf("rate %q: %w; use %s", s, ErrUnit, RateHelp)
	}
	v, err := parseNumber(num)
	if err != nil {
		return Rate{}, fmt.Errorf("rate %q: %q is not a number; use %s", s, num, RateHelp)
	}
	if v < 0 {
		return Rate{}, fmt.Errorf("rate %q is negative; use %s", s, RateHelp)
	}
	v *= mult
	if bits {
		if v > MaxBits {
			return Rate{}, fmt.Errorf("rate %q is beyond any port (at most %.0e bit/s)", s, MaxBits)
		}
		return Rate{Bits: v}, nil
	}
	if v > MaxPPS {
		return Rate{}, fmt.Errorf("rate %q is beyond any port (at most %.0e frames/s)", s, MaxPPS)
	}
	return Rate{PPS: v}, nil
}

// IsZero reports whether r sets no limit.
func (r Rate) IsZero() bool { return r.PPS == 0 && r.Bits == 0 }

// FramesPerSecond turns r into frames per second, a bit rate counting
// meanFrame bytes per frame.
func (r Rate) FramesPerSecond(meanFrame float64) float64 {
	if r.Bits > 0 && meanFrame > 0 {
		return r.Bits / (meanFrame * 8)
	}
	return r.PPS
}
