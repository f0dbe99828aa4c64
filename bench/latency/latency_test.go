package latency

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRunPrintsEveryRow runs the whole scenario once with tiny counts and
// checks that every row, figure and ratio is printed, summary last. As
// root sockperf must be there (hack/install-deps.sh installs it).
func TestRunPrintsEveryRow(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: namespaces, veth, AF_XDP and AF_PACKET sockets (run as root; hack/install-deps.sh installs sockperf)")
	}
	var out bytes.Buffer
	pass, fail, err := Run(context.Background(), Options{
		Out: &out, Count: 40, KernelTime: time.Second, IdleWindow: 50 * time.Millisecond,
		Prefix: fmt.Sprintf("pglt%d", os.Getpid()),
	})
	require.NoError(t, err, out.String())
	text := out.String()
	t.Log(text)
	for _, size := range Sizes {
		for _, name := range Rows() {
			for _, q := range []string{"p50", "p99", "p999"} {
				require.Contains(t, text, fmt.Sprintf("FIGURE latency_%s_%s_%s_us ", sizeName(size), name, q))
			}
		}
	}
	for _, name := range []string{"latency_64b_p50_afxdp_vs_kernel_udp", "latency_64b_p99_afxdp_vs_kernel_udp", "latency_64b_p50_afpacket_vs_afxdp"} {
		require.Contains(t, text, "RATIO "+name+" ")
	}
	for _, m := range []string{"default_policy", "adaptive", "busy", "yield", "sleep"} {
		require.Contains(t, text, "FIGURE idle_cpu_"+m+" ")
	}
	require.Equal(t, 3, pass+fail)
	lines := strings.Split(strings.TrimSpace(text), "\n")
	require.Equal(t, fmt.Sprintf("BENCH-SUMMARY pass=%d fail=%d", pass, fail), lines[len(lines)-1])
}

func TestParseSockperf(t *testing.T) {
	report := []byte(`sockperf: Summary: Round trip is 46.820 usec
sockperf: ---> <MAX> observation = 20051.499
sockperf: ---> percentile 99.999 = 20051.499
sockperf: ---> percentile 99.900 = 4050.089
sockperf: ---> percentile 99.000 =  534.944
sockperf: ---> percentile 50.000 =   16.039
sockperf: ---> <MIN> observation =   12.673`)
	q, err := parseSockperf(report)
	require.NoError(t, err)
	require.Equal(t, quantiles{p50: 16.039, p99: 534.944, p999: 4050.089}, q)
	_, err = parseSockperf([]byte("sockperf: ERROR: no server"))
	require.ErrorContains(t, err, "no p50")
	_, err = parseSockperf([]byte("sockperf: ---> percentile 50.000 = x"))
	require.Error(t, err)
}
