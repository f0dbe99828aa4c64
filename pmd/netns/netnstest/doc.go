// Package netnstest builds throw-away network topologies for tests:
// namespaces joined by veth pairs, deleted again by t.Cleanup. Tests that
// use it need root and are skipped otherwise.
//
// Namespaces are named "pgt-PID-RANDOM" so that concurrent test binaries
// never collide and leftovers of a killed run can be traced to it (delete
// them with `hack/topo.sh down pgt`).
package netnstest
