// Package portstat holds the per-queue counters the pmd drivers share.
//
// Each queue's counters are written by the one goroutine driving that queue
// and read by Stats() from any goroutine. They are atomics so the reads are
// race-free, but a driver adds to them once per burst, never per packet, and
// the RX and TX halves sit on separate cache lines so a queue's RX and TX
// goroutines (and neighbouring queues) do not false-share. The package never
// touches packets or their ownership.
package portstat
