// Package rfc2544 benchmarks a device under test (DUT) the way the field
// does: RFC 2544's throughput, latency, frame loss rate and back-to-back
// measurements, with throughput found by the NDR/PDR search FD.io CSIT
// runs (MLRsearch, draft-ietf-bmwg-mlrsearch), for the seven standard
// Ethernet frame sizes and IMIX.
//
// Everything here talks to the DUT through one interface, Trialer: offer
// a rate for a duration (or a burst of N frames), get back frames sent,
// frames received and, when asked, a latency histogram. `peregrine bench
// rfc2544` implements it over veth pairs with peregrine's generator and
// sink; Simulated implements it with a DUT of known capacity, buffer and
// noise on the virtual clock, which is how the search is tested. Frame
// sizes are on-wire lengths with the FCS (64 is 60 bytes of frame).
//
// # The search, and the choices it makes
//
// A goal is a loss ratio: NDR tolerates none, PDR SearchOptions.PDRLoss
// (0.5 % by default, CSIT's). For each goal the search keeps a lower bound
// (a load that passed) and an upper bound (one that failed) and narrows
// them until (upper − lower) ÷ upper ≤ Width (0.5 % by default): the
// resolution is a relative width, as MLRsearch's goal width is. The answer
// is the lower bound.
//
//   - Phases. Trials start short (InitialDuration, Duration/8 by default)
//     with a wide width, and each phase doubles the duration and halves the
//     width until the last runs at Duration and Width, so most trials are
//     cheap. A bound counts in a phase only by trials at least that long:
//     the final phase re-measures both bounds at full duration, which is
//     the final confirmation trial.
//   - Noisy trials. A load is decided by its trial time, not its last
//     trial: it is an upper bound when more than ExceedRatio (0.5) of the
//     time it needs (SumFactor × the phase's duration, 2 by default) lost
//     more than the goal allows, a lower bound when enough time passed
//     that it would still not be even had all the missing time failed,
//     and undecided (measured again) otherwise. So one disturbed trial —
//     a compile job taking the DUT's CPU for a second — cannot make an
//     upper bound on its own; two out of two can. This is MLRsearch's goal
//     exceed ratio and duration sum; ExceedRatio near 0 with SumFactor 1
//     is RFC 2544's plain binary search, where the first bad trial decides.
//   - Held-back trials. A trial whose generator offered less than
//     (1 − OfferedTolerance) of its rate (5 % by default; sent ÷ send
//     time, when the Trialer measures it) tested a lighter load than
//     asked — its CPU was taken — and is evidence of nothing about the
//     DUT: it is recorded (TrialRecord.HeldBack), decides nothing and is
//     run again at the same load. Five running at one load that offered
//     about the same (fifteen when their offers were erratic) mean the
//     generator cannot offer it now: the search's ceiling drops to the
//     best it offered there (GeneratorLimited), and a goal that passes
//     the ceiling is AtMax, a lower bound of the DUT's rate. So the final
//     confirmation trial too is re-measured until one kept its rate. A
//     trial that fell short because the generator's port refused frames
//     (TrialResult.Refused: over veth a DUT that does not keep up fills
//     the generator's transmit ring, where a wire would drop) is not held
//     back but the DUT's doing, whatever its size: its shortfall counts as loss
//     (TrialRecord.Backpressure).
//   - Where to try next: a load between the bounds still undecided at this
//     duration (last phase's bounds, the passing one first); the ceiling (MaxRate) when
//     nothing failed yet; when nothing passed, the rate the DUT forwarded
//     at the upper bound (its capacity, as MLRsearch's initial phase
//     takes it from the maximum-rate trial) or a step down, each step
//     twice the last; the same stepping up when nothing failed; else the
//     midpoint. A search stops with ErrTooManyTrials after MaxTrials.
//   - PDR runs after NDR on the same trials (a load that passed NDR passed
//     PDR), so it usually costs a few more trials only.
//
// MLRsearch's conditional throughput and its per-phase duration sums are
// not implemented: each phase uses the same SumFactor.
//
// # The other measurements (Run)
//
//   - Latency at 10, 50, 90 and 100 % of NDR (RFC 2544 asks for the
//     throughput rate only; CSIT adds the lower loads): one trial of
//     Duration each, min, average, p50, p99, p99.9 and max from an HDR
//     histogram (core/hist, within 1 %).
//   - Frame loss rate at 10 % to 100 % of MaxRate in 10 % steps (RFC 2544
//     26.3 walks down from 100 %; every step is kept here).
//   - Back-to-back: the longest burst at MaxRate with no loss, bisected to
//     the search's width, BurstTrials times (RFC 2544 asks for 50), the
//     longest tried MaxRate × BurstDuration (2 s).
//   - Repeats searches at RepeatSize give search_repeatability: max ÷ min
//     of their NDRs.
//
// # Over veth (RunVeth, `peregrine bench rfc2544`)
//
// RunVeth builds gen ↔ fwd ↔ sink (netns.BenchThreeNS: three namespaces,
// two veth pairs, MTU 1504, GRO on, addresses in 198.18.0.0/15) and opens the
// traffic side once: AF_XDP ports on the gen and sink ends, polled by one
// busy loop pinned to CPU 0 that runs a single stage (trialStage). A trial
// builds a fresh traffic.Generator (one flow, rate-limited, Count frames,
// addressed gen → sink) and hands it to the loop through an atomic
// pointer; its frames carry a UDP source port new to the trial, so a late
// frame of an earlier trial is counted stale, never received. The trial
// ends when the generator has handed every frame to its port and the
// receiver has seen them all or none for 200 ms; the controller then asks
// the loop to close the trial and takes its counts and latency histogram
// (real clock read once per received burst, minus the transmit stamp:
// both CLOCK_MONOTONIC, nanoseconds).
//
// For each frame size the generator's ceiling is measured first: with no
// DUT, a native XDP program on fwd's gen-side end redirects every frame to
// its sink-side end (the kernel's fastest path: no socket, no copy, no
// stack), and the traffic loop sends at no rate limit for Duration; the
// ceiling is what arrived per second of send time, the best of two such
// trials (noise only lowers what a generator manages). With MaxRate 0
// (the default, `--max-rate auto`) every search offers up to it; a DUT
// whose NDR comes within Width of it, or whose search lowered its own
// ceiling and passed it, is GeneratorLimited: the report, the JSON
// (ndr_at_least_fps, ndr_fps null) and the RATIO comment line give
// "≥ N (generator-limited)", never N as its NDR. With an external DUT
// the ceiling is what the generator offered through it.
//
// Then every DUT is set up in the fwd namespace, warmed up (64 frames
// until some arrive), measured with Run, and torn down, so the
// DUTs alternate within a run: the Linux bridge (kernel), peregrine fwd
// (core/fwd io forwarding between two AF_XDP ports, both directions, one
// busy loop pinned to CPU 1, busy_budget=64 as DPDK's net_af_xdp), then
// dpdk-testpmd (io, net_af_xdp on the same interfaces, -l 0,1). Only
// peregrine fwd searches Repeats times (search_repeatability). The ratios
// are ndr_64b_fwd_vs_testpmd and ndr_1518b_fwd_vs_testpmd (>= 1),
// ndr_64b_fwd_vs_kernel_bridge (>= 2) and search_repeatability (<= 1.10).
//
// With DUTExternal nothing is built: the traffic side opens the two
// ports the user names (VethOptions.TxPort and RxPort, any port spec)
// around their own device and measures it the same way, addressed
// ExternalSrcIP → ExternalDstIP, TX port's MAC → RX port's (or DstMAC).
// OnTrial sees every search trial as it ends (streamed results).
//
// On a two-CPU machine a busy-polling DUT (fwd, testpmd) and the busy
// traffic loop hold both CPUs. RunVeth raises GOMAXPROCS to 4 for the
// run, so that the controller goroutine and the Go runtime are threads of
// their own the kernel slots in, rather than goroutines that wait for the
// scheduler to preempt a busy loop (and hold it back meanwhile); still,
// latencies through those DUTs show the sharing, and a trial whose
// generator was held back anyway is re-run (held-back trials, above).
// Figures that matter come from a machine with a CPU to spare.
//
// # Ownership
//
// A Trialer owns everything it sends and receives; a TrialResult's
// Latency histogram belongs to the caller once returned. Search and Run
// hold no frames and start no goroutines. In the veth harness the traffic
// loop owns every frame: the generator allocates from the loop's cache
// and hands frames to the gen port's TxBurst, the receiver frees what
// RxBurst gave it at once; a trial closed before its generator finished
// has the generator's held frames freed on the loop.
package rfc2544
