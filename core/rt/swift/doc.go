// Package swift is a delay-based congestion controller for one connection of
// the reliable transport, after Swift (Kumar et al., "Swift: Delay is Simple
// and Effective for Congestion Control in the Datacenter", SIGCOMM 2020) as
// Google published it for Falcon in its isekai simulator
// (github.com/falcon-transport/isekai, isekai/host/falcon/rue/algorithm/
// swift.h and swift.cc). This is an independent implementation of the
// fabric window only; the NIC (receiver buffer) window, PLB re-pathing and
// Falcon's fixed-point formats are left out.
//
// # Algorithm
//
// The controller keeps a congestion window cwnd, in packets, as a float64
// in [MinCwnd, MaxCwnd], and compares each ACK's fabric delay (the round
// trip minus the receiver's turnaround) with a target:
//
//	target = BaseTarget + Hops*PerHopTarget + fs(cwnd)
//	fs(cwnd) = FlowScalingRange * clamp((1/sqrt(cwnd) - 1/sqrt(FlowScalingMaxCwnd)) /
//	                                    (1/sqrt(FlowScalingMinCwnd) - 1/sqrt(FlowScalingMaxCwnd)), 0, 1)
//
// Flow scaling raises the target as the window shrinks: when many flows
// share a bottleneck each has a small window and the queue they settle on
// grows (about as sqrt(flows) while the windows lie between the two
// scaling bounds), so that every flow keeps packets queued
// and the link stays busy, while the 1/sqrt(cwnd) slope pushes a flow with
// a larger window than its peers down harder, which makes shares converge.
// The target uses the window in force when the ACK arrives (isekai does the
// same; isekai writes the curve as alpha/sqrt(cwnd)+beta, the same line).
//
// On an ACK with a sample (OnAck):
//
//	delay < target:  cwnd += AI*acked/cwnd   (cwnd >= 1)
//	                 cwnd += AI*acked        (cwnd <  1: one ACK per round trip)
//	delay >= target: cwnd *= max(1 - Beta*(delay-target)/delay, 1 - MaxMDF),
//	                 only if the last decrease was at least one delay ago
//
// An ACK without a sample moves no window. Every ACK that acknowledges a
// packet ends a run of timeouts.
//
// On a retransmission (OnRetransmit):
//
//   - Timeout: a transport with a timer per packet reports a whole lost
//     flight as many timeouts within a round trip; those within SRTT of the
//     first are one episode (before the first RTT sample, every timeout
//     until an ACK: there is no round trip yet to tell a lost flight from
//     a later loss). Each new episode with no ACK since the last one
//     counts; the RetxResetThreshold-th sets cwnd to MinCwnd, earlier ones
//     cut cwnd by MaxMDF (at most once per SRTT, like every decrease).
//   - Early retransmission (fast recovery: an extended ACK revealed a hole):
//     the path is delivering, so the timeout count restarts. By default the
//     window is not cut; the delay signal has already seen the congestion
//     that caused the loss, and a loss from corruption costs nothing. This
//     is Google's Falcon default (max_decrease_on_eack_nack_drop false).
//     With CutOnEarlyRetransmit it is cut by MaxMDF at most once per SRTT,
//     the paper's fast-recovery rule.
//
// A decrease is any step that lowers cwnd; it stamps the time, and no
// delay-driven decrease or retransmit cut happens until one round trip
// (the ACK's delay, or SRTT for retransmits) has passed since. Increases
// are never held back.
//
// # Sending
//
// Window is floor(cwnd), at least 1: the transport keeps at most that many
// packets unacknowledged. Below one packet the connection is paced
// instead: PacingGap is SRTT/cwnd, the least time between the starts of
// two packets, so the connection sends cwnd packets per round trip (0 when
// cwnd >= 1 and before the first RTT sample). SRTT is the sample's
// exponential average with weight 3/4 on the old value (isekai's
// rtt_smoothing_alpha); the delay itself is not smoothed (isekai's
// delay_smoothing_alpha is 0).
//
// # Parameters
//
// DefaultParams holds Google's published defaults from isekai, converted
// from Falcon's 131.072ns time unit: BaseTarget 25µs (fabric_base_delay
// 191 units), PerHopTarget 1µs (topo_scaling_per_hop 8 units), flow scaling
// up to 100µs (max_flow_scaling) between windows 0.1 and 256, AI 1, Beta
// 0.8, MaxMDF 0.5, cwnd in [0.01, 256], InitialCwnd 32 (isekai's
// default_config_generator.cc), RetxResetThreshold 3 (retransmit_limit).
// Hops defaults to 0 and holds only until the transport measures the path:
// each ACK echoes the hops its data packet crossed (the receiver infers
// them from the IP TTL, wire.HopsFromTTL), and core/rt passes a changed
// count to SetHops, as Swift's hosts do. For incasts of
// thousands of flows MinCwnd may be set lower (e.g. 0.001); PacingGap then
// reaches 1000 round trips.
//
// # Who owns what
//
// A Controller is a plain value with no pointers and no buffers: the
// transport embeds one per connection slot in its preallocated table and
// calls Init when the slot is opened. Everything it holds is its own
// state; the calls take and return values only, and none allocates. It
// belongs to the connection's polling goroutine and has no locks. Time
// enters as a clock.Time argument; the controller never reads a clock.
package swift
