// Package sim is the deterministic simulation of the reliable transport:
// two rt.Endpoints over mem ports joined by the fabric emulator (or by a
// scripted Tap), or N nodes joined through an emulated switch with a
// scripted fault timeline (Cluster), on a clock.Virtual, with every random choice drawn from
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
// can check the endpoints' invariants (Config.Check). Sim and Cluster run
// the one loop of loop.go; each says only which stages it polls, in what
// order, and whose deadlines count.
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
// PEREGRINE_SEEDS of them when that is set.
//
// # Sharded hosts
//
// With Config.Shards = S each side is a host of S endpoints (shard i with
// Options.ShardBits log2 S and Shard i) on the S queues of a mem port,
// each through core/shard's view of it, and a NIC stage (shards.go) between
// that port and the network: it puts each arriving frame on the queue of
// the shard its destination CID names, as an XDP program or flow steering
// does, a ConnOpen on the queue of the opener's shard number (shard i pairs
// with shard i), and with Config.Missteer a share of the frames (ConnOpens
// too) on a wrong queue, for core/shard's counted software hand-off. A workload opens its
// connections round robin over the shards. TestProperty also runs at 2 and
// 4 shards (200 seeds each; 20 in -short), with a missteered share or a
// link outage in some seeds, and checks besides the above that every shard
// of both sides got connections, that no endpoint received a frame
// another shard owns (its CID, or a ConnOpen's source CID, names another
// shard), and that only missteered frames were handed over:
//
//	go test ./sim -run TestProperty -seed=N -shards=S [-frames]
//
// The scenario tests script the network with a Tap hook, after Falcon's
// own: PSN wrap-around, receive-window shift, duplicate and stale ACKs,
// ACK loss, retransmission of a retransmission, early retransmission,
// retry exhaustion, out-of-window drops, forged packets, close under loss.
//
// # Clusters and faults
//
// A Cluster joins N nodes (two or more) through the fabric's N-port
// switch (fabric.Switch, the one the MCSQ network and the demo use), each
// node on its own fabric link (a Profile per direction), on one virtual
// clock, in the same loop. A node is an address and a port; its
// incarnation (a Peer: an rt.Endpoint, a txn.Endpoint) is made by
// NodeConfig.Make, at start and at every restart. The Switch forwards by
// destination MAC, then IPv4 address, and can drop frames selectively
// (Switch.Drop: only ACKs, every NACK) where a per-link profile cannot.
//
// ClusterConfig.Faults is a timeline: at Start+At each Fault does one
// thing, before anything else moves at that instant: SetProfile, LinkDown,
// LinkUp (fabric.Fabric.SetProfile and SetLinkDown on a node's link);
// Kill (the node stops answering: not polled, its timers frozen, every
// frame that reaches it dropped; its state kept for Revive or discarded);
// Restart (a fresh incarnation on the same address with the same or a new
// seed); Replay (frames a Recording captured at the switch, sent again
// later: an old incarnation's push into a new one); Inject (a frame built
// at that moment from live state: a forgery); Call (anything else). The
// clock stops at every fault, and everything, the timeline included, comes
// from ClusterConfig.Seed, so a run replays exactly.
//
// TestFaults (faults_test.go) is the fault suite: transactions
// between txn endpoints under heavy and burst loss, link flaps, ACK-only
// loss, loss of every NACK, a target's death, its restart with the same or
// a new seed, initiator restarts, stale-incarnation replay, RNR storms,
// incast with abandonment and forged ACKs, EACKs and NACKs, each over
// 1,000 seeds (60 under the race detector or -short;
// PEREGRINE_SEEDS overrides). Its invariants are checked from the
// outside (completions, what the target's ULP was handed, the frames on
// the wire), and a failure prints its replay command:
//
//	go test ./sim -run 'TestFaults/NAME$' -seed=N [-frames]
//
// Scenarios waiting for a fix are skipped with the failure they give;
// PEREGRINE_FAULT_UNSKIP=1 runs them anyway.
//
// A node with NodeConfig.Shards is a sharded host as above, each shard an
// incarnation of its own (a ShardedPeer). TestFaultsSharded runs every
// scenario against a target of 2 and 4 shards (200 seeds each; 12 in
// -short or under the race detector), each initiator's CIDs naming the
// shard its number pairs it with, and checks besides the suite's
// invariants that no target shard received a frame of another's
// connection, that nothing was handed over in software, and, where four
// initiators share the target, that every shard accepted connections:
//
//	go test ./sim -run 'TestFaultsSharded/shards=S/NAME$' -seed=N [-frames]
//
// # Buffer ownership
//
// The simulation owns nothing of its own beyond the ports it makes: the
// endpoints, the fabric, the tap and the switch own frames as their
// packages and docs say (the switch from RxBurst until an output accepts
// or it drops a frame). A Recording keeps copies, never pool frames.
// Stop returns every frame to the pool (endpoints, network, and what
// still sits in the endpoints' receive rings); Close also closes the
// ports and, when the simulation made its pool, checks it for leaks.
//
// bench/perf's SimPacketsPerSecond measures how many transport packets the
// simulation runs per second of wall time on one core.
package sim
