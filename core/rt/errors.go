package rt

import "errors"

// ErrBusy is matched (errors.Is) by every refusal that goes away by itself:
// the caller should retry after a Poll or two. The specific reasons below
// match it too. They are returned bare, so a refused Send costs no
// allocation.
var ErrBusy = errors.New("rt: busy, retry after the next poll")

// busyError is a refusal that matches ErrBusy.
type busyError struct{ msg string }

func (e *busyError) Error() string        { return e.msg }
func (e *busyError) Is(target error) bool { return target == ErrBusy }

// Reasons Send refuses a packet for now; each matches ErrBusy.
var (
	// ErrWindowFull: the window already spans WindowSize PSNs, or the
	// congestion window's worth of packets is unacknowledged.
	ErrWindowFull error = &busyError{"rt: send window full (wait for ACKs)"}
	// ErrCAMFull: the retransmission engine tracks CAMCapacity packets.
	ErrCAMFull error = &busyError{"rt: retransmission CAM full (raise Options.CAMCapacity or wait for ACKs)"}
	// ErrNoBuffer: the pool had no mbuf for the packet.
	ErrNoBuffer error = &busyError{"rt: no mbuf for the packet (pool exhausted)"}
	// ErrNotEstablished: the connection is still being set up.
	ErrNotEstablished error = &busyError{"rt: connection not established yet (wait for EventEstablished)"}
)

// Errors that do not go away by retrying.
var (
	// ErrClosed: the connection is closing, closed or failed.
	ErrClosed = errors.New("rt: connection closed")
	// ErrTooLarge: the payload and headers exceed one frame (the port's MTU
	// or the pool's frame).
	ErrTooLarge = errors.New("rt: payload does not fit in one frame")
	// ErrBadType: the packet type has no sliding window, or is one the
	// transport sends itself (ConnClose, Resync).
	ErrBadType = errors.New("rt: packet type cannot be sent by the ULP")
	// ErrTableFull: every connection slot is in use (Options.MaxConns).
	ErrTableFull = errors.New("rt: connection table full (raise Options.MaxConns)")
	// ErrStopped: the endpoint was stopped.
	ErrStopped = errors.New("rt: endpoint stopped")
	// ErrBadPeer: the peer address is unusable (invalid IP, or IPv4 and
	// IPv6 mixed with the local address).
	ErrBadPeer = errors.New("rt: bad peer address")
)

// Reasons a connection fails (Event.Err for EventFailed, Conn.Err).
var (
	// ErrOpenTimeout: the peer never answered ConnOpen (or, on the target,
	// never confirmed ConnAccept) within RetryLimit retries.
	ErrOpenTimeout = errors.New("rt: connection setup timed out")
	// ErrRefused: the peer's accept policy refused the connection.
	ErrRefused = errors.New("rt: connection refused by the peer")
	// ErrRetryExhausted: a packet and the resync standing in for it both
	// ran out of retransmissions; the peer is unreachable.
	ErrRetryExhausted = errors.New("rt: retransmissions exhausted, peer unreachable")
	// ErrPeerReset: the peer does not know the connection (NACK bad-cid).
	ErrPeerReset = errors.New("rt: peer does not know the connection")
	// ErrPeerFatal: the peer's ULP failed and cannot recover (NACK
	// ulp-fatal).
	ErrPeerFatal = errors.New("rt: peer ULP failed fatally")
	// ErrIdleTimeout: nothing arrived from the peer for
	// Options.IdleTimeout (keepalive probes included): it is dead or
	// unreachable.
	ErrIdleTimeout = errors.New("rt: peer silent for the idle timeout")
	// ErrAborted: the local ULP aborted the connection (Conn.Abort).
	ErrAborted = errors.New("rt: connection aborted")
)
