// Package pmdtest is the conformance suite every port driver passes. A
// driver's tests call Run with a Harness that opens a connected pair of its
// ports (for loopback-capable drivers: mem, AF_XDP and AF_PACKET over veth)
// or RunBasic with one port (drivers that do not loop back: null, pcap).
//
// The suite sends frames tagged with a per-run signature (EtherType 0x88b5,
// "PMDT", run id, sequence number, queue, length, and a payload pattern
// derived from the sequence number), so it can tell its own frames from
// foreign traffic a real link carries (IPv6 neighbour discovery and the
// like), which it frees and otherwise ignores, and can check every received
// byte.
//
// # Buffer ownership
//
// The suite allocates every frame it sends from Harness.Pool and frees
// every frame it receives, every frame TxBurst refuses, and nothing else;
// once a subtest has closed its ports the pool must be back to zero frames
// in use, so the pool must be dedicated to the suite while it runs.
//
// Waiting for frames is bounded by a count of consecutive empty polls
// (Harness.MaxEmptyPolls), calling Harness.Settle between polls; the suite
// never sleeps.
package pmdtest
