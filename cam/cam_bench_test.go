package cam

import (
	"fmt"
	"testing"
)

// Benchmarks compare the table with map[K]uint32 on identical key sequences
// (pre-generated; hits in random order, so the 64 K case is not all cache
// hits). Two map baselines: "map" has the table's key type, TransportKey,
// three uint32s that the map hashes as 12 plain bytes; "map-padded" has the
// same values in struct{CID uint32; Win uint8; PSN uint32}, which the map
// must hash field by field (the table refuses that type: it has padding).
// "cam-swar" is the portable tag match; "cam-simd" (only with
// GOEXPERIMENT=simd on an AVX2 CPU) uses simd/archsimd.

var benchSizes = []int{64, 65536}

var burstSizes = []int{1, 8, 32, 64}

type paddedTransportKey struct {
	CID uint32
	Win uint8
	PSN uint32
}

func toPadded(k TransportKey) paddedTransportKey {
	return paddedTransportKey{CID: k.CID, Win: uint8(k.Win), PSN: k.PSN}
}

type variant struct {
	name string
	simd bool
}

func variants() []variant {
	v := []variant{{"cam-swar", false}}
	if simdAvailable() {
		v = append(v, variant{"cam-simd", true})
	}
	return v
}

func newBenchTable(b *testing.B, w *workload[TransportKey], simd bool) *Table[TransportKey] {
	t, err := New[TransportKey](Options{Capacity: w.n, Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	t.matchSIMD = simd
	fillTable(t, w)
	return t
}

func report(b *testing.B, ns float64) {
	b.ReportMetric(ns, "ns/key")
	b.ReportMetric(1e3/ns, "Mkeys/s")
}

func benchLookup(b *testing.B, miss bool) {
	for _, n := range benchSizes {
		w := newWorkload(n, 1<<16, 1)
		wp := convertWorkload(w, toPadded)
		probes, paddedProbes := w.hits, wp.hits
		if miss {
			probes, paddedProbes = w.misses, wp.misses
		}
		for _, v := range variants() {
			b.Run(fmt.Sprintf("%s/n=%d", v.name, n), func(b *testing.B) {
				t := newBenchTable(b, w, v.simd)
				b.ReportAllocs()
				b.ResetTimer()
				report(b, benchLookupTable(t, probes, b.N))
			})
		}
		b.Run(fmt.Sprintf("map/n=%d", n), func(b *testing.B) {
			m := fillMap(w)
			b.ReportAllocs()
			b.ResetTimer()
			report(b, benchLookupMap(m, probes, b.N))
		})
		b.Run(fmt.Sprintf("map-padded/n=%d", n), func(b *testing.B) {
			m := fillMap(wp)
			b.ReportAllocs()
			b.ResetTimer()
			report(b, benchLookupMap(m, paddedProbes, b.N))
		})
	}
}

func BenchmarkLookupHit(b *testing.B) { benchLookup(b, false) }

func BenchmarkLookupMiss(b *testing.B) { benchLookup(b, true) }

func BenchmarkChurn(b *testing.B) {
	for _, n := range benchSizes {
		w := newWorkload(n, 1<<16, 1)
		wp := convertWorkload(w, toPadded)
		for _, v := range variants() {
			b.Run(fmt.Sprintf("%s/n=%d", v.name, n), func(b *testing.B) {
				t := newBenchTable(b, w, v.simd)
				b.ReportAllocs()
				b.ResetTimer()
				report(b, benchChurnTable(t, w, &window{}, b.N))
			})
		}
		b.Run(fmt.Sprintf("map/n=%d", n), func(b *testing.B) {
			m := fillMap(w)
			b.ReportAllocs()
			b.ResetTimer()
			report(b, benchChurnMap(m, w, &window{}, b.N))
		})
		b.Run(fmt.Sprintf("map-padded/n=%d", n), func(b *testing.B) {
			m := fillMap(wp)
			b.ReportAllocs()
			b.ResetTimer()
			report(b, benchChurnMap(m, wp, &window{}, b.N))
		})
	}
}

func BenchmarkLookupBurst(b *testing.B) {
	for _, n := range benchSizes {
		w := newWorkload(n, 1<<16, 1)
		for _, burst := range burstSizes {
			b.Run(fmt.Sprintf("cam/n=%d/burst=%d", n, burst), func(b *testing.B) {
				t := newBenchTable(b, w, simdAvailable())
				b.ReportAllocs()
				b.ResetTimer()
				report(b, benchLookupBurst(t, w.hits, burst, b.N))
			})
		}
	}
}

func BenchmarkChurnBurst(b *testing.B) {
	for _, n := range benchSizes {
		w := newWorkload(n, 1<<16, 1)
		for _, burst := range burstSizes {
			b.Run(fmt.Sprintf("cam/n=%d/burst=%d", n, burst), func(b *testing.B) {
				t := newBenchTable(b, w, simdAvailable())
				b.ReportAllocs()
				b.ResetTimer()
				report(b, benchChurnBurst(t, w, &window{}, burst, b.N))
			})
		}
	}
}

func TestCompareWithMapRuns(t *testing.T) {
	for _, n := range []int{64, 1000} {
		figures := [][4]float64{}
		a, b, c, d := CompareWithMap(n, 1<<12)
		figures = append(figures, [4]float64{a, b, c, d})
		a, b, c, d = CompareBurstWithMap(n, 8, 1<<12)
		figures = append(figures, [4]float64{a, b, c, d})
		for _, f := range figures {
			for _, ns := range f {
				if !(ns > 0) {
					t.Fatalf("n=%d: figures %v: want all > 0", n, f)
				}
			}
		}
	}
}
