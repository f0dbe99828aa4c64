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

// TestAppsLabelsEachApplication: the sidecar's applications are exported
// one series set each, labelled by attachment, user and process, with
// their refusals by reason and the server's own counts.
func TestAppsLabelsEachApplication(t *testing.T) {
	reg := metrics.New()
	require.NoError(t, reg.Apps(func(app func(metrics.App)) metrics.Sidecar {
		app(metrics.App{ID: 1, UID: 1000, PID: 42, Channels: 1, Buffers: 3, Conns: 2, InFlight: 3, OpsOK: 10, OpsFailed: 1, OpsUnused: 2,
			BytesSent: 4096, BytesReceived: 2048, Drops: map[string]uint64{"bad_buffer": 5, "quota": 0}})
		app(metrics.App{ID: 7, UID: 0, PID: 43, Channels: 1})
		return metrics.Sidecar{Attached: 2, Attaches: 3, Detaches: 1, Refused: 4}
	}))
	body := scrape(t, reg)
	for _, want := range []string{
		`peregrine_sidecar_app_channels{app="1",pid="42",uid="1000"} 1`,
		`peregrine_sidecar_app_buffers_in_use{app="1",pid="42",uid="1000"} 3`,
		`peregrine_sidecar_app_connections{app="1",pid="42",uid="1000"} 2`,
		`peregrine_sidecar_app_ops_total{app="1",outcome="ok",pid="42",uid="1000"} 10`,
		`peregrine_sidecar_app_ops_total{app="1",outcome="failed",pid="42",uid="1000"} 1`,
		`peregrine_sidecar_app_ops_total{app="1",outcome="unused",pid="42",uid="1000"} 2`,
		`peregrine_sidecar_app_bytes_total{app="1",direction="sent",pid="42",uid="1000"} 4096`,
		`peregrine_sidecar_app_drops_total{app="1",pid="42",reason="bad_buffer",uid="1000"} 5`,
		`peregrine_sidecar_app_drops_total{app="1",pid="42",reason="quota",uid="1000"} 0`,
		`peregrine_sidecar_app_connections{app="7",pid="43",uid="0"} 0`,
		"peregrine_sidecar_apps_attached 2",
		"peregrine_sidecar_refused_total 4",
	} {
		require.Contains(t, body, want)
	}
}

func scrape(t *testing.T, reg *metrics.Registry) string {
	t.Helper()
	srv, err := metrics.Serve("127.0.0.1:0", false, reg)
	require.NoError(t, err)
	defer srv.Close()
	resp, err := http.Get("http://" + srv.Addr() + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode, string(body))
	return string(body)
}
