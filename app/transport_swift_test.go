package app

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/lcore"
	"github.com/peregrine-net/peregrine/core/mbuf"
)

// A stage that leaves min_cwnd out gets DefaultMinCwnd, not Swift's 0.01
// (which paced the shipped trio to a packet per hundred round trips); a
// floor set explicitly, Swift's own included, is kept.
func TestTransportSwiftFloor(t *testing.T) {
	require.Equal(t, DefaultMinCwnd, transportSwift(TransportOptions{}).MinCwnd)
	require.Equal(t, 0.01, transportSwift(TransportOptions{MinCwnd: 0.01}).MinCwnd)
	sp := transportSwift(TransportOptions{MinCwnd: 64})
	require.Equal(t, 64.0, sp.MinCwnd)
	require.GreaterOrEqual(t, sp.InitialCwnd, sp.MinCwnd)
	require.NoError(t, sp.Validate())
}

// TestTransportStageDefaults: a stage whose options leave the congestion
// target and the least RTO 0 runs on the values `transport`, `demo` and
// the configs default to, not on Swift's hardware target (25 µs) and the
// transport's 100 µs, which a poll loop's scheduling delay exceeds.
func TestTransportStageDefaults(t *testing.T) {
	require.Equal(t, DefaultCongestionTarget, transportSwift(TransportOptions{}).BaseTarget)
	require.Equal(t, 50*time.Microsecond, transportSwift(TransportOptions{CongestionTarget: 50 * time.Microsecond}).BaseTarget)

	p, err := New(Options{Pool: mbuf.Options{Name: t.Name(), Frames: 1024}, Ports: []string{"null:"}, Lcores: []Lcore{{Name: "l", CPU: -1}}, Idle: lcore.IdlePolicy{Mode: lcore.IdleSleep}, Clock: clock.NewVirtual(0)})
	require.NoError(t, err)
	defer p.Close()
	tr, err := p.AddTransport(TransportOptions{Role: "target", LocalIP: netip.MustParseAddr("198.18.0.2"), Window: 1, Sizes: []int{64}})
	require.NoError(t, err)
	require.Equal(t, DefaultMinRTO, tr.Endpoint.Transport().Options().MinRTO)
}
