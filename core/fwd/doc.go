// Package fwd is testpmd's forwarding engine as a poll-loop stage: receive a
// burst on one port queue, optionally rewrite Ethernet addresses, transmit it
// on another.
//
// # Buffer ownership
//
// Frames received belong to the stage until TxBurst accepts them. What the
// output refuses is either freed and counted (OnFull = FullDrop, testpmd's
// behaviour) or kept and offered again before anything new is received
// (OnFull = FullRetry), so backpressure travels upstream instead of loss.
// In rxonly mode every frame is freed. Stop frees anything still held and
// returns the stage's cache to the pool.
package fwd
