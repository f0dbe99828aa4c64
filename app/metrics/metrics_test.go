package metrics_test

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/app/metrics"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/pmd/mem"
)

// TestServeScrapesPortsAndPool: /metrics on a loopback address shows the
// ports (a spec given twice labelled apart) and the pool.
func TestServeScrapesPortsAndPool(t *testing.T) {
	pool, err := mbuf.New(mbuf.Options{Frames: 1024})
	require.NoError(t, err)
	a, b, err := mem.NewPair(pool, mem.PairOptions{Name: "m", Queues: 2, Size: 2})
	require.NoError(t, err)
	// Three frames on queue 1 of a 2-slot ring: one refused, counted on
	// that queue.
	hs := make([]mbuf.Handle, 3)
	require.Equal(t, 3, pool.AllocBulk(hs))
	require.Equal(t, 2, a.TxBurst(1, hs))
	pool.Free(hs[2:])
	reg := metrics.New()
	require.NoError(t, reg.Ports(func() []port.Port { return []port.Port{a, b, a} }))
	require.NoError(t, reg.Pool(pool))
	srv, err := metrics.Serve("127.0.0.1:0", false, reg)
	require.NoError(t, err)
	resp, err := http.Get("http://" + srv.Addr() + "/metrics")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode, string(body))
	for _, want := range []string{
		`peregrine_port_rx_packets_total{port="mem:m/0",queue="0"} 0`,
		`peregrine_port_rx_packets_total{port="mem:m/0#2",queue="0"} 0`,
		`peregrine_port_drops_total{port="mem:m/1",reason="tx_refused"} 0`,
		`peregrine_port_drops_total{port="mem:m/0",reason="tx_refused"} 1`,
		`peregrine_port_queue_drops_total{port="mem:m/0",queue="0",reason="tx_refused"} 0`,
		`peregrine_port_queue_drops_total{port="mem:m/0",queue="1",reason="tx_refused"} 1`,
		`peregrine_port_queue_drops_total{port="mem:m/1",queue="1",reason="rx_dropped"} 0`,
		`peregrine_port_tx_packets_total{port="mem:m/0",queue="1"} 2`,
		"peregrine_pool_frames 1024",
		"peregrine_pool_frames_in_use 2",
	} {
		require.Contains(t, string(body), want)
	}
	require.NoError(t, srv.Close())
	require.NoError(t, a.Close())
	require.NoError(t, b.Close())
	require.NoError(t, pool.Close())
}

// TestServeRefuses: a non-loopback address without public, a malformed
// one, and one in use are each refused with the fix.
func TestServeRefuses(t *testing.T) {
	reg := metrics.New()
	_, err := metrics.Serve("198.18.0.1:9100", false, reg)
	require.ErrorContains(t, err, "not a loopback address")
	require.ErrorContains(t, err, "--metrics-public")
	_, err = metrics.Serve("9100", false, reg)
	require.ErrorContains(t, err, "give HOST:PORT")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	_, err = metrics.Serve(ln.Addr().String(), false, reg)
	require.Error(t, err)
	require.True(t, strings.Contains(err.Error(), "address already in use"), err.Error())
}
