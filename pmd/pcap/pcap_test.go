package pcap_test

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/internal/tools/toolstest"
	"github.com/peregrine-net/peregrine/pmd"
	"github.com/peregrine-net/peregrine/pmd/mem"
	"github.com/peregrine-net/peregrine/pmd/pcap"
	"github.com/peregrine-net/peregrine/pmd/pmdtest"
)

var epoch = time.Unix(1_700_000_000, 0)

// quiet discards the warnings damaged captures are expected to cause.
var quiet = slog.New(slog.DiscardHandler)

func newPool(t testing.TB, frames int) *mbuf.Pool {
	t.Helper()
	pool, err := mbuf.New(mbuf.Options{Name: t.Name(), Frames: frames, Debug: true})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, pool.Close()) })
	return pool
}

// frame returns a recognisable Ethernet frame of size bytes.
func frame(seq, size int) []byte {
	b := make([]byte, size)
	copy(b, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0, 0, 0, 0, 1, 0x88, 0xb5})
	binary.BigEndian.PutUint32(b[14:], uint32(seq))
	for i := 18; i < size; i++ {
		b[i] = byte(seq*13 + i)
	}
	return b
}

type record struct {
	at   time.Duration // after epoch
	data []byte
}

// writeCapture writes records with pcapgo directly (microsecond format, as
// tcpdump does) and returns the file's bytes.
func writeCapture(t testing.TB, recs []record) []byte {
	var buf bytes.Buffer
	w := pcapgo.NewWriter(&buf)
	require.NoError(t, w.WriteFileHeader(65535, layers.LinkTypeEthernet))
	for _, r := range recs {
		ci := gopacket.CaptureInfo{Timestamp: epoch.Add(r.at), CaptureLength: len(r.data), Length: len(r.data)}
		require.NoError(t, w.WritePacket(ci, r.data))
	}
	return buf.Bytes()
}

func writeFile(t testing.TB, content []byte) string {
	path := filepath.Join(t.TempDir(), "in.pcap")
	require.NoError(t, os.WriteFile(path, content, 0o644))
	return path
}

// drain receives until RxBurst returns 0 and returns copies of the frames
// and their RxTime.
func drain(t testing.TB, pool *mbuf.Pool, p port.Port) (frames [][]byte, times []int64) {
	bufs := make([]mbuf.Handle, 16)
	for {
		n := p.RxBurst(0, bufs)
		if n == 0 {
			return frames, times
		}
		for _, h := range bufs[:n] {
			frames = append(frames, bytes.Clone(pool.Data(h)))
			times = append(times, pool.Meta(h).RxTime)
		}
		pool.Free(bufs[:n])
	}
}

// send allocates frames holding data and transmits them all.
func send(t testing.TB, pool *mbuf.Pool, p port.Port, data ...[]byte) int {
	hs := make([]mbuf.Handle, len(data))
	require.Equal(t, len(hs), pool.AllocBulk(hs))
	for i, h := range hs {
		copy(pool.Append(h, len(data[i])), data[i])
	}
	n := p.TxBurst(0, hs)
	pool.Free(hs[n:])
	return n
}

