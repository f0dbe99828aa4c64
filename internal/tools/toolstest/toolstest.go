// Package toolstest lets a test declare the external programs it runs:
// Require skips the test when one is missing and the process is not root
// (nothing can be installed), and fails it when root (hack/install-deps.sh
// should have installed it), naming the Debian package either way.
package toolstest

import (
	"errors"
	"os"
	"testing"

	"github.com/peregrine-net/peregrine/internal/tools"
)

// Require checks that every program is installed; see the package doc.
func Require(t testing.TB, programs ...string) {
	t.Helper()
	for _, p := range programs {
		_, err := tools.Find(p)
		switch {
		case err == nil:
		case errors.Is(err, tools.ErrMissing) && os.Geteuid() != 0:
			t.Skipf("%v (not root: skipped)", err)
		case errors.Is(err, tools.ErrMissing):
			t.Fatalf("%v (running as root, so hack/install-deps.sh should have installed it)", err)
		default:
			t.Fatalf("%v", err)
		}
	}
}

// Path requires program as Require does and returns its path.
func Path(t testing.TB, program string) string {
	t.Helper()
	Require(t, program)
	path, err := tools.Find(program)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return path
}
