package pcap_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/pmd"
	"github.com/peregrine-net/peregrine/pmd/mem"
	"github.com/peregrine-net/peregrine/pmd/pcap"
)

// writeNg writes records as a pcapng capture (nanosecond resolution).
func writeNg(t testing.TB, link layers.LinkType, recs []record) []byte {
	var buf bytes.Buffer
	w, err := pcapgo.NewNgWriterInterface(&buf, pcapgo.NgInterface{LinkType: link, SnapLength: 65535, TimestampResolution: 9}, pcapgo.DefaultNgWriterOptions)
	require.NoError(t, err)
	for _, r := range recs {
		ci := gopacket.CaptureInfo{Timestamp: epoch.Add(r.at), CaptureLength: len(r.data), Length: len(r.data)}
		require.NoError(t, w.WritePacket(ci, r.data))
	}
	require.NoError(t, w.Flush())
	return buf.Bytes()
}

// A record larger than a frame's room, and a file damaged part-way, are
// reported by Loss, which the commands turn into failed checks.
func TestReaderLoss(t *testing.T) {
	pool := newPool(t, 64) // frame room 1792
	recs := []record{{0, frame(0, 60)}, {0, frame(1, 9000)}, {0, frame(2, 3000)}, {0, frame(3, 100)}}
	content := writeCapture(t, recs)
	r, err := pcap.NewReader(pool, pcap.ReaderOptions{Source: bytes.NewReader(content), Log: quiet})
	require.NoError(t, err)
	frames, _ := drain(t, pool, r)
	require.Len(t, frames, 2)
	require.Equal(t, pcap.Loss{Oversize: 2, Largest: 9000, Room: pool.FrameSize() - pool.Headroom()}, r.Loss())
	require.NoError(t, r.Close())

	r, err = pcap.NewReader(pool, pcap.ReaderOptions{Source: bytes.NewReader(content[:24+16+60+16+100]), Log: quiet})
	require.NoError(t, err)
	drain(t, pool, r)
	require.Contains(t, r.Loss().Damaged, "damaged after 1 records")
	require.NoError(t, r.Close())
	require.NoError(t, pool.CheckLeaks())
}

// pcap: ports read pcapng as decode does, and Linux cooked or raw IP
// captures as Ethernet; link types they do not know are refused rather
// than replayed as Ethernet.
func TestReaderPcapng(t *testing.T) {
	pool := newPool(t, 64)
	recs := []record{{0, frame(0, 60)}, {time.Millisecond, frame(1, 1500)}}
	path := filepath.Join(t.TempDir(), "in.pcapng")
	require.NoError(t, os.WriteFile(path, writeNg(t, layers.LinkTypeEthernet, recs), 0o644))
	p, err := pmd.Open(&pmd.Env{Pool: pool}, "pcap:"+path)
	require.NoError(t, err)
	frames, _ := drain(t, pool, p)
	require.Equal(t, [][]byte{recs[0].data, recs[1].data}, frames)
	require.NoError(t, p.Close())

	// A Linux cooked capture (tcpdump -i any) replays as Ethernet frames;
	// a record too short for its header is counted and skipped.
	sll := make([]byte, 16, 16+100)
	sll[15] = 0x08 // protocol 0x0008: not IP, carried as EtherType as given
	r, err := pcap.NewReader(pool, pcap.ReaderOptions{Source: bytes.NewReader(writeNg(t, layers.LinkTypeLinuxSLL,
		[]record{{0, append(sll, frame(0, 100)...)}, {0, sll[:3]}}))})
	require.NoError(t, err)
	frames, _ = drain(t, pool, r)
	require.Len(t, frames, 1)
	require.Equal(t, frame(0, 100), frames[0][14:])
	require.Equal(t, uint64(1), r.Loss().Malformed)
	require.NoError(t, r.Close())

	_, err = pcap.NewReader(pool, pcap.ReaderOptions{Source: bytes.NewReader(writeNg(t, layers.LinkTypeIEEE802_11, recs))})
	require.ErrorContains(t, err, "is not one this reads")
	require.NoError(t, pool.CheckLeaks())
}