// TestRoundTrip writes frames through a pcap-out port and reads them back
// through a pcap port: byte-exact, with ordered nanosecond timestamps.
func TestRoundTrip(t *testing.T) {
	pool := newPool(t, 256)
	virtual := clock.NewVirtual(0)
	env := &pmd.Env{Pool: pool, Clock: virtual}
	path := filepath.Join(t.TempDir(), "out.pcap")
	out, err := pmd.Open(env, "pcap-out:"+path)
	require.NoError(t, err)
	require.Equal(t, "pcap-out", out.Info().Driver)

	const n = 200
	var sent [][]byte
	for i := 0; i < n; i += 10 {
		var burst [][]byte
		for j := i; j < i+10; j++ {
			burst = append(burst, frame(j, 60+j*7%1700))
		}
		require.Equal(t, 10, send(t, pool, out, burst...))
		sent = append(sent, burst...)
		virtual.Advance(1500 * time.Nanosecond)
	}
	st := out.Stats()
	require.Equal(t, uint64(n), st.TxPackets)
	require.Zero(t, st.Errors)
	require.NoError(t, out.Close())
	require.NoError(t, out.Close(), "idempotent")
	require.Zero(t, pool.InUse(), "pcap-out frees what it writes")

	// Timestamps: nanosecond resolution, non-decreasing, one clock step per burst.
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	require.NoError(t, err)
	require.Equal(t, gopacket.TimestampResolutionNanosecond, r.Resolution())
	require.Equal(t, layers.LinkTypeEthernet, r.LinkType())
	var last time.Time
	for i := range n {
		data, ci, err := r.ReadPacketData()
		require.NoError(t, err)
		require.Equal(t, sent[i], data)
		require.False(t, ci.Timestamp.Before(last), "timestamps ordered")
		last = ci.Timestamp
		if i >= 10 {
			require.Equal(t, 1500*time.Nanosecond*time.Duration(i/10), ci.Timestamp.Sub(firstStamp(t, path)))
		}
	}
	_, _, err = r.ReadPacketData()
	require.ErrorIs(t, err, io.EOF)

	in, err := pmd.Open(env, "pcap:"+path)
	require.NoError(t, err)
	got, _ := drain(t, pool, in)
	require.Equal(t, sent, got)
	require.Zero(t, in.RxBurst(0, make([]mbuf.Handle, 4)), "0 forever after EOF")
	require.Equal(t, uint64(n), in.Stats().RxPackets)
	require.NoError(t, in.Close())
	require.NoError(t, pool.CheckLeaks())
}

func firstStamp(t testing.TB, path string) time.Time {
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	require.NoError(t, err)
	_, ci, err := r.ReadPacketData()
	require.NoError(t, err)
	return ci.Timestamp
}

func TestWriterEpoch(t *testing.T) {
	pool := newPool(t, 64)
	var buf bytes.Buffer
	virtual := clock.NewVirtual(42 * clock.Time(time.Second))
	w, err := pcap.NewWriter(pool, pcap.WriterOptions{Dest: &buf, Clock: virtual, Epoch: epoch, Snaplen: 100, LinkType: layers.LinkTypeRaw})
	require.NoError(t, err)
	virtual.Advance(time.Millisecond)
	require.Equal(t, 2, send(t, pool, w, frame(1, 60), frame(2, 300)))
	require.NoError(t, w.Close())
	r, err := pcapgo.NewReader(&buf)
	require.NoError(t, err)
	require.Equal(t, layers.LinkTypeRaw, r.LinkType())
	require.Equal(t, uint32(100), r.Snaplen())
	data, ci, err := r.ReadPacketData()
	require.NoError(t, err)
	require.Equal(t, frame(1, 60), data)
	require.Equal(t, epoch.Add(time.Millisecond), ci.Timestamp.Local())
	data, ci, err = r.ReadPacketData()
	require.NoError(t, err)
	require.Equal(t, frame(2, 300)[:100], data, "cut to snaplen")
	require.Equal(t, 300, ci.Length)
}

