package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFlagsAndConfigShareRules: the same mistake made in a flag and in a
// config key gets the same message — the flag where the file puts the
// field's path — because both call app/config's rules.
func TestFlagsAndConfigShareRules(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		flags []string
		flag  string // the flag the error names
		yaml  string
		path  string // the field the error names
	}{
		{[]string{"fwd", "--port", "null:", "--burst", "999"}, "--burst 999",
			`{kind: forwarder, ports: [p0], burst: 999}`, "pipelines[0].stages[0].burst: 999"},
		{[]string{"transport", "target", "--port", "null:", "--ip", "198.18.0.2", "--psn-window", "100"}, "--psn-window 100",
			`{kind: transport, role: target, port: p0, ip: 198.18.0.2, psn_window: 100}`, "pipelines[0].stages[0].psn_window: 100"},
		{[]string{"transport", "target", "--port", "null:", "--ip", "198.18.0.2", "--sizes", "1GiB", "--window", "64"}, "--sizes 1GiB: with window 64",
			`{kind: transport, role: target, port: p0, ip: 198.18.0.2, sizes: [1GiB], window: 64}`, "pipelines[0].stages[0].sizes: with window 64"},
		{[]string{"gen", "--port", "null:", "--frames", "10"}, "--frames 10",
			"{kind: sink, port: p0}]}]\npool: {frames: 10}\n#", "pool.frames: 10"},
	} {
		out, code := runCLI(t, tc.flags...)
		require.Equal(t, exitUsage, code, out)
		i := strings.Index(out, tc.flag)
		require.GreaterOrEqual(t, i, 0, out)
		flagMsg := firstLine(out[i+len(tc.flag):])

		file := filepath.Join(dir, "c.yaml")
		require.NoError(t, os.WriteFile(file, []byte("lcores: [{name: a}]\nports: [{name: p0, spec: \"null:\"}]\npipelines: [{lcore: a, stages: ["+tc.yaml+"]}]\n"), 0o644))
		out, code = runCLI(t, "run", "--check", "-c", file)
		require.Equal(t, exitUsage, code, out)
		i = strings.Index(out, tc.path)
		require.GreaterOrEqual(t, i, 0, out)
		require.Equal(t, flagMsg, firstLine(out[i+len(tc.path):]), "flag and config messages differ")
	}
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}
