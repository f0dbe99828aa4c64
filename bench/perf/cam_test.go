package perf

import (
	"testing"
)

func TestCAMVsMapRuns(t *testing.T) {
	for _, n := range []int{64, 1000} {
		figures := [][4]float64{}
		a, b, c, d := CAMVsMap(n, 1<<12)
		figures = append(figures, [4]float64{a, b, c, d})
		a, b, c, d = CAMBurstVsMap(n, 8, 1<<12)
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
