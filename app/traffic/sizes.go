package traffic

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/peregrine-net/peregrine/internal/units"
)

// Sizes is a repeating pattern of frame lengths (bytes, without the 4-byte
// FCS, like testpmd's --txpkts). The generator walks the pattern one frame at
// a time, so a mix is exact over every len(pattern) frames and costs nothing
// per packet.
type Sizes struct {
	spec    string
	pattern []uint16
}

// imix is the "simple IMIX": 7 × 64, 4 × 594, 1 × 1518 (sizes with FCS, as
// usually quoted; we subtract it).
var imixMix = [...]struct{ size, weight int }{{64, 7}, {594, 4}, {1518, 1}}

// ParseSizes reads a size spec: "N" (fixed), "A-B" (uniform over [A, B],
// drawn from a fixed seed so runs repeat), or "imix". N, A and B are sizes
// as internal/units reads them (1500, 1KiB, 9kB). Every size must lie in
// [MinFrame, max].
func ParseSizes(spec string, max int) (Sizes, error) {
	s := Sizes{spec: spec}
	check := func(n int) error {
		if n < MinFrame || n > max {
			return fmt.Errorf("frame size %d in %q is outside [%d, %d]: generated frames carry a %d-byte header and stamp, and must fit the port", n, spec, MinFrame, max, MinFrame)
		}
		return nil
	}
	switch {
	case strings.EqualFold(spec, "imix"):
		for _, m := range imixMix {
			n := min(m.size-4, max)
			for range m.weight {
				s.pattern = append(s.pattern, uint16(n))
			}
		}
		// Interleave so bursts are mixed rather than 7 small then 4 medium.
		rand.New(rand.NewPCG(1, 2)).Shuffle(len(s.pattern), func(i, j int) {
			s.pattern[i], s.pattern[j] = s.pattern[j], s.pattern[i]
		})
	case strings.Contains(spec, "-"):
		lo, hi, _ := strings.Cut(spec, "-")
		a, err1 := frameSize(lo)
		b, err2 := frameSize(hi)
		if err1 != nil || err2 != nil || a > b {
			return Sizes{}, fmt.Errorf("frame size range %q: want MIN-MAX with MIN <= MAX, e.g. 64-1518", spec)
		}
		if err := check(a); err != nil {
			return Sizes{}, err
		}
		if err := check(b); err != nil {
			return Sizes{}, err
		}
		r := rand.New(rand.NewPCG(3, 4))
		s.pattern = make([]uint16, 1024)
		for i := range s.pattern {
			s.pattern[i] = uint16(a + r.IntN(b-a+1))
		}
	default:
		n, err := frameSize(spec)
		if err != nil {
			return Sizes{}, fmt.Errorf("frame size %q: want a number or size (60..%d, e.g. 1500 or 1KiB), a range like 64-1518, or imix", spec, max)
		}
		if err := check(n); err != nil {
			return Sizes{}, err
		}
		s.pattern = []uint16{uint16(n)}
	}
	return s, nil
}

// frameSize reads one size of a spec; anything beyond an int's range is
// reported by the range check of the caller as too large.
func frameSize(s string) (int, error) {
	n, err := units.ParseSize(s)
	if err != nil {
		return 0, err
	}
	return int(min(n, 1<<31-1)), nil
}

// FixedSize returns Sizes of one length; it panics on an out-of-range size
// (use ParseSizes for user input).
func FixedSize(n int) Sizes {
	s, err := ParseSizes(strconv.Itoa(n), MaxFrame)
	if err != nil {
		panic(err)
	}
	return s
}

func (s Sizes) String() string { return s.spec }

// Min returns the smallest frame size.
func (s Sizes) Min() int {
	m := 0
	for i, n := range s.pattern {
		if i == 0 || int(n) < m {
			m = int(n)
		}
	}
	return m
}

// Max returns the largest size in the pattern.
func (s Sizes) Max() int {
	m := 0
	for _, n := range s.pattern {
		m = max(m, int(n))
	}
	return m
}

// Mean returns the average frame length of the pattern.
func (s Sizes) Mean() float64 {
	t := 0
	for _, n := range s.pattern {
		t += int(n)
	}
	return float64(t) / float64(len(s.pattern))
}
