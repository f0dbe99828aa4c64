package rt

import "sync/atomic"

// Counter indices: the endpoint bumps plain counters on its goroutine and
// publishes them to atomics at the end of every Poll that did work.
const (
	cRxFrames = iota
	cRxNotTransport
	cRxBadVersion
	cRxMalformed
	cRxBadChecksum
	cRxNotForUs
	cRxUnknownCID
	cRxStaleCID
	cRxBadState
	cRxDelivered
	cRxDuplicate
	cRxStalePSN
	cRxOutOfWindow
	cRxRefused
	cRxDropped
	cRxResync
	cRxAck
	cRxExtendedAck
	cRxNack
	cNackStale
	cAckStale
	cAckForged
	cAckRetired
	cTxFrames
	cTxData
	cTxRetransmit
	cTxEarlyRetransmit
	cTxAck
	cTxExtendedAck
	cTxNack
	cTxControl
	cTxRefused
	cNoBuffer
	cCAMFull
	cConnOpened
	cConnAccepted
	cConnRejected
	cConnDupOpen
	cConnEstablished
	cConnClosed
	cConnFailed
	cResyncSent
	cAbandoned
	cRTTSamples
	cRxBadSource
	cTxBadCIDNack
	cBadCIDNackSuppressed
	cKeepAliveSent
	cIdleTimeouts
	cGivenUp
	cAwaitProbes
	cSpuriousEarly
	cRefunds
	cNackForged
	cTxDupReport
	cRxDupReport
	cSpuriousDup
	cEarlyReplays
	cReplayCacheFull
	cGiveUpNotices
	cReclaimProbes
	cSpuriousTimeout
	cSpuriousRTO
	cTimeoutAsks
	cRxBadSeal
	cInternal
	numCounters
)