func TestRecordedTiming(t *testing.T) {
	pool := newPool(t, 64)
	recs := []record{
		{0, frame(0, 60)},
		{time.Millisecond, frame(1, 61)},
		{3 * time.Millisecond, frame(2, 62)},
	}
	path := writeFile(t, writeCapture(t, recs))
	virtual := clock.NewVirtual(clock.Time(time.Second))
	env := &pmd.Env{Pool: pool, Clock: virtual}
	p, err := pmd.Open(env, "pcap:"+path+"?timing=recorded&loop=2")
	require.NoError(t, err)
	require.NotZero(t, p.Info().Caps&port.CapPaced)
	require.NotZero(t, p.Info().Caps&port.CapRxTimestamp)
	start := virtual.Now()

	type step struct {
		advance time.Duration
		seqs    []int
	}
	var gotTimes []int64
	for i, s := range []step{
		{0, []int{0}},
		{999 * time.Microsecond, nil},
		{time.Microsecond, []int{1}},
		{1500 * time.Microsecond, nil},
		{500 * time.Microsecond, []int{2, 0}}, // pass 2 starts where pass 1 ended
		{time.Millisecond, []int{1}},
		{10 * time.Millisecond, []int{2}},
		{time.Hour, nil},
	} {
		virtual.Advance(s.advance)
		frames, times := drain(t, pool, p)
		var seqs []int
		for _, f := range frames {
			seqs = append(seqs, int(binary.BigEndian.Uint32(f[14:])))
		}
		require.Equal(t, s.seqs, seqs, "step %d", i)
		gotTimes = append(gotTimes, times...)
	}
	ms := int64(time.Millisecond)
	base := int64(start)
	require.Equal(t, []int64{base, base + ms, base + 3*ms, base + 3*ms, base + 4*ms, base + 6*ms}, gotTimes,
		"RxTime is the scheduled release time")
	require.NoError(t, p.Close())
	require.NoError(t, pool.CheckLeaks())
}

// Each timing's send schedule, on the virtual clock: speed=N divides the
// capture's gaps (a new pass starts where the last ended); rate=R spaces
// packets 1/R apart, or by their bits at a bit rate, and runs on across
// passes. Every packet is released at its due time, never before, and
// carries it as RxTime.
func TestTimingSchedules(t *testing.T) {
	ms := time.Millisecond
	recs := []record{{0, frame(0, 100)}, {4 * ms, frame(1, 200)}, {10 * ms, frame(2, 50)}}
	path := writeFile(t, writeCapture(t, recs))
	for _, tc := range []struct {
		params string
		due    []time.Duration // after the first RxBurst, two passes
	}{
		{"timing=original", []time.Duration{0, 4 * ms, 10 * ms, 10 * ms, 14 * ms, 20 * ms}},
		{"timing=speed=2", []time.Duration{0, 2 * ms, 5 * ms, 5 * ms, 7 * ms, 10 * ms}},
		{"timing=speed=0.5", []time.Duration{0, 8 * ms, 20 * ms, 20 * ms, 28 * ms, 40 * ms}},
		{"timing=rate&rate=1000", []time.Duration{0, ms, 2 * ms, 3 * ms, 4 * ms, 5 * ms}},
		// 8 Mbit/s: 1 µs a byte, each packet's bytes after the one before.
		{"timing=rate&rate=8mbit", []time.Duration{0, 100 * time.Microsecond, 300 * time.Microsecond, 350 * time.Microsecond,
			450 * time.Microsecond, 650 * time.Microsecond}},
	} {
		t.Run(tc.params, func(t *testing.T) {
			pool := newPool(t, 64)
			virtual := clock.NewVirtual(clock.Time(time.Second))
			p, err := pmd.Open(&pmd.Env{Pool: pool, Clock: virtual}, "pcap:"+path+"?"+tc.params+"&loop=2")
			require.NoError(t, err)
			require.NotZero(t, p.Info().Caps&port.CapPaced)
			start := virtual.Now()
			var got []time.Duration
			for i, due := range tc.due {
				if i > 0 && due == tc.due[i-1] {
					continue // released with the one before
				}
				// Just before its time nothing more is released; at it,
				// the packet is.
				if at := start + clock.Time(due); at > virtual.Now() {
					require.NoError(t, virtual.Set(at-1))
					frames, _ := drain(t, pool, p)
					require.Empty(t, frames, "released before %v", due)
					require.NoError(t, virtual.Set(at))
				}
				frames, times := drain(t, pool, p)
				require.NotEmpty(t, frames, "nothing released at %v", due)
				for _, at := range times {
					got = append(got, time.Duration(at-int64(start)))
				}
			}
			require.Equal(t, tc.due, got)
			virtual.Advance(time.Hour)
			frames, _ := drain(t, pool, p)
			require.Empty(t, frames, "two passes only")
			require.True(t, p.(*pcap.Reader).Ended())
			require.NoError(t, p.Close())
			require.NoError(t, pool.CheckLeaks())
		})
	}
}

