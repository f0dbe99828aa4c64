package units

import (
	"math"
	"strconv"
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
	}{
		{"0", 0}, {"1500", 1500}, {"64B", 64}, {"64b", 64},
		{"4KiB", 4096}, {"4kib", 4096}, {"4KIB", 4096}, {"4Ki", 4096},
		{"1MiB", 1 << 20}, {"1GiB", 1 << 30}, {"1gib", 1 << 30}, {"1Gi", 1 << 30}, {"2TiB", 2 << 40},
		{"64kB", 64000}, {"64KB", 64000}, {"64k", 64000}, {"1MB", 1e6}, {"1mb", 1e6}, {"1GB", 1e9}, {"1TB", 1e12},
		{"1.5KiB", 1536}, {"0.5kB", 500}, {" 512 ", 512}, {"512 B", 512}, {"1e3", 1000},
	} {
		got, err := ParseSize(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
}

func TestParseSizeErrorsQuoteInput(t *testing.T) {
	for _, in := range []string{"", "KiB", "-1", "-1KiB", "1.1B", "0.3KiB", "1XB", "1GiBs", "1bit", "inf", "nan", "0x10", "9999999999999999999TiB", "1e300"} {
		_, err := ParseSize(in)
		if err == nil {
			t.Errorf("ParseSize(%q) accepted", in)
			continue
		}
		if q := `"` + in + `"`; !strings.Contains(err.Error(), q) {
			t.Errorf("ParseSize(%q) error %q does not quote the input as typed", in, err)
		}
	}
}

func TestParseSizeList(t *testing.T) {
	got, err := ParseSizeList("512, 4KiB,1MB")
	if err != nil || len(got) != 3 || got[0] != 512 || got[1] != 4096 || got[2] != 1e6 {
		t.Fatalf("ParseSizeList = %v, %v", got, err)
	}
	if _, err := ParseSizeList("512,,4KiB"); err == nil {
		t.Fatal("an empty item was accepted")
	}
}

func TestParseRate(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Rate
	}{
		{"0", Rate{}}, {"1000", Rate{PPS: 1000}}, {"1000pps", Rate{PPS: 1000}}, {"500kpps", Rate{PPS: 5e5}},
		{"1mpps", Rate{PPS: 1e6}}, {"1Mpps", Rate{PPS: 1e6}}, {"1.5MPPS", Rate{PPS: 1.5e6}},
		{"10gbit", Rate{Bits: 1e10}}, {"10Gbit", Rate{Bits: 1e10}}, {"10GBIT", Rate{Bits: 1e10}}, {"100mbit", Rate{Bits: 1e8}},
		{"100Mbit/s", Rate{Bits: 1e8}}, {"64kbit", Rate{Bits: 64e3}}, {"1gbps", Rate{Bits: 1e9}}, {"9600bit", Rate{Bits: 9600}},
		{"1tbit", Rate{Bits: 1e12}},
	} {
		got, err := ParseRate(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseRate(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
}

func TestParseRateErrorsQuoteInput(t *testing.T) {
	for _, in := range []string{"", "gbit", "-1", "-1mpps", "10gbyte", "1xpps", "inf", "nan", "1e30", "1e20gbit", "max"} {
		_, err := ParseRate(in)
		if err == nil {
			t.Errorf("ParseRate(%q) accepted", in)
			continue
		}
		if q := `"` + in + `"`; !strings.Contains(err.Error(), q) {
			t.Errorf("ParseRate(%q) error %q does not quote the input as typed", in, err)
		}
	}
}

func TestFramesPerSecond(t *testing.T) {
	if got := (Rate{Bits: 10e9}).FramesPerSecond(1250); got != 1e6 {
		t.Errorf("10gbit at 1250 B = %v frames/s, want 1e6", got)
	}
	if got := (Rate{PPS: 7}).FramesPerSecond(64); got != 7 {
		t.Errorf("7pps = %v frames/s", got)
	}
	if !(Rate{}).IsZero() || (Rate{PPS: 1}).IsZero() {
		t.Error("IsZero is wrong")
	}
}

// FuzzParseSize checks that any input either parses to a size in range,
// which formats back to the same value, or fails with an error quoting the
// input, and never panics.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"1500", "4KiB", "1GiB", "1MB", "1.5kib", "-1", "1e3", "", "1Gi"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err != nil {
			if !strings.Contains(err.Error(), strings.Trim(strconvQuote(s), `"`)) {
				t.Fatalf("ParseSize(%q) error %q does not quote the input", s, err)
			}
			return
		}
		if n < 0 || n > MaxSize {
			t.Fatalf("ParseSize(%q) = %d, outside 0..%d", s, n, int64(MaxSize))
		}
	})
}

// FuzzParseRate: any input parses to a finite, non-negative rate of one
// kind within bounds, or fails with an error quoting it; never panics.
func FuzzParseRate(f *testing.F) {
	for _, s := range []string{"1mpps", "10gbit", "100Mbit/s", "1000", "0", "-1", "1e30", "", "gbit"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRate(s)
		if err != nil {
			if !strings.Contains(err.Error(), strings.Trim(strconvQuote(s), `"`)) {
				t.Fatalf("ParseRate(%q) error %q does not quote the input", s, err)
			}
			return
		}
		if r.PPS != 0 && r.Bits != 0 {
			t.Fatalf("ParseRate(%q) = %+v: both kinds set", s, r)
		}
		for _, v := range []float64{r.PPS, r.Bits} {
			if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) || v > MaxBits {
				t.Fatalf("ParseRate(%q) = %+v out of range", s, r)
			}
		}
	})
}

func strconvQuote(s string) string { return strconv.Quote(s) }
