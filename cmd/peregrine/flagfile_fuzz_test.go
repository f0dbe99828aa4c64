package main

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzRFC2544FlagFile feeds bench rfc2544's file form anything: it is
// refused with an error naming the file or merged into flags the usual
// checks then accept or refuse — never a panic.
func FuzzRFC2544FlagFile(f *testing.F) {
	example, err := os.ReadFile("../../configs/bench/rfc2544.yaml")
	require.NoError(f, err)
	f.Add(example)
	f.Add([]byte("search: {resolution: 0.9, bogus: [1, {a: b}]}\nsizes: [64, imix]\n"))
	f.Add([]byte("a: &x 1\nb: *x\n---\nc: 2\n"))
	f.Add([]byte("- 1\n- 2\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cmd := newBenchRFC2544Command()
		origin, err := applyFlagFile(cmd.Flags(), "f.yaml", data, rfc2544Fields)
		if err != nil {
			require.Contains(t, err.Error(), "f.yaml")
			return
		}
		for _, at := range origin {
			require.Contains(t, at, "f.yaml:")
		}
	})
}
