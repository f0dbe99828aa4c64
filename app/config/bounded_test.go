package config_test

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/app/config"
)

// repeatTo writes head, then item with N replaced by 0, 1, … until the
// result would pass limit bytes, then tail.
func repeatTo(head, item, tail string, limit int) string {
	var b strings.Builder
	b.WriteString(head)
	for i := 0; b.Len()+len(item)+len(tail)+8 <= limit; i++ {
		b.WriteString(strings.ReplaceAll(item, "N", strconv.Itoa(i)))
	}
	b.WriteString(tail)
	return b.String()
}

// parseAllocs parses data and returns the error and the bytes Parse
// allocated: a measure of its work that does not depend on the machine.
func parseAllocs(data []byte) (error, uint64) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := config.Parse(data)
	runtime.ReadMemStats(&after)
	return err, after.TotalAlloc - before.TotalAlloc
}

// TestParseWorkIsBounded: files that each stress one way the checks
// could cost more than the file's size — aliases of a long list or of a
// mapping of bad keys repeated where they are used, thousands of ports
// compared pair by pair, a reference to a missing port repeated with a
// message listing every port — are answered with work in proportion to
// their size (bytes allocated per byte of input), each with an error
// that says what is wrong.
func TestParseWorkIsBounded(t *testing.T) {
	const size = 256 << 10
	stage := "  - {kind: transport, role: target, port: p, ip: 198.18.0.1, sizes: *z}\n"
	for _, tc := range []struct {
		name, data, want string
	}{
		{"aliased list", "lcores: [{name: a}]\nports: [{name: p, spec: \"null:\"}]\npipelines:\n- lcore: a\n  stages:\n" +
			repeatTo("  - {kind: transport, role: target, port: p, ip: 198.18.0.1, sizes: &z [", "16, ", "16]}\n", size/2) +
			repeatTo("", stage, "", size/2), "aliases (*z and any others) repeat"},
		{"aliased mapping", "lcores: [&m {name: a, " + repeatTo("", "xN: 1, ", "x: 1}", size/2) + repeatTo("", ", *m", "]\n", size/2),
			"aliases (*m and any others) repeat"},
		{"many ports", repeatTo("lcores: [{name: a}]\nports:\n", "- {name: pN, spec: \"mem:N/0\"}\n", "- {name: again, spec: \"mem:0/0\"}\n", size),
			`"mem:0/0" opens the same port as ports[0]`},
		{"many references", repeatTo("lcores: [{name: a}]\nports:\n", "- {name: pN, spec: \"null:\"}\n", "", size/2) +
			repeatTo("pipelines:\n- lcore: a\n  stages:\n", "  - {kind: sink, port: q}\n", "", size/2), "p15, … ("},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err, alloc := parseAllocs([]byte(tc.data))
			requireErrorContains(t, err, tc.want)
			perByte := float64(alloc) / float64(len(tc.data))
			t.Logf("%d B: %.0f B allocated per byte", len(tc.data), perByte)
			require.Less(t, perByte, 1024.0, "the checks' work grows faster than the file")
		})
	}
}

// TestParseAliasSeed: the seed of the fuzz corpus that repeats a mapping
// of 600 unknown keys 600 times through an alias (once 360,000 errors,
// each listing the fields)
// is refused at once, naming the alias.
func TestParseAliasSeed(t *testing.T) {
	data := readSeed(t, "testdata/fuzz/FuzzParse/alias-of-bad-keys")
	err, _ := parseAllocs(data)
	requireErrorContains(t, err, "aliases (*m and any others) repeat 719998 values where they are used: at most 100000")
}

// requireErrorContains is require.ErrorContains with the error cut short
// in the failure: these files' errors can run to megabytes.
func requireErrorContains(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("want an error containing %q, got %.300v", want, err)
	}
}

// readSeed reads a []byte seed of the go fuzz corpus format.
func readSeed(t *testing.T, path string) []byte {
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	body, ok := strings.CutPrefix(string(raw), "go test fuzz v1\n[]byte(")
	require.True(t, ok, "not a go test fuzz v1 []byte seed")
	s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimSpace(body), ")"))
	require.NoError(t, err)
	return []byte(s)
}
