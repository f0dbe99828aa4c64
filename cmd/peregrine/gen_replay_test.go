package main

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
)

// gen --replay sends a pcapng capture at its gaps sped up (speed=N) or at
// a rate, --loop times, into a pcap-out: port: every frame of every pass
// arrives, and the summary names the replay's spec.
func TestGenReplayTimingsAndLoops(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.pcapng")
	var buf bytes.Buffer
	w, err := pcapgo.NewNgWriter(&buf, layers.LinkTypeEthernet)
	require.NoError(t, err)
	start := time.Unix(1_700_000_000, 0)
	for i := range 5 {
		frame := make([]byte, 64)
		copy(frame, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 1, 0x88, 0xb5, byte(i)})
		ci := gopacket.CaptureInfo{Timestamp: start.Add(time.Duration(i) * 100 * time.Millisecond), CaptureLength: 64, Length: 64}
		require.NoError(t, w.WritePacket(ci, frame))
	}
	require.NoError(t, w.Flush())
	require.NoError(t, os.WriteFile(in, buf.Bytes(), 0o644))

	for _, tc := range []struct {
		timing []string
		spec   string
	}{
		// 400 ms of gaps a pass at speed 100: 4 ms.
		{[]string{"--timing", "speed=100"}, "?loop=3&timing=speed=100"},
		{[]string{"--timing", "rate", "--rate", "10kpps"}, "?loop=3&rate=10kpps&timing=rate"},
	} {
		out := filepath.Join(dir, "out.pcap")
		args := append([]string{"gen", "--port", "pcap-out:" + out, "--replay", in, "--loop", "3", "--stats-period", "1h", "--duration", "30s"}, tc.timing...)
		text, code := runCLI(t, args...)
		require.Equal(t, 0, code, text)
		require.Contains(t, text, "pcap:"+in+tc.spec, "the summary names the replay")
		f, err := os.Open(out)
		require.NoError(t, err)
		r, err := pcapgo.NewReader(f)
		require.NoError(t, err)
		n := 0
		for {
			if _, _, err := r.ReadPacketData(); err != nil {
				break
			}
			n++
		}
		require.NoError(t, f.Close())
		require.Equal(t, 15, n, "%v: five frames, three passes", tc.timing)
	}
}