func TestLoop(t *testing.T) {
	pool := newPool(t, 64)
	path := writeFile(t, writeCapture(t, []record{{0, frame(0, 60)}, {time.Second, frame(1, 70)}}))
	env := &pmd.Env{Pool: pool, Clock: clock.NewVirtual(0)}
	p, err := pmd.Open(env, "pcap:"+path+"?loop=3")
	require.NoError(t, err)
	require.False(t, p.(*pcap.Reader).Ended(), "nothing read yet")
	frames, times := drain(t, pool, p)
	require.Len(t, frames, 6)
	require.True(t, p.(*pcap.Reader).Ended(), "three passes read")
	for _, ts := range times {
		require.Zero(t, ts, "fast timing stamps the clock reading")
	}
	require.NoError(t, p.Close())

	p, err = pmd.Open(env, "pcap:"+path+"?loop=0")
	require.NoError(t, err)
	bufs := make([]mbuf.Handle, 7)
	for range 100 {
		require.Equal(t, 7, p.RxBurst(0, bufs), "loop=0 replays forever")
		pool.Free(bufs)
	}
	require.False(t, p.(*pcap.Reader).Ended())
	require.NoError(t, p.Close())

	empty := writeFile(t, writeCapture(t, nil))
	p, err = pmd.Open(env, "pcap:"+empty+"?loop=0")
	require.NoError(t, err)
	require.Zero(t, p.RxBurst(0, bufs), "an empty capture ends even when looping forever")
	require.NoError(t, p.Close())
	require.NoError(t, pool.CheckLeaks())
}

func TestDamagedInput(t *testing.T) {
	pool := newPool(t, 64) // frame room 1792
	recs := []record{{0, frame(0, 60)}, {0, frame(1, 3000)}, {0, frame(2, 1792)}, {0, frame(3, 1793)}, {0, frame(4, 100)}}
	content := writeCapture(t, recs)
	env := &pmd.Env{Pool: pool}

	p, err := pmd.Open(env, "pcap:"+writeFile(t, content))
	require.NoError(t, err)
	frames, _ := drain(t, pool, p)
	require.Equal(t, [][]byte{recs[0].data, recs[2].data, recs[4].data}, frames)
	st := p.Stats()
	require.Equal(t, uint64(2), st.RxDropped, "frames larger than a frame's room")
	require.Zero(t, st.Errors)
	require.NoError(t, p.Close())

	// Truncated in the middle of the third record.
	p, err = pcap.NewReader(pool, pcap.ReaderOptions{Source: bytes.NewReader(content[:24+16+60+16+3000+16+10]), Log: quiet})
	require.NoError(t, err)
	frames, _ = drain(t, pool, p)
	require.Equal(t, [][]byte{recs[0].data}, frames)
	require.Equal(t, uint64(1), p.Stats().Errors)
	require.NoError(t, p.Close())

	_, err = pmd.Open(env, "pcap:"+writeFile(t, []byte("this is not a capture file at all")))
	require.ErrorContains(t, err, "neither a pcap nor a pcapng capture")
	_, err = pmd.Open(env, "pcap:"+filepath.Join(t.TempDir(), "missing.pcap"))
	require.ErrorIs(t, err, os.ErrNotExist)

	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(content)
	zw.Close()
	p, err = pcap.NewReader(pool, pcap.ReaderOptions{Source: bytes.NewReader(gz.Bytes()), Loop: 2})
	require.NoError(t, err)
	frames, _ = drain(t, pool, p)
	require.Len(t, frames, 6, "gzip input, replayed twice")
	require.NoError(t, p.Close())
	require.NoError(t, pool.CheckLeaks())
}

