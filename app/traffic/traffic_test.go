package traffic

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/pmd/mem"
)

func TestParseSizes(t *testing.T) {
	for _, tc := range []struct {
		spec    string
		wantErr string
		max     int
		mean    float64
	}{
		{spec: "64", max: 64, mean: 64},
		{spec: "60-60", max: 60, mean: 60},
		{spec: "imix", max: 1514, mean: (7*60 + 4*590 + 1514) / 12.0},
		{spec: "59", wantErr: "outside [60,"},
		{spec: "64-20000", wantErr: "outside"},
		{spec: "100-64", wantErr: "MIN <= MAX"},
		{spec: "big", wantErr: "want a number"},
		{spec: "1KiB", max: 1024, mean: 1024},
		{spec: "1kB-1kb", max: 1000, mean: 1000},
		{spec: "IMIX", max: 1514, mean: (7*60 + 4*590 + 1514) / 12.0},
		{spec: "1GiB", wantErr: `"1GiB" is outside`},
	} {
		s, err := ParseSizes(tc.spec, MaxFrame)
		if tc.wantErr != "" {
			require.ErrorContains(t, err, tc.wantErr, tc.spec)
			continue
		}
		require.NoError(t, err, tc.spec)
		require.Equal(t, tc.max, s.Max(), tc.spec)
		require.InDelta(t, tc.mean, s.Mean(), 0.001, tc.spec)
	}
	r, err := ParseSizes("64-1518", MaxFrame)
	require.NoError(t, err)
	require.GreaterOrEqual(t, r.Mean(), 600.0)
	require.LessOrEqual(t, r.Max(), 1518)
}

// testFrame is a generated frame of size bytes from flow's port.
func testFrame(t testing.TB, size int, flow uint16, seq uint64, at int64) []byte {
	tmpl, err := newHeaderTemplate([6]byte{2, 0, 0, 0, 0, 1}, [6]byte{2, 0, 0, 0, 0, 2})
	require.NoError(t, err)
	frame := make([]byte, size)
	writeStamp(frame, seq, at)
	tmpl.PutUDP(frame, BaseSrcPort+flow)
	return frame
}

func TestStampRoundTrip(t *testing.T) {
	frame := testFrame(t, 128, 7, 1<<40+3, -5)
	st, ok := ReadStamp(frame)
	require.True(t, ok)
	require.Equal(t, Stamp{Flow: 7, SrcPort: BaseSrcPort + 7, Seq: 1<<40 + 3, Time: -5}, st)
	require.Zero(t, wire.IPv4HeaderChecksum(frame[ethLen:ethLen+ipv4Len]), "header checksum verifies to zero")

	_, ok = ReadStamp(frame[:MinFrame-1])
	require.False(t, ok, "short frame")
	frame[offMagic] ^= 0xff
	_, ok = ReadStamp(frame)
	require.False(t, ok, "bad magic")
}

// TestGeneratedHeadersAreWireFrames: the generator's headers are byte for
// byte what wire.EncodeUDP builds (no UDP checksum, from BenchmarkSrcIP to
// BenchmarkDstIP), for every length and source port, and decode as UDP.
func TestGeneratedHeadersAreWireFrames(t *testing.T) {
	src, dst := [6]byte{2, 0, 0, 0, 0, 1}, [6]byte{0x0a, 0xbb, 0xcc, 0xdd, 0xee, 0xff}
	tmpl, err := newHeaderTemplate(src, dst)
	require.NoError(t, err)
	want := make([]byte, MaxFrame)
	got := make([]byte, MaxFrame)
	for size := MinFrame; size <= MaxFrame; size += 7 {
		for _, port := range []uint16{1, BaseSrcPort, BaseSrcPort + 1234, 65535} {
			a := wire.Addrs{SrcMAC: src, DstMAC: dst, SrcIP: wire.BenchmarkSrcIP, DstIP: wire.BenchmarkDstIP,
				SrcPort: port, DstPort: DstPort, NoUDPChecksum: true}
			n, err := wire.EncodeUDP(want[:size], &a, size-HeaderLen)
			require.NoError(t, err)
			require.Equal(t, size, n)
			tmpl.PutUDP(got[:size], port)
			require.Equal(t, want[:HeaderLen], got[:HeaderLen], "size %d port %d", size, port)
			d, err := wire.DecodeUDP(got[:size])
			require.NoError(t, err, "size %d port %d", size, port)
			require.Equal(t, port, d.SrcPort)
			require.Len(t, d.Data, size-HeaderLen)
		}
	}
}

func FuzzReadStamp(f *testing.F) {
	f.Add(testFrame(f, MinFrame, 0, 1, 2))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		if st, ok := ReadStamp(b); ok && len(b) < MinFrame {
			t.Fatalf("accepted %d-byte frame as %+v", len(b), st)
		}
	})
}

