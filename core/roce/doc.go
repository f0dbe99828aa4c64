// Package roce is the QP-translation stage for real RoCEv2 (docs/qp-translation.md, on
// InfiniBand's own wire): a poll-mode stage between a network port, where
// frames name queue pairs by 24-bit global QPNs, and a host port, where
// they name them by local QP numbers, the index of a local context in a
// core/qpx table.
//
// Network → host (the packet disassembler): each RoCEv2 frame (UDP port
// Options.UDPPort, 4791 by default; untagged, 802.1Q-tagged or QinQ, over
// IPv4 with or without options or IPv6) is parsed in place (wire.ParseRoCE:
// BTH and the opcode's extended headers — RETH, AETH, DETH …), its ICRC
// checked (the IBA invariant CRC: eight 0xFF bytes for the LRH, then the
// IP, UDP and BTH headers with IP TOS/TTL/checksum or traffic class/flow
// label/hop limit, the UDP checksum and the BTH's FECN/BECN/reserved byte
// masked to ones, then the rest up to the ICRC), its destination QPN
// translated through the CAM to a local context (a retired number is a
// stale packet: dropped and counted; so is an unknown one), the access the
// opcode needs checked against the context (RDMA WRITE, READ, atomics),
// its PSN checked against the context's expected PSN (requests only;
// responses carry the requester's PSNs), and the BTH's destination QP
// rewritten to the local number, the UDP checksum (if any) updated, and a
// new ICRC written.
//
// Host → network (the packet builder): the host names its QP by its local
// number in the BTH's destination QP; the stage takes that context, checks
// the PSN against its NextPSN, writes the peer's global QPN and the P_Key
// from the context, and a new ICRC.
//
// A PSN ahead of the expected one is counted out of sequence (and moves
// the expectation past it), one behind counted a duplicate; both pass,
// since the endpoint past the stage is the responder that NAKs or
// re-acknowledges them. Options.StrictPSN drops the ones ahead and leaves
// the expectation where it was, so one loss upstream costs the requester
// one go-back-N resend and a forged far-ahead PSN moves nothing;
// duplicates pass even then, or a lost acknowledgement would lock the
// queue pair. An RDMA READ request occupies one PSN per response packet
// (its DMA length over Options.PMTU). Frames that are not RoCEv2 at all
// (ARP, other UDP) pass untouched both ways and are counted; a RoCEv2
// datagram the stage cannot locate (behind IPv6 extension headers) is
// dropped, never passed on untranslated. Every drop has its reason's
// counter (Stats).
//
// # Who owns a frame
//
// The stage owns each frame from RxBurst until TxBurst accepts it, and
// rewrites it in place (it never copies); frames the output refuses are
// freed to the loop's cache and counted (DropTxFull), as fwd's io mode
// does. The qpx table is the caller's: the stage reads and updates
// contexts (PSNs) from its loop, so the table must not be used from
// another goroutine while the stage runs (open and close QPs before Start,
// or from the same loop). Stats may be read from any goroutine; they are
// published once per Poll.
package roce