func TestRxNoBuf(t *testing.T) {
	pool := newPool(t, 64)
	var recs []record
	for i := range 100 {
		recs = append(recs, record{0, frame(i, 60)})
	}
	p, err := pcap.NewReader(pool, pcap.ReaderOptions{Source: bytes.NewReader(writeCapture(t, recs))})
	require.NoError(t, err)
	held := make([]mbuf.Handle, 0, 64)
	bufs := make([]mbuf.Handle, 16)
	for range 10 {
		n := p.RxBurst(0, bufs)
		held = append(held, bufs[:n]...)
	}
	require.Len(t, held, 64)
	require.Positive(t, p.Stats().RxNoBuf)
	pool.Free(held)
	frames, _ := drain(t, pool, p)
	require.Len(t, frames, 36, "no packet lost to the empty pool")
	require.Equal(t, frame(64, 60), frames[0])
	require.NoError(t, p.Close())
	require.NoError(t, pool.CheckLeaks())
}

func TestSpecErrors(t *testing.T) {
	pool := newPool(t, 64)
	env := &pmd.Env{Pool: pool}
	for _, tc := range []struct{ spec, want string }{
		{"pcap:", "no file named"},
		{"pcap-out:", "no file named"},
		{"pcap:x.pcap?timing=slow", `timing="slow": use fast, original (the capture's own timing), speed=N (its gaps divided by N) or rate`},
		{"pcap:x.pcap?timing=speed=0", `timing="speed=0": the speed factor is a number from 0.001 to 1000`},
		{"pcap:x.pcap?timing=speed=x", `timing="speed=x"`},
		{"pcap:x.pcap?timing=rate", "timing=rate needs rate=R beside it"},
		{"pcap:x.pcap?timing=rate&rate=0", `rate="0": give frames per second`},
		{"pcap:x.pcap?rate=1mpps", "rate=1mpps paces timing=rate only (timing is fast)"},
		{"pcap:x.pcap?loop=-1", "loop=-1 is out of range"},
		{"pcap:x.pcap?snaplen=10", `unknown parameter "snaplen" in "pcap:x.pcap?snaplen=10" (valid parameters: timing, rate, loop)`},
		{"pcap-out:x.pcap?snaplen=0", "snaplen=0 is out of range (use 1..262144)"},
		{"pcap-out:x.pcap?linktype=token-ring", `link type "token-ring" is not known`},
		{"pcap-out:x.pcap?timing=fast", `unknown parameter "timing"`},
	} {
		_, err := pmd.Open(env, tc.spec)
		require.ErrorContains(t, err, tc.want, tc.spec)
	}
	_, err := pcap.NewReader(pool, pcap.ReaderOptions{Path: "x", Timing: 7})
	require.ErrorContains(t, err, "Timing 7 is not valid")
	_, err = pcap.NewReader(pool, pcap.ReaderOptions{Path: "x", Loop: -5})
	require.ErrorContains(t, err, "Loop -5 is not valid")
	_, err = pcap.NewWriter(pool, pcap.WriterOptions{Dest: io.Discard, Snaplen: -1})
	require.ErrorContains(t, err, "WriterOptions.Snaplen -1 is out of range")
	for s, want := range map[string]layers.LinkType{"ethernet": 1, "raw": 101, "linux_sll": 113, "147": 147} {
		lt, err := pcap.ParseLinkType(s)
		require.NoError(t, err)
		require.Equal(t, want, lt)
	}
}

func TestConformanceReader(t *testing.T) {
	pool := newPool(t, 1024)
	var recs []record
	for i := range 50 {
		recs = append(recs, record{time.Duration(i) * time.Microsecond, frame(i, 60+i)})
	}
	path := writeFile(t, writeCapture(t, recs))
	env := &pmd.Env{Pool: pool}
	pmdtest.RunBasic(t, pmdtest.BasicHarness{
		Pool: pool,
		Open: func(t *testing.T) port.Port {
			p, err := pmd.Open(env, "pcap:"+path)
			require.NoError(t, err)
			return p
		},
	})
}

