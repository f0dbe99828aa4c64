package rings

import (
	"os"
	"strconv"
	"testing"
)

func TestPerfTmp(t *testing.T) {
	kind := os.Getenv("RK")
	if kind == "" {
		t.Skip()
	}
	burst, _ := strconv.Atoi(os.Getenv("RB"))
	var cpus []int
	if os.Getenv("RP") != "" {
		cpus = []int{0, 1}
	}
	for range 8 {
		e, d, err := TwoCoreBulk(kind, burst, 30_000_000, cpus)
		t.Logf("%s b=%d pinned=%v enq %.3f deq %.3f sum %.3f ns = %.2f cyc", kind, burst, cpus != nil, e, d, e+d, (e+d)*2.6)
		if err != nil {
			t.Fatal(err)
		}
	}
}
