// Package fabric emulates the network between two ports: the loss,
// reordering, delay, rate limits and multipath spraying that the kernel's
// netem would give us if this kernel had it. A Fabric is a two-port
// middlebox and an lcore.Stage: every Poll moves frames from port A to port
// B and from B to A, each direction through its own Profile of impairments,
// decided per frame from seeded random streams.
//
// It runs two ways, with the same code:
//
//   - in process, on a virtual clock: Link makes two mem pairs with a fabric
//     between them, the transport's endpoints use the two outer ports, and
//     the simulation polls the fabric at the times it chooses, jumping the
//     clock to NextDeadline when idle;
//   - as a middlebox between two real ports (afxdp, afpacket), polled by an
//     lcore loop on the real clock (the peregrine fabric subcommand).
//
// Nothing reads a clock by itself: the only time is the now given to Poll.
//
// # The model, per direction
//
// A frame arrives at the now of the Poll that takes it from the input port,
// then meets, in order:
//
//  1. Random loss (Profile.Loss), then Gilbert-Elliott burst loss
//     (Profile.Burst): before each frame the two-state chain moves
//     good→bad with probability P or bad→good with probability R, then the
//     frame is lost with the current state's loss probability. Losses come
//     in runs of mean length 1/R (with 100 % loss in the bad state).
//  2. Duplication (Profile.Dup): the copy is a new frame from the pool with
//     the same bytes and metadata, made before any corruption, that goes on
//     through steps 3-7 on its own, right after its original (its own
//     corruption draw, path, jitter). A lost frame is never duplicated.
//     When the pool is empty the copy is skipped and counted (DupNoBuf).
//  3. The delay line's bound (Profile.Limit): a direction holds at most
//     Limit frames; beyond that frames are tail-dropped (LimitFull). Then
//     the routers (Profile.Hops): an IPv4 frame's TTL or an IPv6 frame's
//     hop limit goes down by Hops (the IPv4 header checksum updated
//     incrementally), and a frame that had no more than Hops left is
//     dropped (TTLExpired), as a router drops it; receivers that infer the
//     path's length from the TTL see Hops routers.
//  4. The rate limiter (Profile.Rate): one serialising link shared by the
//     direction's paths. A frame of n bytes occupies it for
//     (n+Overhead)*8/Rate seconds, starting when the link is free (exact
//     over time: the fractions of a nanosecond carry over). Its queue holds
//     the frames not yet fully serialised, including the one on the wire,
//     and is bounded in frames or bytes; a frame that does not fit is
//     tail-dropped (QueueFull).
//  5. Corruption (Profile.Corrupt): one bit, uniform over the frame past its
//     14-byte Ethernet header (so MACs and EtherType survive and the frame
//     still reaches the transport, which must catch the damage), or
//     anywhere with CorruptL2.
//  6. Path choice (Profile.Paths): path i adds i*Spread (or PathDelay[i])
//     to the delay. A frame classified in-order takes the path its flow
//     hash picks, so a flow stays on one path; other frames are sprayed
//     (Profile.Spray): round-robin (the default: deals evenly, so a
//     benchmark's paths carry equal shares), at random, by entropy (the
//     frame's own 5-tuple hash, as an ECMP switch: a sender that varies
//     the UDP source port per packet, as IOI's sprayed packets do, is
//     spread, and one that does not stays on one path), or adaptively
//     (the path whose own link frees earliest, as adaptive routing picks
//     the least backlog; it evens out the load in-order frames put on
//     their one path). Options.Classify says which frames are in order and
//     gives their flow hash (TransportClassifier: the IOIInOrder flag or a
//     DSCP value); without it every frame is in order and hashed by
//     Meta.FlowHash or FlowHash (the IPv4/IPv6 5-tuple). Each path may have its own capacity (Profile.PathRate, PathQueue,
//     PathLoss, PathDown): the frame meets the path's own serialising
//     link (after the direction's shared one, Rate, which stands for the
//     sender's access link) and its queue of PathQueue frames,
//     tail-dropped beyond (PathQueueFull); then it is lost on its path
//     with PathLoss, or for good when the path is down (PathDown: a black
//     hole beyond the switch, which spraying does not see). Loss comes
//     after the link so that a lossy or dead path is as busy as the
//     frames sent down it make it, and adaptive spraying gives it its
//     share, not the most. Path i's frames, bytes, queue peak and drops
//     are counted (DirStats.PathDetail).
//  7. Release time = when the rate limiters finished it (or arrival) + its
//     path's delay + jitter in [0, Jitter] (uniform, or normal with mean
//     Jitter/2 and deviation Jitter/4, redrawn until inside). With
//     OrderFIFO (the default) a path is a FIFO: a release earlier than the
//     path's previous one is raised to it, so jitter delays frames but does
//     not reorder a path (and, without a rate limit, a release stays within
//     [arrival+delay, arrival+delay+jitter]). With OrderFree each frame
//     leaves at its own time and jitter reorders, as in netem. Reordering
//     (Profile.Reorder) holds a frame back by an extra ReorderDelay outside
//     its path's FIFO discipline, so the frames behind it overtake it. (Netem
//     instead sends the picked frame at once, ahead of delayed ones; holding
//     back works without a base delay too, and the held frame's lateness is
//     a chosen number.)
//
// Frames are released in (release time, arrival order) order, up to one
// burst per direction per Poll, to the output port, with Meta.RxTime set to
// that Poll's now (a receiver on a mem port sees when the frame was
// delivered). Frames the output refuses are kept and offered again first on
// the next Poll (TxRefused).
//
// # Changes at run time
//
// A fault can be scripted: SetProfile replaces a direction's profile,
// SetLinkDown takes a direction (or both) down and up, and SetPathDown one
// of its paths, between Polls on the
// polling goroutine; Schedule queues such Changes for virtual (or real)
// times, applied by the first Poll at or after each, and NextDeadline stops
// a simulation's clock there. A new profile applies to the frames taken
// from then on: held frames keep their release times and each random
// stream goes on where it was. A down direction drops every frame it takes
// (LinkDown) and every held frame due while it is down (LinkCut), both
// fates of the conservation law. Neither allocates per frame.
//
// # Determinism
//
// Each direction, and within it each impairment, draws from its own PCG
// stream derived from Options.Seed, so the directions do not perturb each
// other and switching on one impairment does not change which frames
// another picks. The same seed, the same input frames in the same order and
// the same Poll times give the same output: the same frames, bytes and
// release times.
//
// # Buffer ownership
//
// The fabric owns every frame from the RxBurst that takes it until the
// output's TxBurst accepts it, or until it drops it: dropped frames go back
// to the pool through the fabric's mbuf cache. Duplicates are allocated
// from Options.Pool through the same cache. Stop and Close free every frame
// still held and flush the cache. Options.Classify sees each frame's bytes
// during Poll only. The ports themselves stay the caller's, except the two
// fabric-side ends that Link makes, which Close closes.
//
// # Memory and cost
//
// New allocates everything: per direction a delay line of Limit entries
// (per-path FIFO lists in one slot array plus a heap for frames that would
// overtake their path's tail), the rate limiter's departure ring, and the
// burst arrays. Poll allocates nothing and takes no lock; counters are
// published to atomics once per Poll that moved frames.
//
// # Profiles
//
// ParseProfile reads the compact form the CLI and configs use, e.g.
//
//	loss=1%,burst=0.5%/30%/50%,dup=0.1%,reorder=5%/200us,corrupt=0.01%,
//	delay=50us,jitter=10us,rate=10gbit,queue=1000,paths=4,spread=20us
//
// or, for paths with their own capacity (one value for all, or one each),
//
//	paths=4,path-rate=1gbit,path-delay=0/2us/5us/10us,path-queue=200,spray=adaptive
//
// and a path that is down, path-down=2,
//
// and Profile.String writes it back (see ProfileSyntax for every key).
package fabric
