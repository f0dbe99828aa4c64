package cam

// Hooks for the external test package's benchmarks (cam_bench_test.go),
// which compare the portable and the SIMD tag match on one machine.

// SIMDAvailable reports whether New picks the SIMD tag match here.
var SIMDAvailable = simdAvailable

// SetMatchSIMD switches t between the SIMD tag match (on, where
// SIMDAvailable) and the portable one.
func SetMatchSIMD[K comparable](t *Table[K], on bool) { t.matchSIMD = on }
