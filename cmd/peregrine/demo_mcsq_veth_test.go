package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/pmd/netns"
	"github.com/peregrine-net/peregrine/pmd/netns/netnstest"
)

// TestDemoMCSQOverVeth: `demo --veth` drives the MCSQ part across its own
// veth pair (gen namespace to sink namespace) from several client
// goroutines to several target endpoints behind a switch; the summary
// prints SQ binds, DC connects and disconnects, blacklist events and CQE
// coalescing, every WR is covered once and the ordered CQ is in order;
// afterwards no namespace of the demo is left and the pool is at zero.
func TestDemoMCSQOverVeth(t *testing.T) {
	netnstest.SkipUnlessRoot(t)
	var out bytes.Buffer
	ok, err := runDemo(context.Background(), demoConfig{
		duration: time.Second, workload: "transport", profile: "delay=10us", window: 16, seed: 7,
		target: 200 * time.Microsecond, minRTO: time.Millisecond, lcores: "0,1", idle: "yield", frames: 16384,
		quiet: true, veth: true, driver: "afpacket", drain: time.Minute,
	}, &out)
	require.NoError(t, err)
	s := out.String()
	require.True(t, ok, s)
	for _, want := range []string{
		"to 5 hosts on a switch across a veth pair (gen namespace to sink namespace:",
		"mcsq SQs: ", "DC connects ", "mcsq blacklist: ", "folded into a later CQE",
		"[ok  ] mcsq: every posted WR covered by exactly one CQE",
		"[ok  ] mcsq: the ordered CQ released CQEs in posting order (0 out of order)",
		"[ok  ] mcsq: the refusing host's flows were blacklisted",
		"[ok  ] mcsq: WRs completed over the veth pair",
		"[ok  ] pool back to zero in use",
	} {
		require.Contains(t, s, want)
	}
	names, err := netns.List()
	require.NoError(t, err)
	mine := fmt.Sprintf("pgdemo-%d-", os.Getpid()%100000)
	for _, n := range names {
		require.False(t, strings.HasPrefix(n, mine), "namespace %s left behind", n)
	}
}
