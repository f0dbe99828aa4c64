package report

import (
	"bytes"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRatioLinesAndSummary(t *testing.T) {
	var b bytes.Buffer
	rep := New(&b)
	rep.Add(Ratio{Name: "spsc", Value: 0.8, Op: AtMost, Target: 1})
	rep.Add(Ratio{Name: "fwd", Value: 0.5, Op: AtLeast, Target: 0.75, Detail: "ours 20 Mpps, testpmd 40 Mpps"})
	rep.Add(Ratio{Name: "missing", Value: math.NaN(), Op: AtLeast, Target: 1})
	pass, fail := rep.Summary()
	require.Equal(t, 1, pass)
	require.Equal(t, 2, fail)
	require.Equal(t, "RATIO spsc 0.800 goal <= 1 PASS\n"+
		"RATIO fwd 0.500 goal >= 0.75 FAIL\n"+
		"  # ours 20 Mpps, testpmd 40 Mpps\n"+
		"RATIO missing NaN goal >= 1 FAIL\n"+
		"BENCH-SUMMARY pass=1 fail=2\n", b.String())
}
