package rfc2544

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/clock"
)

// TestRunMeasuresAKnownDUT runs every measurement against a simulated DUT
// whose answers are known: NDR at its capacity, loss (R−C)/R above it, a
// back-to-back burst of Buffer/(1−C/R), latency growing with load; then
// renders the report.
func TestRunMeasuresAKnownDUT(t *testing.T) {
	vc := clock.NewVirtual(0)
	const capacity, maxRate, buffer = 1e6, 2e6, 5000
	dut, err := NewSimulated(SimulatedOptions{Capacity: capacity, Buffer: buffer, Seed: 1, Clock: vc})
	require.NoError(t, err)
	var lines []string
	res, err := Run(context.Background(), dut, "sim", Options{
		Search:  SearchOptions{MaxRate: maxRate, Duration: 100 * time.Millisecond},
		Sizes:   []FrameSize{64, IMIX},
		Repeats: 3, Clock: vc, Progress: func(s string) { lines = append(lines, s) },
	})
	require.NoError(t, err)
	require.Len(t, res.Sizes, 2)
	s := res.Size(64)
	require.Len(t, s.Searches, 3)
	require.Len(t, res.Size(IMIX).Searches, 1)
	// The buffer absorbs Buffer frames of excess per trial: a rate up to
	// C + Buffer/duration loses nothing (as a real DUT's queues do).
	const dur = 0.1
	require.GreaterOrEqual(t, s.NDR, capacity*(1-DefaultWidth))
	require.LessOrEqual(t, s.NDR, capacity+buffer/dur)
	require.GreaterOrEqual(t, s.PDR, s.NDR)
	require.LessOrEqual(t, s.Repeatability, 1+DefaultWidth)
	require.Len(t, s.Latency, 4)
	for i := 1; i < len(s.Latency); i++ {
		require.GreaterOrEqual(t, s.Latency[i].P99, s.Latency[i-1].P99, "latency grows with load")
	}
	require.Len(t, s.FrameLoss, 10)
	require.Zero(t, s.FrameLoss[4].Loss, "50 %% of 2 Mfps is the capacity")
	require.InDelta(t, 1-(buffer+capacity*dur)/(maxRate*dur), s.FrameLoss[9].Loss, 1e-4, "at 2 Mfps what neither the DUT nor its buffer takes is lost")
	want := buffer / (1 - capacity/maxRate)
	require.InEpsilon(t, want, s.BackToBack.Mean, DefaultWidth+0.001)
	require.False(t, s.BackToBack.AtMax)
	require.Equal(t, vc.Now().Sub(0), res.Elapsed, "the run is timed on its clock")
	require.NotEmpty(t, lines)

	rep := &Report{Parameters: map[string]any{"trial_duration": "100ms"}, Results: []*Result{res}, Ratios: []RatioLine{{"search_repeatability", s.Repeatability, "<= 1.10", true}}}
	var md, js bytes.Buffer
	require.NoError(t, rep.WriteMarkdown(&md))
	for _, want := range []string{"# RFC 2544 benchmark", "| sim | 64B |", "p99 by load", "Frame loss rate", "Back-to-back", "search_repeatability", "trial_duration"} {
		require.Contains(t, md.String(), want)
	}
	require.NoError(t, rep.WriteJSON(&js))
	var back Report
	require.NoError(t, json.Unmarshal(js.Bytes(), &back))
	require.Equal(t, "sim", back.Results[0].DUT)
	require.Equal(t, s.NDR, back.Results[0].Sizes[0].NDR)
	require.NotEmpty(t, back.Results[0].Sizes[0].Searches[0].Trials)
}

func TestRunRejectsBadOptions(t *testing.T) {
	dut, _ := NewSimulated(SimulatedOptions{Capacity: 1})
	for _, o := range []Options{
		{Search: SearchOptions{MaxRate: 10}, Sizes: []FrameSize{32}},
		{Search: SearchOptions{MaxRate: 10}, Measures: []Measure{"jitter"}},
		{Search: SearchOptions{MaxRate: 10}, Measures: []Measure{Latency}},
		{Search: SearchOptions{MaxRate: 10}, LossLoads: []float64{1.5}},
		{Search: SearchOptions{}},
	} {
		_, err := Run(context.Background(), dut, "x", o)
		require.Error(t, err, "%+v", o)
	}
}
