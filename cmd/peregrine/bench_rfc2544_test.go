package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/pmd/netns/netnstest"
)

// TestBenchRFC2544WritesTheReportAndJSON runs the command as root with
// tiny trials against peregrine fwd and the Linux bridge: it must print
// the ratio lines, end with BENCH-SUMMARY, and write a Markdown report and
// a JSON result that records the parameters and every trial.
func TestBenchRFC2544WritesTheReportAndJSON(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: namespaces, veth, a bridge and AF_XDP sockets")
	}
	dir := t.TempDir()
	md, js := filepath.Join(dir, "r.md"), filepath.Join(dir, "r.json")
	cmd := newBenchRFC2544Command()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"--duts", "kernel,fwd", "--sizes", "64", "--measures", "throughput", "--duration", "20ms",
		"--max-rate", "20kpps", "--repeats", "2", "--width", "0.05", "--markdown", md, "--json", js,
		"--netns-prefix", fmt.Sprintf("pgc%d", os.Getpid()%100000)})
	require.NoError(t, cmd.Execute(), out.String())
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.True(t, strings.HasPrefix(lines[len(lines)-1], "BENCH-SUMMARY "), out.String())
	require.Contains(t, out.String(), "RATIO ndr_64b_fwd_vs_kernel_bridge ")
	require.Contains(t, out.String(), "RATIO search_repeatability ")

	text, err := os.ReadFile(md)
	require.NoError(t, err)
	require.Contains(t, string(text), "| fwd | 64B |")
	require.Contains(t, string(text), "| kernel | 64B |")
	var res struct {
		Parameters map[string]any `json:"parameters"`
		Results    []struct {
			DUT   string `json:"dut"`
			Sizes []struct {
				NDR      float64 `json:"ndr_fps"`
				Searches []struct {
					Trials []json.RawMessage `json:"trials"`
				} `json:"searches"`
			} `json:"sizes"`
		} `json:"results"`
	}
	b, err := os.ReadFile(js)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &res))
	require.Equal(t, "20kpps", res.Parameters["max_rate"])
	require.Equal(t, "20ms", res.Parameters["trial_duration"])
	require.Equal(t, 0.05, res.Parameters["width"])
	require.Len(t, res.Results, 2)
	require.NotEmpty(t, res.Results[1].Sizes[0].Searches[0].Trials)
}

func TestBenchRFC2544RefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--sizes", "32"}, {"--sizes", "64,jumbo"}, {"--duts", "vpp"}, {"--measures", "latency"},
		{"--width", "0"}, {"--exceed-ratio", "1"}, {"--max-rate", "0pps"}, {"--max-rate", "10pps"}, {"--duration", "1s", "--initial-duration", "2s"},
		{"--repeats", "0"}, {"--markdown", ""},
	} {
		cmd := newBenchRFC2544Command()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(args)
		cmd.RunE = func(*cobra.Command, []string) error { return nil }
		err := cmd.Execute()
		require.Error(t, err, "%v", args)
		var ue usageError
		require.ErrorAs(t, err, &ue, "%v: a usage error (exit 2)", args)
	}
}

// benchRFC2544Flags parses args as bench rfc2544 would and returns the
// flags' values after PreRunE (the file merged, everything checked), or
// the error.
func benchRFC2544Flags(t *testing.T, args ...string) (map[string]string, error) {
	t.Helper()
	cmd := newBenchRFC2544Command()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	got := map[string]string{}
	cmd.RunE = func(c *cobra.Command, _ []string) error {
		c.Flags().VisitAll(func(f *pflag.Flag) { got[f.Name] = f.Value.String() })
		return nil
	}
	return got, cmd.Execute()
}

