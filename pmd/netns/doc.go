// Package netns creates and enters Linux network namespaces and joins them
// with veth pairs, so that tests, benchmarks and `demo --veth` can drive the
// AF_PACKET and AF_XDP drivers over real kernel interfaces without touching
// the machine's own network.
//
// Everything here shells out to iproute2 (`ip`) and ethtool for control
// operations (a missing one is reported with the Debian package to install,
// see internal/tools) and uses setns(2) only in Do, which switches one locked OS
// thread into a namespace. A socket keeps the namespace it was created in, so
// drivers create their sockets inside Do and then use them from any thread.
//
// Addresses given to Veth must lie in 198.18.0.0/15, the range RFC 2544
// reserves for benchmarking; anything else is refused, so a mistake here can
// never configure an address that routes somewhere real.
//
// # Ownership
//
// This package moves no packets and owns no buffers. A namespace created
// with Create belongs to the caller until Delete; deleting it destroys the
// veth ends inside it (and so their peers). Sockets opened inside a
// namespace keep it alive after Delete until they are closed.
package netns
