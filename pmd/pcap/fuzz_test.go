package pcap_test

import (
	"bytes"
	"compress/gzip"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"
	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/pmd/pcap"
)

// FuzzPcapRead feeds arbitrary bytes to the reader: it must either refuse
// the header with an error or deliver packets until it stops, never panic,
// never hand out a frame longer than its room, never leak a frame.
func FuzzPcapRead(f *testing.F) {
	valid := writeCapture(f, []record{{0, frame(0, 60)}, {time.Millisecond, frame(1, 1500)}, {time.Second, frame(2, 3000)}})
	f.Add(valid)
	f.Add(valid[:24])
	f.Add(valid[:50])
	f.Add(valid[:len(valid)-1])
	big := bytes.Clone(valid)
	big[24+8] = 0xff // capture length of the first record
	f.Add(big)
	f.Add([]byte{0x4d, 0x3c, 0xb2, 0xa1, 0, 2, 0, 4}) // big-endian nanosecond magic, cut
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(valid)
	zw.Close()
	f.Add(gz.Bytes())
	f.Add(gz.Bytes()[:20])
	f.Add([]byte{})
	ng := writeNg(f, layers.LinkTypeEthernet, []record{{0, frame(0, 60)}, {time.Millisecond, frame(1, 3000)}})
	f.Add(ng)
	f.Add(ng[:len(ng)/2])
	f.Add(writeNg(f, layers.LinkTypeRaw, []record{{0, frame(0, 60)}}))
	pool, err := mbuf.New(mbuf.Options{Name: "fuzz", Frames: 64})
	require.NoError(f, err)
	room := pool.FrameSize() - pool.Headroom()
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := pcap.NewReader(pool, pcap.ReaderOptions{Source: bytes.NewReader(data), Loop: 2, Log: quiet})
		if err != nil {
			return
		}
		bufs := make([]mbuf.Handle, 8)
		for range 10000 {
			n := r.RxBurst(0, bufs)
			if n == 0 {
				break
			}
			for _, h := range bufs[:n] {
				require.LessOrEqual(t, len(pool.Data(h)), room)
			}
			l := r.Loss()
			require.True(t, l.Oversize == 0 || l.Largest > room, "oversize records are longer than a frame's room")
			pool.Free(bufs[:n])
		}
		require.NoError(t, r.Close())
		require.NoError(t, pool.CheckLeaks())
	})
}
