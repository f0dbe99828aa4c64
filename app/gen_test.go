package app_test

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/app"
	"github.com/peregrine-net/peregrine/app/traffic"
	"github.com/peregrine-net/peregrine/core/lcore"
	"github.com/peregrine-net/peregrine/core/mbuf"
)

func newPipeline(t *testing.T, lcores int, ports ...string) *app.Pipeline {
	t.Helper()
	p, err := app.New(app.Options{
		Pool:   mbuf.Options{Name: t.Name(), Frames: 4096},
		Ports:  ports,
		Lcores: unpinned(lcores),
		Idle:   lcore.IdlePolicy{Mode: lcore.IdleSleep},
	})
	require.NoError(t, err)
	return p
}

// TestGeneratorsToSinksOverMem: generators on one end of a two-queue mem
// pair and sinks on the other, on two loops: every frame counted arrives
// in order, and every frame is back in the pool after Stop.
func TestGeneratorsToSinksOverMem(t *testing.T) {
	const count = 5000
	p := newPipeline(t, 2, "mem:gs/0?queues=2", "mem:gs/1?queues=2")
	gens, err := p.AddGenerators(app.GeneratorsOptions{Port: 0, Burst: 32, Sizes: traffic.FixedSize(64), Flows: 1, Count: count})
	require.NoError(t, err)
	require.Len(t, gens.Gens, 2, "one generator per queue")
	sinks, err := p.AddSinks(app.SinksOptions{Port: 1, Burst: 32, Flows: 1, Latency: true})
	require.NoError(t, err)
	require.Len(t, sinks.Sinks, 2, "one sink per queue")
	require.NoError(t, p.Start())
	_, _, err = p.Run(context.Background(), app.RunOptions{Duration: bound, Period: time.Millisecond,
		Done: func() bool { return gens.Done() && sinks.Frames() == 2*count }})
	require.NoError(t, err)
	require.NoError(t, p.Stop())
	require.Equal(t, uint64(2*count), gens.Stats().Sent)
	st, lat := sinks.Stats()
	require.Equal(t, uint64(2*count), st.Received)
	require.Equal(t, uint64(2*count), st.InOrder)
	require.NotZero(t, lat.Count(), "latency was recorded")
	require.Zero(t, p.Pool().InUse(), "every frame is back in the pool")
}

// TestReplaySendsTheFile: a pcap file played three times to null: sends
// every frame of every loop, then Done.
func TestReplaySendsTheFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f.pcap")
	var b []byte
	b = binary.LittleEndian.AppendUint32(b, 0xa1b2c3d4)
	b = binary.LittleEndian.AppendUint16(b, 2)
	b = binary.LittleEndian.AppendUint16(b, 4)
	b = append(b, make([]byte, 8)...)
	b = binary.LittleEndian.AppendUint32(b, 65535)
	b = binary.LittleEndian.AppendUint32(b, 1)
	frame := make([]byte, 60)
	for i := range 100 {
		for _, v := range []uint32{1, uint32(i), uint32(len(frame)), uint32(len(frame))} {
			b = binary.LittleEndian.AppendUint32(b, v)
		}
		b = append(b, frame...)
	}
	require.NoError(t, os.WriteFile(file, b, 0o600))
	p := newPipeline(t, 1, "null:", "pcap:"+file+"?timing=fast&loop=3")
	r, err := p.AddReplay(app.ReplayOptions{Source: 1, Out: 0, Burst: 32})
	require.NoError(t, err)
	require.NoError(t, p.Start())
	_, _, err = p.Run(context.Background(), app.RunOptions{Duration: bound, Period: time.Millisecond, Done: r.Done})
	require.NoError(t, err)
	require.NoError(t, p.Stop())
	require.True(t, r.Done())
	require.Equal(t, uint64(300), p.Port(0).Stats().TxPackets)
	require.Zero(t, p.Pool().InUse(), "every frame is back in the pool")
}

// TestTrafficBuildersRefuseBadOptions: a port that is not the pipeline's,
// or a replay source that is not a pcap: port, is refused naming the option.
func TestTrafficBuildersRefuseBadOptions(t *testing.T) {
	for _, tc := range []struct {
		field string
		add   func(p *app.Pipeline) error
	}{
		{"Port", func(p *app.Pipeline) error { _, err := p.AddGenerators(app.GeneratorsOptions{Port: 1}); return err }},
		{"Port", func(p *app.Pipeline) error { _, err := p.AddSinks(app.SinksOptions{Port: -1}); return err }},
		{"Source", func(p *app.Pipeline) error { _, err := p.AddReplay(app.ReplayOptions{Source: 0}); return err }},
	} {
		p := newPipeline(t, 1, "null:")
		err := tc.add(p)
		var fe *app.FieldError
		require.True(t, errors.As(err, &fe), "%v", err)
		require.Equal(t, tc.field, fe.Field())
		require.NoError(t, p.Stop())
	}
}