// TestBenchRFC2544ConfigFile: the example in configs/ sets every flag it
// names; a flag on the command line wins over the file.
func TestBenchRFC2544ConfigFile(t *testing.T) {
	const example = "../../configs/bench/rfc2544.yaml"
	got, err := benchRFC2544Flags(t, "-c", example)
	require.NoError(t, err)
	require.Equal(t, "kernel,fwd", got["duts"])
	require.Equal(t, "64,128,256,512,1024,1280,1518,imix", got["sizes"])
	require.Equal(t, "125ms", got["initial-duration"])
	require.Equal(t, "0.005", got["width"])
	require.Equal(t, "0.1,0.5,0.9,1", got["latency-loads"])
	require.Equal(t, "2s", got["burst-duration"])
	require.Equal(t, "text", got["format"])

	got, err = benchRFC2544Flags(t, "-c", example, "--width", "0.02", "--dut", "fwd")
	require.NoError(t, err)
	require.Equal(t, "0.02", got["width"], "the command line wins")
	require.Equal(t, "fwd", got["duts"], "--dut is --duts")
	require.Equal(t, "125ms", got["initial-duration"], "the rest still comes from the file")
}

// TestBenchRFC2544ConfigFileErrors: a problem in the file is a usage
// error naming the file, the line and the field, and the fix.
func TestBenchRFC2544ConfigFileErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ file, want string }{
		{"search:\n  resolution: 0.02\n  bogus: 1\n", "x.yaml:3: search.bogus: unknown field; search holds trial_duration, initial_trial_duration, resolution"},
		{"serch: {resolution: 0.02}\n", "x.yaml:1: serch: unknown field; the top level holds duts, tx_port"},
		{"search:\n  resolution: 0.9\n", "x.yaml:2: search.resolution 0.9: give 0.0001..0.25"},
		{"search: {max_trials: many}\n", `x.yaml:1: search.max_trials: "many": invalid syntax`},
		{"search: 5\n", "x.yaml:1: search: give a mapping of fields"},
		{"sizes: [64, 32]\n", `x.yaml:1: sizes: "32": give on-wire frame sizes 64..1518`},
		{"latency: {loads_of_ndr: [0.5, 2]}\n", `x.yaml:1: latency.loads_of_ndr "2": give fractions in (0, 1]`},
		{"duts: external\n", "x.yaml:1: duts external needs --tx-port and --rx-port"},
		{"tx_port: afxdp:eth1\n", "x.yaml:1: tx_port afxdp:eth1: name the ports around your own device with --duts external"},
		{"max_rate: {a: 1}\n", "x.yaml:1: max_rate: give a value or a list of values, not a mapping"},
		{"", "x.yaml: the file is empty"},
	} {
		path := filepath.Join(dir, "x.yaml")
		require.NoError(t, os.WriteFile(path, []byte(c.file), 0o644))
		_, err := benchRFC2544Flags(t, "-c", path)
		require.Error(t, err, c.file)
		var ue usageError
		require.ErrorAs(t, err, &ue, "%q: a usage error (exit 2)", c.file)
		require.Contains(t, err.Error(), filepath.Join(dir, c.want), c.file)
	}
	_, err := benchRFC2544Flags(t, "-c", filepath.Join(dir, "none.yaml"))
	require.ErrorContains(t, err, "--config "+filepath.Join(dir, "none.yaml")+": no such file or directory")
}

