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
// commit may be set the same way (-X main.commit=$(git rev-parse HEAD))
// where go build cannot stamp it: it stamps vcs.revision only when the
// module sits in a git checkout whose .git is a directory, not in a git
// worktree. These are the command's only package-level variables, because
// -X can set nothing else.
var (
	version = "devel"
	commit  = ""
)

// versionString is what peregrine --version prints after the name: the
// version, the Go toolchain, and the commit the build info recorded (go
// build in a git checkout stamps vcs.revision; "+dirty" when the tree had
// changes).
func versionString() string {
	commit := commit
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
	if commit == "" {
		commit = "unknown"
	}
	return fmt.Sprintf("%s (%s, commit %s)", version, runtime.Version(), commit)
}
