// Package lcore runs poll loops: the unit of execution of a peregrine
// pipeline, after DPDK's lcores.
//
// A Loop is one goroutine, optionally locked to its OS thread and pinned to
// one CPU, that calls its stages' Poll methods in order, again and again,
// until stopped. Every stage reports how much work it did; when none did any
// for a while, the loop idles according to its IdlePolicy: keep spinning
// (busy), yield the processor (yield), sleep with exponential back-off
// (sleep), or spin briefly after work, then yield, then sleep (adaptive).
// Busy and yield cost a whole CPU while idle (yield hands it over only to
// whoever asks); sleep costs almost nothing idle but adds the sleep's end
// to a packet that finds the loop asleep (a pinned loop sleeps in the
// kernel with a microsecond of timer slack, an unpinned one on a Go
// timer) — except one that arrives on a descriptor the loop sleeps on: a
// pinned loop waits in poll(2) on its stages' receive queues (Waker), and
// every sleeping loop wakes by its stages' earliest timer (Deadliner) and
// when a producer that hands it work through memory rings it
// (Options.Doorbell, Loop.Ring) — a Doorbell loop hands its Ring to the
// stages that take one (BellTaker), so a mem port's peer rings it when it
// sends, a port with no descriptor to sleep on.
// Adaptive keeps busy-polling latency for traffic that keeps coming,
// costs what sleep does once the traffic stops (`peregrine bench latency`
// measures both), yields now and then while it spins, and yields instead
// of spinning while its yields show another task on its CPU. Each iteration reads the loop's
// Clock once and hands that Time to every stage, so stages never read the
// clock themselves and a simulation can run the same stages on a virtual
// clock (an adaptive loop also reads it around each yield, to time it).
//
// # Who owns what
//
//   - A Stage belongs to the one Loop it was given to: Poll, and Stop if the
//     stage implements Stopper, are only ever called from that loop's
//     goroutine, one at a time. Stage state therefore needs no locks; stages
//     on different loops talk only through rings.
//   - Packet handles a stage obtains in Poll (from Port.RxBurst, a ring, a
//     pool) are the stage's until it hands them on (Port.TxBurst, a ring,
//     a free). When the loop exits it calls Stop on every stage that has it,
//     once, so the stage can flush per-lcore caches and free or hand back
//     whatever handles it still holds.
//   - A Loop's control methods (Start, Stop, Wait, Stats) may be called from
//     any goroutine; Group is for one controlling goroutine.
//
// # Pinning
//
// With Options.CPU >= 0 the loop goroutine calls runtime.LockOSThread and
// sets its thread's affinity to that CPU. It never unlocks: a goroutine that
// exits while locked takes its thread with it, so a thread with a changed
// affinity is never handed back to the Go scheduler for other goroutines.
package lcore
