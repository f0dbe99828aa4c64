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

// TestSkip: a skipped ratio prints SKIP with a NaN value and its reason,
// counts as neither pass nor fail, shows in the summary, and is read back
// as skipped.
func TestSkip(t *testing.T) {
	var b bytes.Buffer
	rep := New(&b)
	rep.Add(Ratio{Name: "a", Value: 2, Op: AtLeast, Target: 1})
	rep.Add(Ratio{Name: "b", Op: AtLeast, Target: 1.6, Skipped: true, Detail: "needs root"})
	pass, fail := rep.Summary()
	if pass != 1 || fail != 0 {
		t.Fatalf("pass %d fail %d, want 1 0", pass, fail)
	}
	want := "RATIO a 2.000 goal >= 1 PASS\nRATIO b NaN goal >= 1.6 SKIP\n  # needs root\nBENCH-SUMMARY pass=1 fail=0 skip=1\n"
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
	got := Parse(bytes.NewReader(b.Bytes()))
	if len(got) != 2 || got[0].Skipped || !got[1].Skipped || got[1].Detail != "needs root" {
		t.Fatalf("parsed %+v", got)
	}
}