func TestConformanceWriter(t *testing.T) {
	pool := newPool(t, 1024)
	env := &pmd.Env{Pool: pool}
	pmdtest.RunBasic(t, pmdtest.BasicHarness{
		Pool: pool,
		Open: func(t *testing.T) port.Port {
			p, err := pmd.Open(env, "pcap-out:"+filepath.Join(t.TempDir(), "out.pcap"))
			require.NoError(t, err)
			return p
		},
	})
}

// TestTshark checks that Wireshark's reader accepts what pcap-out and
// Mirror write.
func TestTshark(t *testing.T) {
	tshark := toolstest.Path(t, "tshark")
	pool := newPool(t, 256)
	path := filepath.Join(t.TempDir(), "out.pcap")
	w, err := pcap.NewWriter(pool, pcap.WriterOptions{Path: path})
	require.NoError(t, err)
	var sizes []string
	for i := range 20 {
		size := 60 + i*50
		require.Equal(t, 1, send(t, pool, w, frame(i, size)))
		sizes = append(sizes, strconv.Itoa(size))
	}
	require.NoError(t, w.Close())
	cmd := exec.Command(tshark, "-r", path, "-T", "fields", "-e", "frame.len", "-e", "eth.type")
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir()) // tshark wants a writable profile dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "tshark -r: %s", stderr.String())
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.Len(t, lines, 20, "tshark output: %s", out)
	for i, line := range lines {
		fields := strings.Fields(line)
		require.Equal(t, []string{sizes[i], "0x88b5"}, fields, "line %d", i)
	}
}

// TestMirror wraps one end of a mem pair: the capture holds exactly the
// frames the end received and the ones its TxBurst accepted.
func TestMirror(t *testing.T) {
	pool := newPool(t, 256)
	a, b, err := mem.NewPair(pool, mem.PairOptions{Size: 8})
	require.NoError(t, err)
	var capture bytes.Buffer
	m, err := pcap.NewMirror(a, pool, pcap.MirrorOptions{Dest: &capture, Clock: clock.NewVirtual(0), Epoch: epoch})
	require.NoError(t, err)
	require.Equal(t, a.Info(), m.Info())

	var txFrames [][]byte
	for i := range 12 {
		txFrames = append(txFrames, frame(i, 60+i))
	}
	require.Equal(t, 8, send(t, pool, m, txFrames...), "ring of 8: 4 refused")
	rxFrames := [][]byte{frame(100, 200), frame(101, 201)}
	require.Equal(t, 2, send(t, pool, b, rxFrames...))
	got, _ := drain(t, pool, m)
	require.Equal(t, rxFrames, got)
	got, _ = drain(t, pool, b)
	require.Equal(t, txFrames[:8], got)
	require.NoError(t, m.Flush())
	require.NoError(t, m.Close())
	require.NoError(t, m.Close())
	require.NoError(t, b.Close())
	require.NoError(t, pool.CheckLeaks())

	r, err := pcapgo.NewReader(&capture)
	require.NoError(t, err)
	var recorded [][]byte
	for {
		data, _, err := r.ReadPacketData()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		recorded = append(recorded, data)
	}
	require.Equal(t, append(txFrames[:8:8], rxFrames...), recorded)
}

