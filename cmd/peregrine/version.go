package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// version is the release this binary was built as, set at link time:
//
//	go build -ldflags "-X main.version=v0.3.0" ./cmd/peregrine
//
// It is the one package-level variable of the command, because -X can set
// nothing else.
var version = "devel"

// versionString is what peregrine --version prints after the name: the
// version, the Go toolchain, and the commit the build info recorded (go
// build in a git checkout stamps vcs.revision; "+dirty" when the tree had
// changes).
func versionString() string {
	commit := "unknown"
	if info, ok := debug.ReadBuildInfo(); ok {
		var rev, dirty string
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					dirty = "+dirty"
				}
			}
		}
		if rev != "" {
			commit = rev + dirty
		}
	}
	return fmt.Sprintf("%s (%s, commit %s)", version, runtime.Version(), commit)
}
