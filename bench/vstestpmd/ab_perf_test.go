package vstestpmd

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/bench/kgen"
	"github.com/peregrine-net/peregrine/pmd/netns"
)

// abEnv names the environment variable that runs TestPeregrineAB, a tuning
// aid: peregrine's side of one comparison under several driver settings in
// alternating rounds, without testpmd. Its value is
//
//	ROW:SIZE:ROUNDS:DURATION:VARIANT|VARIANT|...
//
// where each VARIANT replaces the driver's parameters (driverParams) unless
// it is "default", e.g. PEREGRINE_VS_AB='afxdp_io:64:5:2s:default|&busy_poll=0'.
// A "+owncaches" suffix leaves the ports on their own mbuf caches instead of
// the loop's; a "+sharecpu" suffix (after it, if both) lets the process's
// other threads run on the loop's CPU (no lcore.Options.Isolate). With testpmd=1 as a variant, testpmd's side is measured in
// the rotation too.
const abEnv = "PEREGRINE_VS_AB"

func TestPeregrineAB(t *testing.T) {
	spec := os.Getenv(abEnv)
	if spec == "" {
		t.Skipf("tuning aid; set %s=ROW:SIZE:ROUNDS:DURATION:VARIANT|VARIANT (see ab_perf_test.go)", abEnv)
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root (namespaces, veth, AF_XDP and AF_PACKET ports)")
	}
	f := strings.SplitN(spec, ":", 5)
	require.Len(t, f, 5, "%s=%q", abEnv, spec)
	var c comparison
	for _, cc := range comparisons {
		if cc.name() == f[0] {
			c = cc
		}
	}
	require.NotEmpty(t, c.driver, "unknown row %q", f[0])
	size, err := strconv.Atoi(f[1])
	require.NoError(t, err)
	rounds, err := strconv.Atoi(f[2])
	require.NoError(t, err)
	dur, err := time.ParseDuration(f[3])
	require.NoError(t, err)
	variants := strings.Split(f[4], "|")

	prefix := fmt.Sprintf("pgab%d", os.Getpid()%100000)
	topo, err := netns.BenchThreeNS(prefix, prefix)
	require.NoError(t, err)
	defer func() { require.NoError(t, topo.Delete()) }()
	sink, err := kgen.AttachSink(topo.Sink, topo.SinkIf)
	require.NoError(t, err)
	defer func() { require.NoError(t, sink.Detach()) }()
	b := &bench{topo: topo, sink: sink, dur: dur, prof: profiler{dir: os.Getenv(ProfileEnv)}}
	if b.prof.dir != "" {
		require.NoError(t, os.MkdirAll(b.prof.dir, 0o755))
	}

	got := make([][]float64, len(variants))
	ctx := context.Background()
	for round := 1; round <= rounds; round++ {
		for i, v := range variants {
			b.window = fmt.Sprintf("%s_%dB_r%d_v%d", c.name(), size, round, i)
			var r result
			if v == "testpmd=1" {
				r, err = b.testpmd(ctx, c, size)
			} else {
				b.params = map[string]string{}
				params, share := strings.CutSuffix(v, "+sharecpu")
				b.shareCPU = share
				params, own := strings.CutSuffix(params, "+owncaches")
				b.ownCaches = own
				if params != "default" {
					b.params[c.driver] = params
				}
				r, err = b.peregrine(ctx, c, size)
			}
			require.NoError(t, err, "variant %q", v)
			got[i] = append(got[i], r.pps)
			load, _ := os.ReadFile("/proc/loadavg")
			t.Logf("round %d variant %q: %.3f Mpps (%s) load %s", round, v, r.pps/1e6, r.detail, strings.TrimSpace(string(load)))
		}
	}
	for i, v := range variants {
		t.Logf("variant %-24q median %.3f Mpps %s", v, median(got[i])/1e6, mppsList(got[i]))
	}
}
