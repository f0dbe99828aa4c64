package app_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/app"
	"github.com/peregrine-net/peregrine/app/traffic"
	"github.com/peregrine-net/peregrine/core/lcore"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/pmd"
	"github.com/peregrine-net/peregrine/pmd/pcap"
)

// TestCaptureParamMirrorsAPort: a capture= parameter on a port spec
// mirrors the port's frames to a pcap file, and the port keeps the name
// of its spec without the parameter.
func TestCaptureParamMirrorsAPort(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tx.pcap")
	p, err := app.New(app.Options{Pool: mbuf.Options{Frames: 4096}, Ports: []string{"mem:cap/0?capture=" + file, "mem:cap/1"}, Lcores: unpinned(1)})
	require.NoError(t, err)
	require.Equal(t, "mem:cap/0", p.Port(0).Info().Name)
	gens, err := p.AddGenerators(app.GeneratorsOptions{Port: 0, Burst: 32, Sizes: traffic.FixedSize(100), Count: 1000})
	require.NoError(t, err)
	sinks, err := p.AddSinks(app.SinksOptions{Port: 1, Burst: 32})
	require.NoError(t, err)
	require.NoError(t, p.Start())
	_, _, err = p.Run(context.Background(), app.RunOptions{Duration: bound, Done: func() bool { return gens.Done() && sinks.Frames() == 1000 }})
	require.NoError(t, err)
	require.NoError(t, p.Stop())

	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	pool, err := mbuf.New(mbuf.Options{Frames: 1024})
	require.NoError(t, err)
	r, err := pcap.NewReader(pool, pcap.ReaderOptions{Source: f})
	require.NoError(t, err)
	bufs := make([]mbuf.Handle, 64)
	n := 0
	for {
		got := r.RxBurst(0, bufs)
		if got == 0 {
			break
		}
		for _, h := range bufs[:got] {
			require.Equal(t, 100, len(pool.Data(h)))
		}
		pool.Free(bufs[:got])
		n += got
	}
	require.Equal(t, 1000, n, "every transmitted frame is in the capture")
	require.NoError(t, r.Close())
}

// TestCaptureParamRefusesAnUnwritableFile: New fails naming the port and
// the file, and nothing stays open.
func TestCaptureParamRefusesAnUnwritableFile(t *testing.T) {
	_, err := app.New(app.Options{Pool: mbuf.Options{Frames: 4096}, Ports: []string{"mem:bad/0", "mem:bad/1?capture=/nonexistent/dir/x.pcap"}, Lcores: unpinned(1), Idle: lcore.IdlePolicy{}})
	var fe *app.FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "Ports[1]", fe.Field())
	require.ErrorContains(t, err, "capture=/nonexistent/dir/x.pcap")
	// The mem pair was closed: it opens again.
	p, err := app.New(app.Options{Pool: mbuf.Options{Frames: 4096}, Ports: []string{"mem:bad/0", "mem:bad/1"}, Lcores: unpinned(1)})
	require.NoError(t, err)
	require.NoError(t, p.Stop())
}

// BenchmarkCapture measures what a capture= parameter costs a port: 32-frame
// bursts through a mem pair, plain (off: the port is not wrapped, so the
// cost is zero by construction) and mirrored to a file (on: a copy of
// every frame into the capture).
func BenchmarkCapture(b *testing.B) {
	for _, mode := range []string{"off", "on"} {
		b.Run(mode, func(b *testing.B) {
			spec := "mem:bench/0"
			if mode == "on" {
				spec += "?capture=" + filepath.Join(b.TempDir(), "bench.pcap")
			}
			p, err := app.New(app.Options{Pool: mbuf.Options{Frames: 4096}, Ports: []string{spec, "mem:bench/1"}, Lcores: unpinned(1)})
			require.NoError(b, err)
			defer p.Stop()
			pool, tx, rx := p.Pool(), p.Port(0), p.Port(1)
			bufs := make([]mbuf.Handle, 32)
			b.ReportAllocs()
			for b.Loop() {
				if pool.AllocBulk(bufs) != len(bufs) {
					b.Fatal("pool empty")
				}
				for _, h := range bufs {
					pool.SetLen(h, 64)
				}
				sent := tx.TxBurst(0, bufs)
				got := rx.RxBurst(0, bufs[:sent])
				pool.Free(bufs[:got])
			}
			pkts := float64(b.N) * 32
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/pkts, "ns/pkt")
		})
	}
}

// TestWithCapture: WithCapture adds the parameter, escaped, after any
// others, and pmd.SplitCapture takes it back off.
func TestWithCapture(t *testing.T) {
	for _, tc := range []struct{ spec, file, want string }{
		{"mem:a/0", "", "mem:a/0"},
		{"mem:a/0", "x y&z.pcap", "mem:a/0?capture=x+y%26z.pcap"},
		{"afxdp:v0?netns=a", "/tmp/v.pcap", "afxdp:v0?netns=a&capture=%2Ftmp%2Fv.pcap"},
	} {
		got := app.WithCapture(tc.spec, tc.file)
		require.Equal(t, tc.want, got)
		rest, file, err := pmd.SplitCapture(got)
		require.NoError(t, err)
		require.Equal(t, tc.spec, rest)
		require.Equal(t, tc.file, file)
	}
}