// Stats are an endpoint's counters. They only grow. Every frame received
// is counted in RxFrames and then in exactly one of the drop reasons
// (NotTransport … BadState, BadSource), or processed.
type Stats struct {
	RxFrames       uint64 // frames taken from the port
	RxNotTransport uint64 // not Ethernet/IP/UDP carrying a transport header
	RxBadVersion   uint64 // transport version is not wire.Version
	RxMalformed    uint64 // failed to decode (length, type, body, extension)
	RxBadChecksum  uint64 // IP or UDP checksum mismatch
	RxNotForUs     uint64 // another IP or UDP port
	RxUnknownCID   uint64 // destination CID outside the table
	RxStaleCID     uint64 // destination CID of a closed connection (or never issued)
	RxBadState     uint64 // a packet the connection's state does not expect
	RxDelivered    uint64 // reliable packets handed to the deliver function
	RxDuplicate    uint64 // reliable packets already received (dropped)
	RxStalePSN     uint64 // reliable packets before the receive window (dropped)
	RxOutOfWindow  uint64 // reliable packets past the receive window (dropped)
	RxRefused      uint64 // packets the deliver function refused (NACKed)
	RxDropped      uint64 // packets the deliver function dropped (Drop: neither acknowledged nor NACKed)
	RxResync       uint64 // resyncs accepted in place of a packet
	RxAck          uint64 // ACKs received
	RxExtendedAck  uint64 // extended ACKs received
	RxNack         uint64 // NACKs received
	NackStale      uint64 // ULP-error NACKs for packets already resolved (repeats)
	AckStale       uint64 // acknowledgements (per window) older than the window
	AckForged      uint64 // acknowledgements (per window) of PSNs never sent
	AckRetired     uint64 // packets retired by acknowledgements

	TxFrames          uint64 // frames the port accepted
	TxData            uint64 // first transmissions of reliable packets
	TxRetransmit      uint64 // resends after a timeout or an RNR NACK (and resyncs)
	TxEarlyRetransmit uint64 // resends of holes before their timeout
	TxAck             uint64 // ACKs built
	TxExtendedAck     uint64 // extended ACKs built
	TxNack            uint64 // NACKs built
	TxControl         uint64 // ConnOpen and ConnAccept built
	TxRefused         uint64 // frames the port refused (kept, offered again)
	NoBuffer          uint64 // mbuf allocations that failed
	CAMFull           uint64 // sends refused because the CAM was full

	ConnOpened      uint64 // Open calls that took a slot
	ConnAccepted    uint64 // ConnOpens that made a connection
	ConnRejected    uint64 // ConnOpens refused (policy or full table)
	ConnDupOpen     uint64 // repeated ConnOpens answered again
	ConnEstablished uint64
	ConnClosed      uint64
	ConnFailed      uint64
	ResyncSent      uint64 // packets abandoned after RetryLimit, a resync sent in their place
	Abandoned       uint64 // resyncs acknowledged: the packet's fate is unknown
	RTTSamples      uint64

	// RxBadSource counts packets for a live connection that came from
	// another IP address or UDP port than the connection's peer (dropped).
	RxBadSource uint64
	// RxBadSeal counts packets of a sealed connection whose integrity tag
	// is missing or wrong (seal.go): dropped unacknowledged, so the real
	// packet with that PSN still wins.
	RxBadSeal uint64
	// TxBadCIDNack counts bad-CID NACKs sent for frames to a CID that
	// names no connection here; BadCIDNackSuppressed the ones the rate
	// limit (Options.BadCIDNackRate) held back.
	TxBadCIDNack         uint64
	BadCIDNackSuppressed uint64
	// KeepAliveSent counts keepalive probes (Options.KeepAlive);
	// IdleTimeouts the connections failed with ErrIdleTimeout.
	KeepAliveSent uint64
	IdleTimeouts  uint64
	// AwaitProbes counts the probes of a silent peer sent while the ULP
	// awaits it (Conn.SetAwaiting), apart from KeepAliveSent's
	// (Options.KeepAlive): these find a dead peer of work in progress.
	AwaitProbes uint64
	// GivenUp counts packets the ULP gave up on (Conn.Abandon: an
	// operation timed out or was cancelled), a resync sent in their place
	// at once; their resyncs' acknowledgements count in Abandoned.
	GivenUp uint64
	// SpuriousEarlyRetransmit counts early resends found unneeded by
	// timing: the packet's ACK came sooner than the resend could have
	// earned (half the least RTT; the least itself with
	// Options.NoDupReports), so an earlier transmission arrived. Each
	// widens the connection's reordering window (retx.go, detectLoss).
	SpuriousEarlyRetransmit uint64
	// SpuriousTimeout counts timer resends found unneeded (the peer's
	// duplicate report of the resend; without reports, an ACK too soon
	// for it): the packet was waiting, not lost, and the timeout learns to
	// cover such a wait (rtt.go, rttEstimator.stall).
	SpuriousTimeout uint64
	// SpuriousRTO counts retransmit timeouts the next ACK showed spurious
	// (F-RTO: it acknowledged a packet sent before the timeout and never
	// resent): only the window's oldest packet had been resent, the rest
	// were held and not sent, and the congestion response was taken back
	// (retx.go, frtoHold). One per timeout, not per packet.
	SpuriousRTO uint64
	// TimeoutAsks counts retransmit timeouts that asked the peer for an
	// ACK instead of resending (retx.go, frtoHold): nothing past the
	// window's oldest packet had been acknowledged, so the timeout could
	// not tell a loss from a peer that is off its CPU, and only the
	// answer shows which packets are missing.
	TimeoutAsks uint64
	// Refunds counts transmissions given back to a packet's retry budget
	// because the peer refused them as out of window (an in-order packet
	// past a gap: it arrived, it was not lost).
	Refunds uint64
	// NackForged counts NACKs that name a PSN of ours but not the packet
	// we sent with it (their echo matches none of its transmissions: a
	// refusal of a forged packet, or a forged NACK), ignored whole.
	NackForged uint64
	// TxDupReport counts ACKs that told the peer a packet it sent came
	// again (a PSN already received: wire.AckDupRequest/AckDupData);
	// RxDupReport the reports received, and SpuriousDupReport those that
	// showed a resend of ours was not needed (each widens the
	// connection's reordering window, like SpuriousEarlyRetransmit).
	TxDupReport, RxDupReport, SpuriousDupReport uint64
	// EarlyReplays counts early ConnOpens refused as replays (a connect
	// number of their initiator's incarnation accepted already, or too old:
	// dcconnect.go, Replay); ReplayCacheFull those refused for now because
	// the replay cache had no record to spare for a new incarnation.
	EarlyReplays    uint64
	ReplayCacheFull uint64
	// GiveUpNotices counts the bad-CID NACKs this side sent its peer when
	// it gave up on a connection (retries or idle timeout ran out, the
	// setup timed out), so the peer ends its half at once if the path to
	// it works; ReclaimProbes the probes sent to silent connections when a
	// ConnOpen found the table full.
	GiveUpNotices uint64
	ReclaimProbes uint64
	// Internal counts states that should be impossible (a bug); tests
	// assert it stays 0.
	Internal uint64
}

