package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/wire"
)

// readsCapture reports whether a config reads a pcap: port, an input the
// file does not carry (TestRoCEConfigPcapToPcap writes it).
func readsCapture(t *testing.T, file string) bool {
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	return regexp.MustCompile(`spec: *"pcap:`).Match(data)
}

// TestRoCEConfigPcapToPcap is the config's comment end to end: `roce
// sample -o` writes the input, and configs/roce-pcap.yaml (its capture
// paths moved to a temporary directory) reads it — the open QPs 3, 4 and
// 0x100 and the retired QP 2: the run ends at the capture's end, the four
// frames for open QPs reach the host with local numbers and good ICRCs,
// the two stale ones are dropped and counted.
func TestRoCEConfigPcapToPcap(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "roce-in.pcap"), filepath.Join(dir, "roce-out.pcap")
	o, code := runCLI(t, "roce", "sample", "-o", in)
	require.Equal(t, 0, code, o)
	require.Contains(t, o, "wrote 6 RoCEv2 frames")
	data, err := os.ReadFile("../../configs/roce-pcap.yaml")
	require.NoError(t, err)
	require.Contains(t, string(data), "peregrine roce sample -o configs/roce-in.pcap", "the config names the command that writes its input")
	yaml := strings.NewReplacer(`"pcap:roce-in.pcap"`, `"pcap:`+in+`"`, `"pcap-out:roce-out.pcap"`, `"pcap-out:`+out+`"`).Replace(string(data))
	require.NotEqual(t, string(data), yaml, "configs/roce-pcap.yaml no longer names roce-in.pcap and roce-out.pcap")
	cfg := filepath.Join(dir, "roce.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(yaml+"\n"), 0o644))

	o, code = runCLI(t, "run", "-c", cfg, "--quiet")
	require.Equal(t, 0, code, o)
	require.Contains(t, o, "verification passed")
	require.Contains(t, o, "retired 0x000002")
	require.Contains(t, o, "rx=6 fwd=4 other=0 drop{malformed=0 icrc=0 retired_qpn=2 unknown_qpn=0")
	require.Regexp(t, `pool: \d+ frames, 0 in use after stop`, o)

	var d bytes.Buffer
	require.NoError(t, decodeFile(out, wire.DefaultPort, 0, &d))
	lines := strings.Split(strings.TrimSpace(d.String()), "\n")
	require.Len(t, lines, 4, d.String())
	for _, l := range lines {
		require.Regexp(t, `roce RC SEND Only qp=0x0000\d\d .* icrc=0x[0-9a-f]{8} ok$`, l)
	}
}
