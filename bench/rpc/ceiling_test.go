package rpc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/bench/internal/benchtopo"
	"github.com/peregrine-net/peregrine/core/wire"
)

// TestCeilingTime: the window is CeilingTime at the default count, shrinks
// with the count to a floor, and never outlasts a row.
func TestCeilingTime(t *testing.T) {
	for _, c := range []struct {
		count   int
		rowTime time.Duration
		want    time.Duration
	}{
		{DefaultCount, DefaultRowTime, CeilingTime},
		{10 * DefaultCount, DefaultRowTime, CeilingTime},
		{DefaultCount / 4, DefaultRowTime, CeilingTime / 4},
		{300, DefaultRowTime, minCeilingTime},
		{DefaultCount, time.Second, time.Second},
		{300, 50 * time.Millisecond, 50 * time.Millisecond},
	} {
		require.Equal(t, c.want, ceilingTime(Options{Count: c.count, RowTime: c.rowTime}), "count %d, row time %v", c.count, c.rowTime)
	}
}

// TestCeilingShare: the file ratio's detail gives the goodput's share of
// the ceiling's payload rate, or why there is no ceiling.
func TestCeilingShare(t *testing.T) {
	// 250,000 frames of 1,500 payload bytes in a second: 3 Gbit/s.
	c := &ceiling{window: time.Second, arrived: 250_000, segment: 1500, frameLen: 1514, mtu: 1500}
	require.InDelta(t, 3e9, c.payloadBps(), 1e-3)
	require.Equal(t, "9 % of the AF_XDP frame ceiling 3.000 Gbit/s measured in this run", c.share(0.27e9/8, nil))
	var none *ceiling
	require.Equal(t, "the AF_XDP frame ceiling was not measured: no frame", none.share(1, errors.New("no frame")))
}

// TestVethCeiling measures the ceiling on a veth pair of its own, as the
// scenario does before its veth rows: frames of the pair's MTU arrive,
// each counted at the transport's payload, and the FIGURE is that rate.
func TestVethCeiling(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("creates namespaces, a veth pair and AF_XDP sockets: needs root")
	}
	cpuA, cpuB, err := benchtopo.TwoCPUs()
	require.NoError(t, err)
	m := &media{where: "veth", cpuA: cpuA, cpuB: cpuB}
	cleanup, err := m.vethPair(fmt.Sprintf("pgrpcc%d", os.Getpid()))
	require.NoError(t, err)
	defer cleanup()
	var out bytes.Buffer
	o := Options{Out: &out, Count: 300, RowTime: DefaultRowTime}
	c, err := vethCeiling(context.Background(), o, m)
	t.Log(out.String())
	require.NoError(t, err)
	require.Equal(t, 1500, c.mtu)
	require.Equal(t, wire.EthHeaderLen+1500, c.frameLen)
	// Below the frame by the transport's headers: Ethernet, IPv4, UDP and
	// its own, at least.
	require.Less(t, c.segment, c.frameLen-42)
	require.Greater(t, c.segment, c.frameLen-200)
	require.NotZero(t, c.arrived)
	require.LessOrEqual(t, c.arrived, c.sent+uint64(ceilingFrames)) // what arrived was sent, give or take the rings' frames in flight at the window's edges
	require.GreaterOrEqual(t, c.window, ceilingTime(o))
	_, gbps := ceilingFigure(t, out.String())
	require.InDelta(t, float64(c.arrived)*float64(c.segment)*8/c.window.Seconds()/1e9, gbps, 0.0005)
	require.Contains(t, out.String(), fmt.Sprintf("  # veth AF_XDP frame ceiling: %d frames of 1514 B", c.arrived))
}

// ceilingFigure returns the ceiling FIGURE's value in text, as printed and
// parsed, and requires it to be there and above zero.
func ceilingFigure(t *testing.T, text string) (string, float64) {
	t.Helper()
	got := regexp.MustCompile(`(?m)^FIGURE rpc_veth_afxdp_frame_ceiling_gbps ([0-9.]+)$`).FindStringSubmatch(text)
	require.NotNil(t, got, "no veth AF_XDP frame ceiling FIGURE")
	gbps, err := strconv.ParseFloat(got[1], 64)
	require.NoError(t, err)
	require.Greater(t, gbps, 0.0)
	return got[1], gbps
}
