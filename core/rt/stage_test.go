package rt

import "github.com/peregrine-net/peregrine/core/lcore"

// The endpoint is polled by an lcore.Loop; the assertion lives in a test so
// the transport itself does not depend on the loop package.
var (
	_ lcore.Stage   = (*Endpoint)(nil)
	_ lcore.Stopper = (*Endpoint)(nil)
)
