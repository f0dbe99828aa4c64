// Package wire encodes and decodes peregrine's packets: Ethernet, IPv4 or
// IPv6, UDP, the reliable-transport header (docs/transport.md) with its optional
// extensions, and the payload; and, for reading RoCE captures, the RoCEv2
// Base Transport Header. It is the only place that knows byte offsets.
//
// # Buffers and ownership
//
// The package owns no memory. Encoders write into a buffer the caller
// passes (typically an mbuf's data room) and return how many bytes they
// wrote; decoders read a buffer the caller passes and return values
// (Header, Ext, BTH: plain structs with fixed arrays, no slices) plus views
// (Datagram.Data, Frame.Payload, RoCEFrame.Payload, HeaderView) that alias
// that buffer. A view is valid for as long as the caller owns the buffer:
// once the mbuf is freed or handed to Port.TxBurst, drop the views too.
// Nothing is retained between calls, so every function may be called from
// any number of goroutines at once on different buffers.
//
// Encode, DecodeHeader, EncodeFrame and DecodeFrame never allocate (tests
// assert it) and decoders never panic on any input (fuzz targets check it).
//
// Two shortcuts serve the per-packet paths. DecodeFastIPv4 decodes the frame
// most packets are (IPv4 without options, a reliable type with no body or an
// ACK, with no extension but a delivery index, a region and the seal, in
// their encoded order, to a given address) at fixed offsets, and otherwise
// declines and leaves the frame to DecodeFrame; whenever it accepts, the
// result is DecodeFrame's (a fuzz target checks it). A FrameTemplate holds a
// peer's Ethernet, IP and UDP headers prebuilt, so that building a frame to
// that peer copies them and finishes the two checksums; its frames are
// EncodeFrame's byte for byte; EncodeHeaders and AddPayloadSum let a
// sender keep the payload elsewhere and copy it into each frame with
// CopyChecksum, which sums it as it copies (AVX2 on amd64 CPUs that have
// it, 32 bytes at a time; portable add-with-carry otherwise). Checksums are
// summed eight bytes at a time with add-with-carry (csum.go).
// FrameTemplate.Refresh rewrites the fields that change with each
// transmission of a frame built once (flags, retry, piggybacked BSNs,
// timestamps) and updates the UDP checksum incrementally (RFC 1624), the
// retransmission engine's send path.
//
// The package owns the Ethernet/IP/UDP layers for the whole tree: the one
// IPv4 header checksum (IPv4HeaderChecksum), the one incremental update
// (UpdateChecksum, also the fabric's TTL rewrite), and the one builder of
// plain UDP frames (EncodeUDP, and FrameTemplate.PutUDP per frame) that the
// traffic generators use, with the benchmarking addresses BenchmarkSrcIP
// and BenchmarkDstIP.
// Decoders return bare sentinel errors so a flood of malformed packets costs
// no allocation; encoders wrap theirs with the field at fault.
//
// # Frame
//
//	Ethernet (14, untagged) | IPv4 (20, DF, no options) or IPv6 (40) |
//	UDP (8, destination port DefaultPort = 5140 unless configured) |
//	transport base header (48) | type body (0, 4, 8, 12 or 40) |
//	extension chain (4×ExtWords; the seal's 8 on a sealed connection) |
//	payload (PayloadLen)
//
// The UDP checksum covers everything after the IP header; IPv6 always
// carries one, IPv4 may send 0 (Addrs.NoUDPChecksum). The receiver
// recognises the transport by the UDP destination port; the source port is
// free for ECMP entropy: IOI's sprayed (middle) packets each carry their
// own, in 49152..65535, so a switch hashing the 5-tuple spreads them, while
// in-order packets keep the connection's. In-order packets may also carry
// a configured DSCP in the IP header (SetClass writes both). Port 5140 is
// unassigned by IANA. A frame never
// exceeds one IP packet: the transport cuts messages at the MTU itself.
//
// # Transport base header
//
// All fields are big-endian. Bit 0 is the most significant bit of a byte in
// the diagrams; flag values below are the byte's numeric bits.
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-------+-------+-----------------------------------------------+
//	| Ver=1 | Rsvd  |           Destination CID (24)                |  0
//	+-------+-------+---------------+-------+---+---+---------------+
//	|     Type      |     Flags     | Retry |Phs|Rsv|   ExtWords    |  4
//	+---------------+---------------+-------+---+---+---------------+
//	|                   Packet sequence number (PSN)                |  8
//	+---------------------------------------------------------------+
//	|                  Request sequence number (RSN)                | 12
//	+---------------------------------------------------------------+
//	|                Solicitation sequence number (SSN)             | 16
//	+---------------------------------------------------------------+
//	|             Request-window expected BSN (ReqEBSN)             | 20
//	+---------------------------------------------------------------+
//	|               Data-window expected BSN (DataEBSN)             | 24
//	+---------------------------------------------------------------+
//	|               Transmit timestamp, ns mod 2^32 (TxTime)        | 28
//	+---------------------------------------------------------------+
//	|                    Timestamp echo (TxEcho)                    | 32
//	+---------------------------------------------------------------+
//	|             Request length, message bytes (ReqLen)            | 36
//	+---------------------------------------------------------------+
//	|          Segment offset of this payload (Offset)              | 40
//	+-------------------------------+---------------+---------------+
//	|      Payload length (16)      |   HopEcho     |   Reserved    | 44
//	+-------------------------------+---------------+---------------+
//
// The first word alone identifies the connection: a receive classifier
// calls L4Offset and PeekCID and steers the frame by CID before decoding
// anything else.
//
//   - Ver: Version (1). Any other value is ErrVersion.
//   - Destination CID: the CID the receiver allocated for this direction.
//     ConnOpen, sent before the peer allocated one, carries 0.
//   - Type: see the Type constants (1–14; others are ErrType). Type.Window
//     says which sliding window the PSN counts in: PullRequest,
//     PushRequest, PushUnsolicitedData, Send, Resync and ConnClose in the
//     request window; PullData, PushGrant, PushSolicitedData in the data
//     window; Ack, ExtendedAck, Nack, ConnOpen and ConnAccept in none (their
//     PSN field is unused).
//   - Flags: 0x01 AckRequested, 0x02 Retransmission, 0x04 Ordered,
//     0x08 IOIInOrder (S1), 0x10 LastOfMessage, 0x20 ECNEcho,
//     0x40 HasExtension, 0x80 reserved. IOIInOrder (S1, core/ioi): the
//     packet travels on the ordered path (a fabric keeps it on its flow's
//     path, fabric.TransportClassifier) and its receiver processes it in
//     sequence; on such a data packet the SSN field carries its in-order
//     sequence number within its message (0, 1, … over its head and tail,
//     or over every packet of a message sent wholly in order).
//   - Retry (4 bits): resends of this PSN so far. Phs (2 bits): IOI phase
//     of a data packet, 0 none (not IOI: a message below the threshold, a
//     baseline mode, or IOI off), 1 head and 3 tail (always with
//     IOIInOrder), 2 middle (never with it: sprayed). Any other
//     combination, or a phase on a packet that is not push or pull data,
//     is dropped and counted by the receiver (txn IOIStats.Forged). Rsv: 0.
//   - ExtWords: length of the extension chain in 4-byte words; non-zero
//     exactly when HasExtension is set (else ErrExtension).
//   - ReqEBSN, DataEBSN: the sender's receive state for the opposite
//     direction, piggybacked on every packet: the next PSN it expects in
//     each window. Every bit below it is acknowledged.
//   - TxTime: the sender's clock in ns, truncated to 32 bits (wraps every
//     4.29 s). TxEcho: the TxTime of the last packet received from the
//     peer (for an ACK: of the packet that triggered it; for a NACK:
//     exactly the refused packet's, which names that transmission — its
//     sender ignores a NACK whose echo matches none of the PSN's recent
//     transmissions, so the refusal of a forged packet with a live PSN is
//     not taken for its own). RTT = (now - TxEcho) mod 2^32.
//   - HopEcho: the IP hops the echoed packet crossed, which its receiver
//     infers from the TTL (or hop limit) it arrived with: the smallest
//     usual initial value (32, 64, 128, 255) at or above it, minus it
//     (HopsFromTTL). It travels back with TxEcho so the sender's
//     delay-based congestion control can scale its target delay per hop
//     (Swift), as the paper's hosts do from the TTL. ACKs and extended
//     ACKs carry it; other types send 0.
//   - ReqLen, Offset: the whole message's length and where this packet's
//     payload starts in it, so a receiver can place out-of-order packets.
//   - Payload length: bytes after the header, body and extensions; must
//     equal what the UDP datagram holds (ErrLength).
//   - Send (type 14, docs/sends.md): a two-sided send, placed in the target's next
//     posted receive buffer. Its SSN field is the delivery index's
//     dedicated field (its top byte the index's tag: a relative index's
//     base, an absolute index's log2 ring depth, which the receiver
//     checks against its own), and the reserved byte 47 is its descriptor
//     (Header.Desc, core/dix.Desc: index kind, width, whether the index
//     is here or in the Placement extension, whether this packet omits
//     it); other types send byte 47 as 0 and receivers ignore it.
//   - Reserved fields are sent as 0 and ignored on receipt.
//
// # Type bodies
//
// Ack (8 bytes) and ExtendedAck (40 bytes) follow the base header at byte
// 48. The acknowledgement itself is the base header's ReqEBSN and DataEBSN
// (the receiver's BSNs); TxTime is the receiver's send time and TxEcho the
// acked packet's TxTime.
//
//	+---------------+---------------+-------------------------------+
//	|Rsv|Dup|OOW fl.|  RxBufLevel   |        OOWCount (16)          | 48
//	+---------------+---------------+-------------------------------+
//	|          Receive time of the echoed packet (RxTime)           | 52
//	+---------------------------------------------------------------+
//	|                                                               | 56
//	+        Request-window receive bitmap (128, ExtendedAck)       +
//	|                              ...                              |
//	+---------------------------------------------------------------+
//	|                                                               | 72
//	+         Data-window receive bitmap (128, ExtendedAck)         +
//	|                              ...                              |
//	+---------------------------------------------------------------+ 88
//
// The body's fields:
//
//   - OOW flags: 0x01 request window, 0x02 data window — the receiver
//     dropped a packet beyond that window since its previous ACK; the
//     sender should hold off (stop growing and shrink that window).
//   - Dup (bits 0x0c of byte 48, value 1 request window, 2 data window,
//     0 none; 3 reserved, read as none): a duplicate report (DSACK, RFC
//     2883's idea): a reliable packet of that window came again, one the
//     receiver had already (received, or before its window). Its PSN is
//     in the base header's PSN field, which ACKs do not use otherwise.
//     The sender learns that a resend was not needed and widens its
//     reordering window (core/rt). Receivers that predate it send 0 and
//     ignore it: the byte's upper bits were reserved.
//     OOWCount counts those drops (saturating at 65535). RxBufLevel is the
//     receiver's buffer occupancy quantised to 0–255.
//   - RxTime lets the sender take the receiver's turnaround out of the
//     RTT: fabric RTT = (now - TxEcho) - (TxTime - RxTime). Both pairs are
//     on one clock each, so no clock synchronisation is needed.
//   - Bitmaps: bit n stands for PSN eBSN+n of that window and is set when
//     received; the 16 bytes are a bit string, bit n at 0x80>>(n%8) of
//     byte n/8 (Bitmap128).
//
// Nack (12 bytes):
//
//	+---------------+---------------+---------------+---------------+
//	|     Code      |    Window     |   ULP code    |   Reserved    | 48
//	+---------------+---------------+---------------+---------------+
//	|                        NACKed PSN                             | 52
//	+---------------------------------------------------------------+
//	|              RNR timeout, microseconds                        | 56
//	+---------------------------------------------------------------+
//
// Code is a NackCode (1–7, else ErrBody), Window 1 (request) or 2 (data).
//
// Resync (4 bytes): the resync takes the PSN of a packet that will never be
// sent (its transaction failed or was abandoned), so the receiver's window
// can advance; it counts in that packet's window (Header.Window).
//
//	+---------------+---------------+-------------------------------+
//	|     Code      | Original type |           Reserved            | 48
//	+---------------+---------------+-------------------------------+
//
// # Extensions
//
// When HasExtension is set a chain of TLVs follows the body, ExtWords×4
// bytes in all. Each TLV starts with a type byte and a length byte that
// counts 4-byte words including these two bytes. A length of 0 or one that
// runs past the chain is ErrExtension; unknown types are skipped by their
// length; a known type appearing twice is ErrExtension. A known type may be
// longer than listed (later versions may append fields); the extra words are
// skipped. A chain of unknown types only decodes as no extensions
// (Ext.Present 0 and HasExtension cleared in the decoded Flags).
//
//	Placement (the delivery index, docs/sends.md), type 1, 2 words:
//	+---------------+---------------+---------------+---------------+
//	|    Type=1     |     Len=2     |     Mode      |   Reserved    |
//	+---------------+---------------+---------------+---------------+
//	|                        Delivery index                         |
//	+---------------------------------------------------------------+
//	Mode: 1 absolute (a host queue slot such as the receive WQE index),
//	2 relative (from the last acknowledged transaction), 3 free-running
//	(a per-type counter wrapping at the width the Send's descriptor
//	gives). Send packets carry it when their descriptor says the index
//	is in the extension (core/dix, core/rt/txn); the reserved byte stays
//	0 (a relative index's base tag goes in the SSN field's top byte).
//
//	Global QPNs (docs/qp-translation.md), type 2, 2 words:
//	+---------------+---------------+-------------------------------+
//	|    Type=2     |     Len=2     |  Destination global QPN (24)  |
//	+---------------+---------------+---------------+---------------+
//	|   ...dst QPN  |          Source global QPN (24)               |
//	+---------------+-----------------------------------------------+
//	Carried by every reliable packet of an endpoint with global QPNs on
//	(core/rt Options.QPN: ConnOpen/ConnAccept exchange the numbers, the
//	receiver translates the destination QPN through its core/qpx CAM and
//	drops a retired, unknown or misrouted one); absent otherwise.
//
//	Source CID, type 3, 2 words (required on ConnOpen and ConnAccept):
//	+---------------+---------------+-------------------------------+
//	|    Type=3     |     Len=2     |           Reserved            |
//	+---------------+---------------+-------------------------------+
//	|   Reserved    |          Source CID (24)                      |
//	+---------------+-----------------------------------------------+
//
//	Region (remote memory of a push or pull), type 4, 4 words:
//	+---------------+---------------+-------------------------------+
//	|    Type=4     |     Len=4     |           Reserved            |
//	+---------------+---------------+-------------------------------+
//	|                     Region key (target's)                     |
//	+---------------------------------------------------------------+
//	|                   Address in the region (64)                  |
//	+                                                               +
//	|                                                               |
//	+---------------------------------------------------------------+
//	A packet's payload belongs at Address + Offset of that region.
//
//	Seal (the integrity tag, seal.go), type 5, 2 words:
//	+---------------+---------------+-------------------------------+
//	|    Type=5     |     Len=2     |         Tag (bits 47..32)     |
//	+---------------+---------------+-------------------------------+
//	|                        Tag (bits 31..0)                       |
//	+---------------------------------------------------------------+
//	On every packet of a sealed connection but ConnOpen:
//	SipHash-1-3 under the sender's key, truncated to 48 bits
//	(Header.SealTag says which fields it covers: those that name the
//	packet and that its receiver acts on, not the payload, and not what
//	a resend rewrites in place). The receiver drops a packet of a sealed
//	connection whose tag is missing or wrong, unacknowledged (core/rt
//	seal.go).
//	A ConnAccept's tag is Header.HelloTag under the key its ConnOpen
//	announced, bound to that ConnOpen's fields as the target received
//	them; the initiator checks it. A ConnOpen carries none.
//
//	Seal key, type 6, 5 words (ConnOpen and ConnAccept of a sealing end):
//	+---------------+---------------+-------------------------------+
//	|    Type=6     |     Len=5     |           Reserved            |
//	+---------------+---------------+-------------------------------+
//	|                                                               |
//	+                     Key, first word (64)                      +
//	|                                                               |
//	+---------------------------------------------------------------+
//	|                                                               |
//	+                     Key, second word (64)                     +
//	|                                                               |
//	+---------------------------------------------------------------+
//	The key its sender seals that direction's packets with. It travels
//	in clear: the seal stops anyone who did not see the handshake, not
//	an on-path attacker (docs/integrity.md, "The seal"). Ext.String
//	never prints it.
//
// # Connection management
//
// ConnOpen (destination CID 0) carries the initiator's CID in the source-CID
// extension; the target allocates its own CID and answers ConnAccept with
// destination CID = the initiator's and source CID = its own. Both are
// retried by timer and idempotent. ConnClose rides the request window, so
// it takes effect after every earlier request and its ACK confirms it; its
// Offset field carries the sender's final data-window sequence number (the
// NSN after its last data packet), so the receiver knows when both windows
// are complete before it tears the connection down.
//
// An early ConnOpen (core/rt OpenEarly: data follows it before ConnAccept)
// says so with ReqLen 0x44430002 ("DC", version 2) and announces the
// initiator's initial PSNs (PSN: request window, Offset: data window), its
// incarnation (RSN, never 0: drawn when the endpoint starts) and a connect
// number (SSN, never 0, one counter per incarnation), which the target's
// replay cache checks so that a copy of an old early ConnOpen is refused
// (core/rt dcconnect.go, "Replay"). A plain ConnOpen sends those fields as 0.
// ConnOpen and ConnAccept of an end that seals carry its seal key; a
// connection is sealed when both did (core/rt seal.go), and then its
// ConnAccept carries the seal too (see Seal above).
//
// # RoCEv2
//
// BTH, DecodeBTH, EncodeRoCEFrame and DecodeRoCEFrame read and write the
// InfiniBand Base Transport Header over UDP port 4791 and the ICRC, so
// `peregrine decode` can show RoCE captures next to ours. The gopacket
// layers for both live in the wirelayers subpackage.
package wire