// TestConformanceMirror runs the full suite through a Mirror on either
// side of a mem pair: wrapping must not change behaviour.
func TestConformanceMirror(t *testing.T) {
	pool := newPool(t, 8192)
	for _, side := range []string{"tx", "rx"} {
		t.Run(side, func(t *testing.T) {
			pmdtest.Run(t, pmdtest.Harness{
				Pool: pool,
				Open: func(t *testing.T) (port.Port, port.Port) {
					a, b, err := mem.NewPair(pool, mem.PairOptions{Queues: 2, Size: 512})
					require.NoError(t, err)
					path := filepath.Join(t.TempDir(), "mirror.pcap")
					if side == "tx" {
						m, err := pcap.NewMirror(a, pool, pcap.MirrorOptions{Path: path})
						require.NoError(t, err)
						return m, b
					}
					m, err := pcap.NewMirror(b, pool, pcap.MirrorOptions{Path: path})
					require.NoError(t, err)
					return a, m
				},
				MaxFrame:         pool.FrameSize() - pool.Headroom(),
				ConcurrentFrames: 5000,
			})
		})
	}
}

func TestZeroAllocs(t *testing.T) {
	pool := newPool(t, 1024)
	var recs []record
	for i := range 8000 {
		recs = append(recs, record{0, frame(i, 60+i%1000)})
	}
	r, err := pcap.NewReader(pool, pcap.ReaderOptions{Source: bytes.NewReader(writeCapture(t, recs))})
	require.NoError(t, err)
	w, err := pcap.NewWriter(pool, pcap.WriterOptions{Dest: io.Discard})
	require.NoError(t, err)
	a, b, err := mem.NewPair(pool, mem.PairOptions{})
	require.NoError(t, err)
	m, err := pcap.NewMirror(a, pool, pcap.MirrorOptions{Dest: io.Discard})
	require.NoError(t, err)
	bufs := make([]mbuf.Handle, 32)
	allocs := testing.AllocsPerRun(100, func() {
		n := r.RxBurst(0, bufs)
		if n != len(bufs) {
			panic("capture ran out")
		}
		sent := m.TxBurst(0, bufs[:n])
		got := b.RxBurst(0, bufs[:sent])
		w.TxBurst(0, bufs[:got])
	})
	require.Zero(t, allocs, "reader RxBurst, mirror TxBurst, writer TxBurst")
	for _, p := range []port.Port{r, w, m, b} {
		require.NoError(t, p.Close())
	}
	require.NoError(t, pool.CheckLeaks())
}

func BenchmarkWriter(b *testing.B) {
	for _, burst := range []int{1, 32, 64} {
		b.Run(fmt.Sprintf("burst=%d", burst), func(b *testing.B) {
			pool := newPool(b, 1024)
			w, err := pcap.NewWriter(pool, pcap.WriterOptions{Dest: io.Discard})
			require.NoError(b, err)
			defer w.Close()
			hs := make([]mbuf.Handle, burst)
			b.ReportAllocs()
			for b.Loop() {
				pool.AllocBulk(hs)
				for _, h := range hs {
					pool.SetLen(h, 64)
				}
				w.TxBurst(0, hs)
			}
			pkts := float64(b.N) * float64(burst)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/pkts, "ns/pkt")
			b.ReportMetric(pkts/b.Elapsed().Seconds(), "pkts/s")
		})
	}
}

func BenchmarkReader(b *testing.B) {
	var recs []record
	for i := range 4096 {
		recs = append(recs, record{0, frame(i, 64)})
	}
	content := writeCapture(b, recs)
	for _, burst := range []int{1, 32, 64} {
		b.Run(fmt.Sprintf("burst=%d", burst), func(b *testing.B) {
			pool := newPool(b, 1024)
			r, err := pcap.NewReader(pool, pcap.ReaderOptions{Source: bytes.NewReader(content), Loop: pcap.Forever})
			require.NoError(b, err)
			defer r.Close()
			hs := make([]mbuf.Handle, burst)
			b.ReportAllocs()
			var pkts float64
			for b.Loop() {
				n := r.RxBurst(0, hs)
				pool.Free(hs[:n])
				pkts += float64(n)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/pkts, "ns/pkt")
			b.ReportMetric(pkts/b.Elapsed().Seconds(), "pkts/s")
		})
	}
}