// TestGeneratorToSinkOverMemPair runs both stages by hand on one goroutine
// with a small ring so backpressure is exercised: every frame must arrive
// once, in order, and the pool must end empty.
func TestGeneratorToSinkOverMemPair(t *testing.T) {
	pool, err := mbuf.New(mbuf.Options{Name: "traffic", Frames: 1024, CacheSize: 64, Debug: true})
	require.NoError(t, err)
	a, b, err := mem.NewPair(pool, mem.PairOptions{Name: "t", Size: 64})
	require.NoError(t, err)
	sizes, err := ParseSizes("imix", MaxFrame)
	require.NoError(t, err)
	const count = 5000
	gen, err := NewGenerator(GeneratorOptions{Port: a, Pool: pool, Burst: 48, Sizes: sizes, Flows: 3, Count: count})
	require.NoError(t, err)
	sink, err := NewSink(SinkOptions{Port: b, Pool: pool, Flows: 3, Latency: true})
	require.NoError(t, err)

	vclock := clock.NewVirtual(0)
	for polls := 0; !gen.Done() || sink.Frames() < count; polls++ {
		require.Less(t, polls, 100000, "pipeline stalled: sent %d received %d", gen.Stats().Sent, sink.Frames())
		now := vclock.Advance(1000)
		gen.Poll(now)
		// Drain only every other poll so the ring fills and TxBurst refuses.
		if polls%2 == 1 {
			sink.Poll(now)
		}
	}
	gen.Stop(vclock.Now())
	sink.Stop(vclock.Now())
	st := sink.Stats()
	require.Equal(t, uint64(count), gen.Stats().Sent)
	require.Equal(t, uint64(count), st.Received)
	require.Equal(t, uint64(count), st.InOrder)
	require.Zero(t, st.Gaps+st.Late+st.Foreign)
	lat := sink.Latency()
	require.Equal(t, uint64(count), lat.Count())
	require.NoError(t, a.Close())
	require.NoError(t, b.Close())
	require.NoError(t, pool.CheckLeaks())
}

func TestGeneratorRateLimit(t *testing.T) {
	pool, err := mbuf.New(mbuf.Options{Name: "rate", Frames: 4096})
	require.NoError(t, err)
	a, b, err := mem.NewPair(pool, mem.PairOptions{Name: "r", Size: 4096})
	require.NoError(t, err)
	gen, err := NewGenerator(GeneratorOptions{Port: a, Pool: pool, Rate: 1000})
	require.NoError(t, err)
	sink, err := NewSink(SinkOptions{Port: b, Pool: pool})
	require.NoError(t, err)
	vclock := clock.NewVirtual(0)
	// One simulated second in 100 µs steps: exactly the rate, give or take the
	// first burst of credit.
	for range 10000 {
		now := vclock.Advance(100_000)
		gen.Poll(now)
		sink.Poll(now)
	}
	sent := gen.Stats().Sent
	require.InDelta(t, 1000, float64(sent), 33, "sent %d frames in 1 s at 1000 pps", sent)
	gen.Stop(vclock.Now())
	sink.Stop(vclock.Now())
	require.NoError(t, a.Close())
	require.NoError(t, b.Close())
	require.NoError(t, pool.CheckLeaks())
}

func TestOptionErrorsNameTheField(t *testing.T) {
	pool, err := mbuf.New(mbuf.Options{Name: "opts", Frames: 256})
	require.NoError(t, err)
	a, b, err := mem.NewPair(pool, mem.PairOptions{Name: "o"})
	require.NoError(t, err)
	defer a.Close()
	defer b.Close()
	_, err = NewGenerator(GeneratorOptions{Port: a})
	require.ErrorContains(t, err, "generator needs Port and Pool")
	_, err = NewSink(SinkOptions{Port: b, Pool: pool, Burst: 300})
	require.ErrorContains(t, err, "burst 300 out of range")
	_, err = NewGenerator(GeneratorOptions{Port: a, Pool: pool, Flows: 70000})
	require.ErrorContains(t, err, "flows 70000 out of range")
	_, err = NewSink(SinkOptions{Port: b, Pool: pool, Queue: 2})
	require.ErrorContains(t, err, "queue 2 out of range: port mem:o/1 has 1 queues")
	_, err = NewGenerator(GeneratorOptions{Port: a, Pool: pool, Rate: -1})
	require.ErrorContains(t, err, "rate -1")
	_, err = NewGenerator(GeneratorOptions{Port: a, Pool: pool, Sizes: FixedSize(3000)})
	require.ErrorContains(t, err, "exceeds the pool's room")
}