// TestRecordStreamFormats: both formats carry every parameter in every
// record, and a reader gets the fields back.
func TestRecordStreamFormats(t *testing.T) {
	params := map[string]any{"trial_duration": "1s", "width": 0.005}
	var js bytes.Buffer
	s := newRecordStream(formatJSONL, &js, params, "dut", "rate_fps")
	require.NoError(t, s.write("trial", map[string]any{"dut": "fwd", "rate_fps": 1e6}))
	require.NoError(t, s.write("summary", map[string]any{"pass": 1}))
	lines := strings.Split(strings.TrimSpace(js.String()), "\n")
	require.Len(t, lines, 2)
	for i, l := range lines {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &rec))
		require.Equal(t, []string{"trial", "summary"}[i], rec["type"])
		require.Equal(t, map[string]any{"trial_duration": "1s", "width": 0.005}, rec["params"])
	}

	var cs bytes.Buffer
	s = newRecordStream(formatCSV, &cs, params, "dut", "rate_fps")
	require.NoError(t, s.write("trial", map[string]any{"dut": "a,b", "rate_fps": 1e6}))
	require.NoError(t, s.write("summary", map[string]any{"pass": 1}))
	rows, err := csv.NewReader(&cs).ReadAll()
	require.NoError(t, err)
	require.Equal(t, [][]string{
		{"type", "dut", "rate_fps", "param_trial_duration", "param_width"},
		{"trial", "a,b", "1e+06", "1s", "0.005"},
		{"summary", "", "", "1s", "0.005"},
	}, rows)
	require.Nil(t, newRecordStream(formatText, &cs, params))
	require.NoError(t, (*recordStream)(nil).write("trial", nil))
}

// TestBenchRFC2544ExternalDUTStreams runs the command as a user with their
// own device would: the test builds two veth pairs and a Linux bridge
// between them (the device), names the outer ends as --tx-port and
// --rx-port with --duts external, and reads --format jsonl from stdout:
// a record per trial, one result and the summary, each with the run's
// parameters; the text went to stderr.
func TestBenchRFC2544ExternalDUTStreams(t *testing.T) {
	topo, _ := netnstest.BenchBridge(t)

	dir := t.TempDir()
	cmd := newBenchRFC2544Command()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs([]string{"--dut", "external",
		"--tx-port", fmt.Sprintf("afxdp:%s?netns=%s", topo.GenIf, topo.Gen.Name),
		"--rx-port", fmt.Sprintf("afxdp:%s?netns=%s", topo.SinkIf, topo.Sink.Name),
		"--sizes", "64", "--measures", "throughput", "--duration", "20ms", "--max-rate", "20kpps", "--width", "0.05",
		"--markdown", filepath.Join(dir, "r.md"), "--json", filepath.Join(dir, "r.json"), "--format", "jsonl"})
	require.NoError(t, cmd.Execute(), errOut.String())
	require.Contains(t, errOut.String(), "BENCH-SUMMARY", "the text goes to stderr")

	types := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var rec struct {
			Type     string         `json:"type"`
			Params   map[string]any `json:"params"`
			DUT      string         `json:"dut"`
			Size     string         `json:"size"`
			Sent     uint64         `json:"sent"`
			Received uint64         `json:"received"`
			NDR      float64        `json:"ndr_fps"`
			AtLeast  float64        `json:"ndr_at_least_fps"`
			Limited  bool           `json:"generator_limited"`
		}
		require.NoError(t, json.Unmarshal([]byte(l), &rec), l)
		types[rec.Type]++
		require.Equal(t, "20ms", rec.Params["trial_duration"], l)
		require.Equal(t, "20kpps", rec.Params["max_rate"], l)
		require.Contains(t, rec.Params["topology"], "external DUT between afxdp:"+topo.GenIf, l)
		switch rec.Type {
		case "trial":
			require.Equal(t, "external", rec.DUT)
			require.Equal(t, "64B", rec.Size)
			require.Positive(t, rec.Sent)
			require.Equal(t, rec.Sent, rec.Received, "a bridge at 20 kfps loses nothing: %s", l)
		case "result":
			if rec.Limited {
				// The generator was held back at 20 kfps (a loaded
				// machine): a lower bound, never an NDR.
				require.Zero(t, rec.NDR, l)
				require.Positive(t, rec.AtLeast, l)
			} else {
				require.Equal(t, 20000.0, rec.NDR, l)
			}
		}
	}
	require.Positive(t, types["trial"])
	require.Equal(t, 1, types["result"])
	require.Equal(t, 1, types["summary"])
}