// pcap → pcap-out keeps the input's timestamps, whatever the clock says.
func TestTimestampsKept(t *testing.T) {
	pool := newPool(t, 64)
	recs := []record{{0, frame(0, 60)}, {1500 * time.Microsecond, frame(1, 80)}, {time.Hour, frame(2, 90)}}
	clk := clock.NewVirtual(0)
	in, err := pcap.NewReader(pool, pcap.ReaderOptions{Source: bytes.NewReader(writeCapture(t, recs)), Clock: clk})
	require.NoError(t, err)
	var out bytes.Buffer
	w, err := pcap.NewWriter(pool, pcap.WriterOptions{Dest: &out, Clock: clk, Epoch: time.Unix(5, 0)})
	require.NoError(t, err)
	bufs := make([]mbuf.Handle, 8)
	n := in.RxBurst(0, bufs)
	require.Equal(t, 3, n)
	// A frame the reader did not fill is stamped by the writer's clock.
	gen := make([]mbuf.Handle, 1)
	require.Equal(t, 1, pool.AllocBulk(gen))
	copy(pool.Append(gen[0], 60), frame(9, 60))
	require.Equal(t, 4, w.TxBurst(0, append(bufs[:n], gen[0])))
	require.NoError(t, w.Close())
	require.NoError(t, in.Close())

	r, err := pcapgo.NewReader(&out)
	require.NoError(t, err)
	var got []time.Time
	for {
		_, ci, err := r.ReadPacketData()
		if err != nil {
			break
		}
		got = append(got, ci.Timestamp)
	}
	require.Len(t, got, 4)
	for i, rec := range recs {
		require.True(t, epoch.Add(rec.at).Equal(got[i]), "record %d: %v, want %v", i, got[i], epoch.Add(rec.at))
	}
	require.True(t, time.Unix(5, 0).Equal(got[3]), "a generated frame: %v", got[3])
	require.NoError(t, pool.CheckLeaks())
}

// max= bounds a capture's size; what did not fit is counted, and the
// report names the file and its frame count.
func TestWriterMax(t *testing.T) {
	pool := newPool(t, 64)
	path := filepath.Join(t.TempDir(), "out.pcap")
	p, err := pmd.Open(&pmd.Env{Pool: pool}, "pcap-out:"+path+"?snaplen=100&max=300")
	require.NoError(t, err)
	for i := range 5 {
		require.Equal(t, 1, send(t, pool, p, frame(i, 1000)))
	}
	require.NoError(t, p.Close())
	rep := p.(*pcap.Writer).Report()
	// 24 B header + 2 records of 16+100 B = 256; a third would be 372.
	require.Equal(t, pcap.Report{File: path, Frames: 2, Bytes: 256, OverMax: 3, Max: 300}, rep)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, int64(256), fi.Size())

	_, err = pmd.Open(&pmd.Env{Pool: pool}, "pcap-out:"+path+"?max=10")
	require.ErrorIs(t, err, pmd.ErrBadParam)
	require.NoError(t, pool.CheckLeaks())
}

// A capture that cannot be written (a full disk) is in the report, not
// only in a counter.
func TestWriterFullDisk(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full on this machine")
	}
	pool := newPool(t, 64)
	p, err := pmd.Open(&pmd.Env{Pool: pool}, "pcap-out:/dev/full")
	require.NoError(t, err)
	send(t, pool, p, frame(0, 60))
	require.Error(t, p.Close())
	require.ErrorContains(t, p.(*pcap.Writer).Report().Err, "no space left")
}

// capture=FILE&snaplen=N&max=SIZE: the capture's parameters are taken out
// of the spec the driver sees, and the mirror honours them.
func TestMirrorSnaplenMax(t *testing.T) {
	rest, c, err := pcap.SplitCapture("afxdp:veth0?queue=1&capture=v.pcap&snaplen=128&max=1GiB")
	require.NoError(t, err)
	require.Equal(t, "afxdp:veth0?queue=1", rest)
	require.Equal(t, pcap.Capture{File: "v.pcap", Snaplen: 128, Max: 1 << 30}, c)
	rest, c, err = pcap.SplitCapture("pcap-out:x.pcap?snaplen=64")
	require.NoError(t, err)
	require.Equal(t, "pcap-out:x.pcap?snaplen=64", rest, "without capture=, snaplen is the driver's")
	require.Empty(t, c.File)
	_, _, err = pcap.SplitCapture("mem:a/0?capture=v.pcap&max=big")
	require.ErrorIs(t, err, pmd.ErrBadParam)

	pool := newPool(t, 64)
	a, b, err := mem.NewPair(pool, mem.PairOptions{Name: "m"})
	require.NoError(t, err)
	defer b.Close()
	var out bytes.Buffer
	m, err := pcap.NewMirror(a, pool, pcap.MirrorOptions{Dest: &out, Snaplen: 128, Max: 24 + 2*(16+128)})
	require.NoError(t, err)
	for i := range 3 {
		require.Equal(t, 1, send(t, pool, m, frame(i, 1000)))
	}
	drain(t, pool, b)
	require.NoError(t, m.Close())
	require.Equal(t, pcap.Report{Frames: 2, Bytes: 24 + 2*(16+128), OverMax: 1, Max: 24 + 2*(16+128)}, m.Report())
	require.Equal(t, 24+2*(16+128), out.Len())
	require.NoError(t, pool.CheckLeaks())
}
