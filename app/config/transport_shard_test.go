package config_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/app/config"
)

// TestShardedTransportErrors: a transport stage's lcores are checked
// before anything opens, each problem naming the field and the fix.
func TestShardedTransportErrors(t *testing.T) {
	const head = `
lcores: [{name: a}, {name: b}]
ports: [{name: p0, spec: "mem:s/0?queues=2"}, {name: p1, spec: "mem:s/1?queues=2"}]
pipelines: [{lcore: a, stages: [
  {kind: transport, name: tgt, role: target, port: p1, ip: 198.18.0.2, window: 8, lcores: [a, b]},
`
	for _, tc := range []struct {
		name, stage, want string
	}{
		{"unknown lcore", `{kind: transport, role: initiator, port: p0, ip: 198.18.0.1, peer: tgt, window: 8, lcores: [a, c]}`,
			`pipelines[0].stages[1].lcores[1]: "c" is not an lcore of the file (use one of: a, b)`},
		{"twice", `{kind: transport, role: initiator, port: p0, ip: 198.18.0.1, peer: tgt, window: 8, lcores: [a, a]}`,
			`lcores[1]: "a" is named twice`},
		{"not the pipeline's first", `{kind: transport, role: initiator, port: p0, ip: 198.18.0.1, peer: tgt, window: 8, lcores: [b, a]}`,
			`lcores[0]: "b" is not the lcore of the pipeline holding the stage ("a"): list that one first`},
		{"fewer conns than shards", `{kind: transport, role: initiator, port: p0, ip: 198.18.0.1, peer: tgt, window: 8, conns: 1, lcores: [a, b]}`,
			`conns: 1 for 2 shards: give each shard a connection (use 2 or more)`},
		{"a target sized for one initiator shard", `{kind: transport, role: initiator, port: p0, ip: 198.18.0.1, peer: tgt2, window: 8, lcores: [a, b]},
  {kind: transport, name: tgt2, role: target, port: p0, ip: 198.18.0.3, window: 8}`,
			`window: 8 with sizes [64KiB] needs a 1572864 B region at the target, and target "tgt2" registers 1048576 B`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse([]byte(head + "  " + tc.stage + "]}]\n"))
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
	_, err := config.Parse([]byte(head + "  {kind: transport, role: initiator, port: p0, ip: 198.18.0.1, peer: tgt, window: 8, lcores: [a, b]}]}]\n"))
	require.NoError(t, err, "two shards against a target of two")
}
