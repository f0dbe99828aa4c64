package peregrine

import (
	"context"
	"errors"
	"fmt"

	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/rt/txn"
)

// The error vocabulary. Every error the package returns matches exactly one
// of these with errors.Is (a cancelled call matches ErrCancelled and the
// context's own error too), wrapped with what failed and why.
var (
	// ErrClosed: the endpoint, the listener or the connection is closed
	// (by this side, or cleanly by the peer), or the connection was
	// aborted.
	ErrClosed = errors.New("peregrine: closed")
	// ErrTimeout: the operation's deadline passed (the context's deadline
	// is not this: that is ErrCancelled with context.DeadlineExceeded), or
	// the peer never answered a Dial.
	ErrTimeout = errors.New("peregrine: timed out")
	// ErrCancelled: the caller's context ended the operation; the error
	// also matches ctx.Err() (context.Canceled or
	// context.DeadlineExceeded).
	ErrCancelled = errors.New("peregrine: cancelled")
	// ErrRefused: the peer refused the connection (it has no listener).
	ErrRefused = errors.New("peregrine: connection refused")
	// ErrBusy: a queue is full for now (the submission ring, a completion
	// queue, the peer's receive slots through every retry); retrying
	// later may succeed.
	ErrBusy = errors.New("peregrine: busy")
	// ErrTooLarge: a message longer than the peer's receive slots (or than
	// the caller's receive buffer), or than the transport carries.
	ErrTooLarge = errors.New("peregrine: message too large")
	// ErrPeerGone: the connection failed: the peer stopped answering (its
	// retries and keepalives exhausted), reset or lost the connection.
	ErrPeerGone = errors.New("peregrine: peer gone")
	// ErrAbandoned: one operation's packets ran out of retries (or the
	// peer's did) while the connection lives on; the remote span (a push)
	// or the local one (a pull) may hold part of the data.
	ErrAbandoned = errors.New("peregrine: operation abandoned after its retries")
	// ErrRemoteAccess: the peer refused the remote region of a push or a
	// pull: unknown key, no such access, or too small for the span.
	ErrRemoteAccess = errors.New("peregrine: remote region refused")
	// ErrInvalid: an argument or option is wrong; the message says which.
	ErrInvalid = errors.New("peregrine: invalid argument")
	// ErrNotSupported: an option this package does not wire yet.
	ErrNotSupported = errors.New("peregrine: not supported")
)

// Status is how an operation ended, the one status type of the package:
// the transport's own (core/rt/txn Status, with its nearest ibv_wc_status)
// plus the endings that happen above it. Status.Err turns it into the
// error vocabulary above.
type Status uint8

// Statuses. The first eleven are the transport's, in its order.
const (
	StatusOK               Status = Status(txn.StatusOK)               // IBV_WC_SUCCESS
	StatusRemoteAccess     Status = Status(txn.StatusRemoteAccess)     // IBV_WC_REM_ACCESS_ERR
	StatusAbandoned        Status = Status(txn.StatusAbandoned)        // IBV_WC_RETRY_EXC_ERR, connection lives on
	StatusConnFailed       Status = Status(txn.StatusConnFailed)       // the connection failed or closed under it
	StatusRemoteAbandoned  Status = Status(txn.StatusRemoteAbandoned)  // IBV_WC_REM_ABORT_ERR
	StatusTimeout          Status = Status(txn.StatusTimeout)          // IBV_WC_RESP_TIMEOUT_ERR
	StatusCancelled        Status = Status(txn.StatusCancelled)        // cancelled (context or Op.Cancel)
	StatusFlushed          Status = Status(txn.StatusFlushed)          // IBV_WC_WR_FLUSH_ERR: the connection was aborted
	StatusRNRRetryExceeded Status = Status(txn.StatusRNRRetryExceeded) // IBV_WC_RNR_RETRY_EXC_ERR: no receive slot free at the peer
	StatusRemoteInvalid    Status = Status(txn.StatusRemoteInvalid)    // IBV_WC_REM_INV_REQ_ERR: longer than the peer's slot
	StatusLocalLength      Status = Status(txn.StatusLocalLength)      // IBV_WC_LOC_LEN_ERR: longer than the receive buffer
)

// Statuses of the endings above the transport.
const (
	// StatusClosed: the endpoint or the connection was closed before the
	// operation could run or finish.
	StatusClosed Status = 32 + iota
	// StatusRefused: the peer refused the connection (Dial).
	StatusRefused
	// StatusPeerGone: the connection failed under the operation.
	StatusPeerGone
	// StatusInvalid: the operation was refused before it started (a bad
	// argument, an option not supported).
	StatusInvalid
	// StatusBusy: refused for now.
	StatusBusy
	// StatusNotSupported: an option this package does not wire yet.
	StatusNotSupported
)

