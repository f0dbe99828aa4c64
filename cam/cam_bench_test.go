package cam_test

import (
	"fmt"
	"testing"

	"github.com/peregrine-net/peregrine/bench/perf"
	"github.com/peregrine-net/peregrine/cam"
)

// Benchmarks compare the table with map[K]uint32 on identical key sequences
// (pre-generated; hits in random order, so the 64 K case is not all cache
// hits), with bench/perf's workloads and loops: the ones `peregrine bench
// transport-core` times. They live in an external test package so that cam
// itself never imports bench (the SIMD switch is export_test.go's). Two map baselines: "map" has the table's key type, TransportKey,
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

func toPadded(k cam.TransportKey) paddedTransportKey {
	return paddedTransportKey{CID: k.CID, Win: uint8(k.Win), PSN: k.PSN}
}

type variant struct {
	name string
	simd bool
}

func variants() []variant {
	v := []variant{{"cam-swar", false}}
	if cam.SIMDAvailable() {
		v = append(v, variant{"cam-simd", true})
	}
	return v
}

func newBenchTable(b *testing.B, w *perf.CAMWorkload[cam.TransportKey], simd bool) *cam.Table[cam.TransportKey] {
	t, err := cam.New[cam.TransportKey](cam.Options{Capacity: w.N, Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	cam.SetMatchSIMD(t, simd)
	perf.FillTable(t, w)
	return t
}

func report(b *testing.B, ns float64) {
	b.ReportMetric(ns, "ns/key")
	b.ReportMetric(1e3/ns, "Mkeys/s")
}

func benchLookup(b *testing.B, miss bool) {
	for _, n := range benchSizes {
		w := perf.NewCAMWorkload(n, 1<<16, 1)
		wp := perf.ConvertCAMWorkload(w, toPadded)
		probes, paddedProbes := w.Hits, wp.Hits
		if miss {
			probes, paddedProbes = w.Misses, wp.Misses
		}
		for _, v := range variants() {
			b.Run(fmt.Sprintf("%s/n=%d", v.name, n), func(b *testing.B) {
				t := newBenchTable(b, w, v.simd)
				b.ReportAllocs()
				b.ResetTimer()
				report(b, perf.CAMLookup(t, probes, b.N))
			})
		}
		b.Run(fmt.Sprintf("map/n=%d", n), func(b *testing.B) {
			m := perf.FillMap(w)
			b.ReportAllocs()
			b.ResetTimer()
			report(b, perf.MapLookup(m, probes, b.N))
		})
		b.Run(fmt.Sprintf("map-padded/n=%d", n), func(b *testing.B) {
			m := perf.FillMap(wp)
			b.ReportAllocs()
			b.ResetTimer()
			report(b, perf.MapLookup(m, paddedProbes, b.N))
		})
	}
}

func BenchmarkLookupHit(b *testing.B) { benchLookup(b, false) }

func BenchmarkLookupMiss(b *testing.B) { benchLookup(b, true) }

func BenchmarkChurn(b *testing.B) {
	for _, n := range benchSizes {
		w := perf.NewCAMWorkload(n, 1<<16, 1)
		wp := perf.ConvertCAMWorkload(w, toPadded)
		for _, v := range variants() {
			b.Run(fmt.Sprintf("%s/n=%d", v.name, n), func(b *testing.B) {
				t := newBenchTable(b, w, v.simd)
				b.ReportAllocs()
				b.ResetTimer()
				report(b, perf.CAMChurn(t, w, &perf.CAMWindow{}, b.N))
			})
		}
		b.Run(fmt.Sprintf("map/n=%d", n), func(b *testing.B) {
			m := perf.FillMap(w)
			b.ReportAllocs()
			b.ResetTimer()
			report(b, perf.MapChurn(m, w, &perf.CAMWindow{}, b.N))
		})
		b.Run(fmt.Sprintf("map-padded/n=%d", n), func(b *testing.B) {
			m := perf.FillMap(wp)
			b.ReportAllocs()
			b.ResetTimer()
			report(b, perf.MapChurn(m, wp, &perf.CAMWindow{}, b.N))
		})
	}
}

func BenchmarkLookupBurst(b *testing.B) {
	for _, n := range benchSizes {
		w := perf.NewCAMWorkload(n, 1<<16, 1)
		for _, burst := range burstSizes {
			b.Run(fmt.Sprintf("cam/n=%d/burst=%d", n, burst), func(b *testing.B) {
				t := newBenchTable(b, w, cam.SIMDAvailable())
				b.ReportAllocs()
				b.ResetTimer()
				report(b, perf.CAMLookupBurst(t, w.Hits, burst, b.N))
			})
		}
	}
}

func BenchmarkChurnBurst(b *testing.B) {
	for _, n := range benchSizes {
		w := perf.NewCAMWorkload(n, 1<<16, 1)
		for _, burst := range burstSizes {
			b.Run(fmt.Sprintf("cam/n=%d/burst=%d", n, burst), func(b *testing.B) {
				t := newBenchTable(b, w, cam.SIMDAvailable())
				b.ReportAllocs()
				b.ResetTimer()
				report(b, perf.CAMChurnBurst(t, w, &perf.CAMWindow{}, burst, b.N))
			})
		}
	}
}