type counters struct {
	own [numCounters]uint64
	pub [numCounters]atomic.Uint64
}

func (c *counters) publish() {
	for i := range c.own {
		if c.pub[i].Load() != c.own[i] {
			c.pub[i].Store(c.own[i])
		}
	}
}

func (c *counters) snapshot() Stats {
	var v [numCounters]uint64
	for i := range v {
		v[i] = c.pub[i].Load()
	}
	return Stats{
		RxFrames: v[cRxFrames], RxNotTransport: v[cRxNotTransport], RxBadVersion: v[cRxBadVersion],
		RxMalformed: v[cRxMalformed], RxBadChecksum: v[cRxBadChecksum], RxNotForUs: v[cRxNotForUs],
		RxUnknownCID: v[cRxUnknownCID], RxStaleCID: v[cRxStaleCID], RxBadState: v[cRxBadState],
		RxDelivered: v[cRxDelivered], RxDuplicate: v[cRxDuplicate], RxStalePSN: v[cRxStalePSN],
		RxOutOfWindow: v[cRxOutOfWindow], RxRefused: v[cRxRefused], RxDropped: v[cRxDropped], RxResync: v[cRxResync],
		RxAck: v[cRxAck], RxExtendedAck: v[cRxExtendedAck], RxNack: v[cRxNack], NackStale: v[cNackStale],
		AckStale: v[cAckStale], AckForged: v[cAckForged], AckRetired: v[cAckRetired],
		TxFrames: v[cTxFrames], TxData: v[cTxData], TxRetransmit: v[cTxRetransmit],
		TxEarlyRetransmit: v[cTxEarlyRetransmit], TxAck: v[cTxAck], TxExtendedAck: v[cTxExtendedAck],
		TxNack: v[cTxNack], TxControl: v[cTxControl], TxRefused: v[cTxRefused],
		NoBuffer: v[cNoBuffer], CAMFull: v[cCAMFull],
		ConnOpened: v[cConnOpened], ConnAccepted: v[cConnAccepted], ConnRejected: v[cConnRejected],
		ConnDupOpen: v[cConnDupOpen], ConnEstablished: v[cConnEstablished], ConnClosed: v[cConnClosed],
		ConnFailed: v[cConnFailed], ResyncSent: v[cResyncSent], Abandoned: v[cAbandoned],
		RTTSamples:  v[cRTTSamples],
		RxBadSource: v[cRxBadSource], RxBadSeal: v[cRxBadSeal], TxBadCIDNack: v[cTxBadCIDNack], BadCIDNackSuppressed: v[cBadCIDNackSuppressed],
		KeepAliveSent: v[cKeepAliveSent], IdleTimeouts: v[cIdleTimeouts],
		AwaitProbes: v[cAwaitProbes], GivenUp: v[cGivenUp], SpuriousEarlyRetransmit: v[cSpuriousEarly],
		Refunds: v[cRefunds], NackForged: v[cNackForged],
		TxDupReport: v[cTxDupReport], RxDupReport: v[cRxDupReport], SpuriousDupReport: v[cSpuriousDup],
		EarlyReplays: v[cEarlyReplays], ReplayCacheFull: v[cReplayCacheFull],
		GiveUpNotices: v[cGiveUpNotices], ReclaimProbes: v[cReclaimProbes],
		SpuriousTimeout: v[cSpuriousTimeout], SpuriousRTO: v[cSpuriousRTO], TimeoutAsks: v[cTimeoutAsks],
		Internal: v[cInternal],
	}
}

// ConnStats are one connection's counters, read on the polling goroutine.
type ConnStats struct {
	Sent              uint64 // reliable packets accepted by Send (and ConnClose)
	Delivered         uint64 // reliable packets handed to the deliver function
	Retransmits       uint64 // timeout resends
	EarlyRetransmits  uint64 // early resends of holes
	Duplicates        uint64 // duplicate arrivals dropped
	AcksSent          uint64
	AcksReceived      uint64
	SRTT, RTTVar, RTO int64 // nanoseconds
	// PathHops is how many IP hops the latest RTT-sampled ACK reported its
	// packet crossed (the peer reads it from the TTL; a fabric with
	// Profile.Hops, or routers, lower it); 0 before the first sample.
	PathHops uint8
}
