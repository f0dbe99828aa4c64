package config_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/peregrine-net/peregrine/app/config"
)

// FuzzParse: no file, however malformed, panics the parser or the
// checks; a file that parses also validates again to the same answer.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("../../configs/*.yaml")
	for _, p := range files {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
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
