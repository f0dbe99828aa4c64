package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/app"
)

func TestDemoVerifiesOnOneAndTwoLcores(t *testing.T) {
	for _, lcores := range []string{"0", "0,1"} {
		t.Run("lcores="+lcores, func(t *testing.T) {
			var out bytes.Buffer
			ok, err := runDemo(context.Background(), demoConfig{
				duration: 300 * time.Millisecond, size: "imix", burst: 32, workload: "forward",
				lcores: lcores, idle: "sleep", frames: 4096, quiet: true,
			}, &out)
			require.NoError(t, err)
			require.True(t, ok, out.String())
			require.Contains(t, out.String(), "verification passed")
			require.Contains(t, out.String(), "pool back to zero in use")
			require.NotContains(t, out.String(), "FAIL")
		})
	}
}

func TestDemoTransportVerifiesOnOneAndTwoLcores(t *testing.T) {
	for _, lcores := range []string{"0", "0,1"} {
		t.Run("lcores="+lcores, func(t *testing.T) {
			var out bytes.Buffer
			ok, err := runDemo(context.Background(), demoConfig{
				duration: 500 * time.Millisecond, workload: "transport", profile: app.DemoProfile, // 4 paths of their own: IOI sprays
				window: 16, seed: 3, target: 200 * time.Microsecond, minRTO: time.Millisecond,
				lcores: lcores, idle: "sleep", frames: 8192, quiet: true,
				drain: time.Minute, // generous: a -race build on a busy machine is slow, only a stall should fail
			}, &out)
			require.NoError(t, err)
			require.True(t, ok, out.String())
			require.Contains(t, out.String(), "every completed operation's bytes are where they belong (0 wrong; the target checked")
			require.Contains(t, out.String(), "verification passed")
			require.Contains(t, out.String(), "latency post→completion")
			require.Contains(t, out.String(), "[ok  ] every Send landed byte-exact in the WQE its order names (0 wrong")
			require.Contains(t, out.String(), "[ok  ] mcsq: every posted WR covered by exactly one CQE")
			require.Contains(t, out.String(), "DC connects")
			require.Contains(t, out.String(), "[ok  ] IOI sprayed the middles of large messages (up to 1 MiB) over all 4 paths")
			require.Contains(t, out.String(), "peak OPC")
			require.Contains(t, out.String(), "ordered-path moves")
		})
	}
}

func TestDemoRejectsBadFlags(t *testing.T) {
	for _, tc := range []struct {
		cfg  demoConfig
		want string
	}{
		{demoConfig{duration: 0, size: "64", burst: 32, idle: "sleep", frames: 1024}, "--duration"},
		{demoConfig{duration: time.Second, size: "12", burst: 32, idle: "sleep", frames: 1024, workload: "forward"}, "--size"},
		{demoConfig{duration: time.Second, size: "64", burst: 32, idle: "nap", frames: 1024}, "--idle"},
		{demoConfig{duration: time.Second, size: "64", burst: 32, idle: "sleep", frames: 1024, lcores: "0,1,2"}, "--lcores"},
		{demoConfig{duration: time.Second, size: "64", burst: 999, idle: "sleep", frames: 1024, workload: "forward"}, "burst 999"},
		{demoConfig{duration: time.Second, idle: "sleep", frames: 1024, workload: "bogus"}, "--workload"},
		{demoConfig{duration: time.Second, idle: "sleep", frames: 1024, workload: "transport", window: 0}, "--window"},
		{demoConfig{duration: time.Second, idle: "sleep", frames: 1024, workload: "transport", window: 8, profile: "loss=2"}, "--profile"},
	} {
		_, err := runDemo(context.Background(), tc.cfg, &bytes.Buffer{})
		require.ErrorContains(t, err, tc.want)
	}
}

func TestHelpListsSubcommandsWithExamples(t *testing.T) {
	root := newRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"demo", "--help"})
	require.NoError(t, root.Execute())
	require.Contains(t, out.String(), "peregrine demo --profile")
	for _, flag := range []string{"--duration", "--size", "--burst", "--lcores", "--idle"} {
		require.True(t, strings.Contains(out.String(), flag), "demo --help lacks %s", flag)
	}
}
