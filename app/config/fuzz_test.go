package config_test

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/peregrine-net/peregrine/app/config"
)

// FuzzParse: no file, however malformed, panics the parser or the
// checks; a file that parses also validates again to the same answer.
//
// The seeds are the example configs without their comments: the fuzzer
// minimises every input that finds new coverage by removing each span of
// bytes in turn (a number of runs that grows with the square of the
// input's length), and its rate reads 0 execs/s while it does; comments
// would only make that longer. boundMinimizing caps it for the same
// reason.
func FuzzParse(f *testing.F) {
	boundMinimizing(f, 2*time.Second)
	files, _ := filepath.Glob("../../configs/*.yaml")
	for _, p := range files {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(withoutComments(f, data))
		}
	}
	f.Add([]byte(genSink))
	f.Add([]byte("pipelines: [{lcore: a, stages: [{kind: transport, peer: x}, 5, [1], {kind: {a: b}}]}]"))
	f.Add([]byte("run: {duration: 1h, drain: -5s}\nlcores: [{cpu: -7}]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := config.Parse(data)
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("parsed, then refused on a second check: %v", err)
		}
	})
}

// boundMinimizing sets -fuzzminimizetime to d unless the command line
// gave it: the default, 60 s per input that finds new coverage, has a
// config fuzzer minimising most of the time instead of fuzzing.
func boundMinimizing(f *testing.F, d time.Duration) {
	set := false
	flag.Visit(func(fl *flag.Flag) { set = set || fl.Name == "test.fuzzminimizetime" })
	if !set {
		if err := flag.Set("test.fuzzminimizetime", d.String()); err != nil {
			f.Fatal(err)
		}
	}
}

// withoutComments returns data re-encoded without its comments.
func withoutComments(f *testing.F, data []byte) []byte {
	var n yaml.Node
	if err := yaml.Unmarshal(data, &n); err != nil {
		f.Fatalf("an example config does not parse: %v", err)
	}
	var strip func(*yaml.Node)
	strip = func(n *yaml.Node) {
		n.HeadComment, n.LineComment, n.FootComment = "", "", ""
		for _, c := range n.Content {
			strip(c)
		}
	}
	strip(&n)
	out, err := yaml.Marshal(&n)
	if err != nil {
		f.Fatal(err)
	}
	return out
}