func (s Status) String() string {
	switch s {
	case StatusClosed:
		return "closed"
	case StatusRefused:
		return "refused"
	case StatusPeerGone:
		return "peer-gone"
	case StatusInvalid:
		return "invalid"
	case StatusBusy:
		return "busy"
	case StatusNotSupported:
		return "not-supported"
	}
	if s <= StatusLocalLength {
		return txn.Status(s).String()
	}
	return fmt.Sprintf("status(%d)", uint8(s))
}

// Err is the sentinel error a status matches (nil for StatusOK).
func (s Status) Err() error {
	switch s {
	case StatusOK:
		return nil
	case StatusRemoteAccess:
		return ErrRemoteAccess
	case StatusAbandoned, StatusRemoteAbandoned:
		return ErrAbandoned
	case StatusConnFailed, StatusPeerGone:
		return ErrPeerGone
	case StatusTimeout:
		return ErrTimeout
	case StatusCancelled:
		return ErrCancelled
	case StatusFlushed, StatusClosed:
		return ErrClosed
	case StatusRNRRetryExceeded, StatusBusy:
		return ErrBusy
	case StatusRemoteInvalid, StatusLocalLength:
		return ErrTooLarge
	case StatusRefused:
		return ErrRefused
	case StatusNotSupported:
		return ErrNotSupported
	}
	return ErrInvalid
}

// statusOf classifies an error of the layers below (core/rt, core/rt/txn)
// and of this package into a Status.
func statusOf(err error) Status {
	switch {
	case err == nil:
		return StatusOK
	case errors.Is(err, ErrClosed), errors.Is(err, rt.ErrAborted), errors.Is(err, rt.ErrStopped),
		errors.Is(err, rt.ErrClosed), errors.Is(err, txn.ErrClosed):
		return StatusClosed
	case errors.Is(err, ErrRefused), errors.Is(err, rt.ErrRefused):
		return StatusRefused
	case errors.Is(err, ErrTimeout), errors.Is(err, rt.ErrOpenTimeout):
		return StatusTimeout
	case errors.Is(err, ErrPeerGone), errors.Is(err, rt.ErrRetryExhausted), errors.Is(err, rt.ErrPeerReset),
		errors.Is(err, rt.ErrPeerFatal), errors.Is(err, rt.ErrIdleTimeout):
		return StatusPeerGone
	case errors.Is(err, ErrBusy), errors.Is(err, rt.ErrBusy), errors.Is(err, txn.ErrBusy),
		errors.Is(err, rt.ErrTableFull), errors.Is(err, txn.ErrRegionsFull), errors.Is(err, rt.ErrQPNTable):
		return StatusBusy
	case errors.Is(err, ErrTooLarge), errors.Is(err, txn.ErrTooLong), errors.Is(err, rt.ErrTooLarge):
		return StatusRemoteInvalid
	case errors.Is(err, ErrCancelled):
		return StatusCancelled
	case errors.Is(err, ErrAbandoned):
		return StatusAbandoned
	case errors.Is(err, ErrRemoteAccess):
		return StatusRemoteAccess
	}
	return StatusInvalid
}

// Error is what every failed call returns: the operation, the status and
// the cause below. errors.Is matches the status's sentinel (Status.Err),
// and the cause's chain (a context's error, an rt reason such as
// rt.ErrRetryExhausted).
type Error struct {
	Op     string // "send", "recv", "push", "pull", "dial", "listen", "register", "open"
	Status Status
	Cause  error // the reason below, or nil
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return fmt.Sprintf("peregrine: %s: %v: %v", e.Op, e.Status, e.Cause)
	}
	return fmt.Sprintf("peregrine: %s: %v", e.Op, e.Status)
}

// Unwrap returns the sentinel and the cause.
func (e *Error) Unwrap() []error {
	if e.Cause != nil {
		return []error{e.Status.Err(), e.Cause}
	}
	return []error{e.Status.Err()}
}

// wrap builds the error of operation op from an error of a layer below.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	var pe *Error
	if errors.As(err, &pe) {
		return err
	}
	return &Error{Op: op, Status: statusOf(err), Cause: err}
}

// statusErr builds the error of an operation that ended with st.
func statusErr(op string, st Status, cause error) error {
	if st == StatusOK {
		return nil
	}
	return &Error{Op: op, Status: st, Cause: cause}
}

// cancelled is the error of an operation the caller's context ended.
func cancelled(op string, ctx context.Context) error {
	return &Error{Op: op, Status: StatusCancelled, Cause: context.Cause(ctx)}
}

// invalidf is the cause of a StatusInvalid error (the status makes it
// match ErrInvalid).
func invalidf(format string, args ...any) error { return fmt.Errorf(format, args...) }
