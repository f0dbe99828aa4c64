// Package clock is the only source of time for peregrine's protocol code, and
// the home of the per-lcore timer wheel.
//
// Protocol and pipeline code never call time.Now: they read a Clock, and the
// lcore loop hands every stage the same Time for one iteration. Under Real the
// clock follows the machine's monotonic clock; under Virtual a test or a
// simulation sets the time explicitly, which makes the whole transport
// deterministic (the same seed and inputs give the same packets at the same
// virtual instants).
//
// # Time
//
// Time counts nanoseconds since the clock's origin (the moment NewReal was
// called, or whatever instant a Virtual clock was started at). It is a plain
// int64, so it is cheap to store in per-connection state and to compare. Times
// from different clocks are not comparable.
//
// # Timer wheel
//
// Wheel is a hierarchical timer wheel for one goroutine (one lcore): the
// reliable transport keeps its retransmit and keep-alive timers there. It
// holds a fixed number of timers allocated once by NewWheel; Arm, Rearm and
// Cancel are O(1) and never allocate, and Advance does work proportional to
// the timers it fires and moves, not to the time that passed.
//
// # Who owns what
//
//   - Arm gives the caller a TimerID; the caller holds it until the timer
//     fires or the caller cancels it. After that the ID is dead: the wheel may
//     hand the same slot out again under a new generation, and the dead ID no
//     longer matches it (see TimerID).
//   - The data word given to Arm is an opaque cookie (typically a connection or
//     context index) returned to the fire callback. It is a number, not a
//     pointer, so the wheel holds nothing for the garbage collector to scan.
//   - A Wheel belongs to one goroutine. It has no locks; sharing it between
//     goroutines is a data race. Clocks (Real and Virtual) may be read from
//     any goroutine.
package clock
