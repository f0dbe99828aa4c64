// Package sim is the deterministic simulation of the reliable transport:
// two rt.Endpoints over mem ports joined by the fabric emulator (or by a
// scripted Tap), on a clock.Virtual, with every random choice drawn from
// seeded generators. A run is fully determined by its seed; a failing
// property run prints the command that replays it:
//
//	go test ./sim -run TestProperty -seed=N [-frames]
//
// (-frames logs every frame each endpoint sends and receives.)
//
// # The loop
//
// Sim polls every stage (workloads, endpoint a, the network, endpoint b)
// at one virtual instant until none does any work, then moves the clock
// straight to the earliest deadline any of them reports (the endpoints'
// timer wheels, the fabric's next release, a paced sender's next burst).
// It never steps through idle virtual time, so a simulated second of a
// retransmission back-off costs a handful of polls. After every Poll it
// can check the endpoints' invariants (Config.Check).
//
// # Properties
//
// RandomScenario derives from a seed the impairments of each direction
// (0–10 % loss, sometimes in bursts, duplication, reordering, corruption,
// delay, jitter, multiple paths), the endpoints' window sizes, ACK
// coalescing and early-retransmit distance, initial PSNs that sometimes
// wrap through 2^32, one to three connections each way, and whether to
// close them. Check runs it and verifies: every reliable packet is
// delivered to the next stage exactly once, on its connection, with the
// PSN and window Send returned and its payload intact (or is reported
// abandoned); windows and bitmaps are consistent after every Poll; no ACK
// is ever taken for forged; nothing is outstanding at the end; closed
// connections free their slots; and every frame is back in the pool once
// the simulation stops. TestProperty runs 1,000 seeds by default and
// PEREGRINE_SIM_SEEDS of them in the nightly run.
//
// The scenario tests script the network with a Tap hook, after Falcon's
// own: PSN wrap-around, receive-window shift, duplicate and stale ACKs,
// ACK loss, retransmission of a retransmission, early retransmission,
// retry exhaustion, out-of-window drops, forged packets, close under loss.
//
// # Buffer ownership
//
// The simulation owns nothing of its own beyond the ports it makes: the
// endpoints, the fabric and the tap own frames as their packages say.
// Stop returns every frame to the pool (endpoints, network, and what
// still sits in the endpoints' receive rings); Close also closes the
// ports and, when the simulation made its pool, checks it for leaks.
//
// bench/perf's SimPacketsPerSecond measures how many transport packets the
// simulation runs per second of wall time on one core.
package sim
