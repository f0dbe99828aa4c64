package txn

import (
	"time"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/sched"
)

// OpKind is the kind of a transaction.
type OpKind uint8

const (
	OpPush OpKind = iota + 1
	OpPull
	// OpSend is a two-sided send (Conn.Send); OpRecv the receive
	// completion of a posted WQE (Conn.PostRecv).
	OpSend
	OpRecv
)

func (k OpKind) String() string {
	switch k {
	case OpPush:
		return "push"
	case OpPull:
		return "pull"
	case OpSend:
		return "send"
	case OpRecv:
		return "recv"
	}
	return "op?"
}

// Status is how an operation ended. Each names its nearest ibv_wc_status
// (rdma-core), for readers who know verbs; "Failure semantics" in the
// package doc says what each means for the buffers and the peer.
type Status uint8

const (
	// StatusOK: a push's data was placed at the target (every packet
	// acknowledged); a pull's data was placed in the local region.
	// IBV_WC_SUCCESS.
	StatusOK Status = iota
	// StatusRemoteAccess: the target refused the remote region: not
	// registered, without the access, or too small for the span. Nothing
	// was written at the target (a push) or locally (a pull).
	// IBV_WC_REM_ACCESS_ERR.
	StatusRemoteAccess
	// StatusAbandoned: a packet of the operation ran out of retries and was
	// abandoned; the target may or may not have placed it, and it was told
	// to drop the transaction. The connection goes on. IBV_WC_RETRY_EXC_ERR
	// (without the queue pair going to the error state).
	StatusAbandoned
	// StatusConnFailed: the connection failed or was closed with the
	// operation outstanding (peer restart, unreachable peer, Stop); the
	// connection's failure event says why. IBV_WC_RETRY_EXC_ERR for a peer
	// found unreachable, IBV_WC_WR_FLUSH_ERR for the rest.
	StatusConnFailed
	// StatusRemoteAbandoned: the target gave up on the operation: its pull
	// data ran out of retries. The local span may hold part of the data.
	// On a receive completion: the sender gave up on the Send that took
	// the WQE; its buffer may hold part of it. IBV_WC_REM_ABORT_ERR.
	StatusRemoteAbandoned
	// StatusTimeout: the operation's timeout (Op.Timeout,
	// ConnOptions.OpTimeout) passed before it completed; the target was
	// told to drop it. IBV_WC_RESP_TIMEOUT_ERR.
	StatusTimeout
	// StatusCancelled: Conn.Cancel ended the operation; the target was told
	// to drop it. Verbs cannot cancel one work request; the nearest is
	// IBV_WC_WR_FLUSH_ERR.
	StatusCancelled
	// StatusFlushed: Conn.Abort ended the connection with the operation
	// outstanding. IBV_WC_WR_FLUSH_ERR.
	StatusFlushed
	// StatusRNRRetryExceeded: a Send found no receive WQE posted at the
	// target through every retry (receiver-not-ready NACKs).
	// IBV_WC_RNR_RETRY_EXC_ERR.
	StatusRNRRetryExceeded
	// StatusRemoteInvalid: a Send was longer than the target's receive
	// WQE, or its delivery index does not fit the target's receive queue;
	// Completion.Refusal says which. The target wrote nothing past the
	// WQE (nothing at all, for the index). IBV_WC_REM_INV_REQ_ERR.
	StatusRemoteInvalid
	// StatusLocalLength: a receive completion whose Send was longer than
	// the WQE; nothing was written. IBV_WC_LOC_LEN_ERR.
	StatusLocalLength
)

func (s Status) String() string {
	switch s {
	case StatusOK:
		return "ok"
	case StatusRemoteAccess:
		return "remote-access-error"
	case StatusAbandoned:
		return "abandoned"
	case StatusConnFailed:
		return "connection-failed"
	case StatusRemoteAbandoned:
		return "remote-abandoned"
	case StatusTimeout:
		return "timeout"
	case StatusCancelled:
		return "cancelled"
	case StatusFlushed:
		return "flushed"
	case StatusRNRRetryExceeded:
		return "rnr-retry-exceeded"
	case StatusRemoteInvalid:
		return "remote-invalid-request"
	case StatusLocalLength:
		return "local-length-error"
	}
	return "status?"
}

// Completion reports one finished operation. On an ordered connection the
// completions of its operations come in the order they were posted.
type Completion struct {
	Conn   *Conn
	Tag    uint64 // the operation's Op.Tag
	Kind   OpKind
	RSN    uint32
	Bytes  int
	Status Status
	// WQE is a receive completion's WQE number (the one PostRecv
	// returned); Tag is then its RecvWR.WRID and RSN the Send's.
	WQE uint32
	// Remote is the remote region the operation named (for error reports).
	RemoteKey  uint32
	RemoteAddr uint64
	// Refusal says which check of the remote region failed, for
	// StatusRemoteAccess, or which check of a Send, for
	// StatusRemoteInvalid.
	Refusal Refusal
	Posted  clock.Time
	Done    clock.Time
}

// Refusal is why a target refused an operation's remote region. It
// travels in the ULP code of the target's NACK.
type Refusal uint8

const (
	// RefusalUnspecified: the target did not say (an operation it could not
	// match to a connection, or a malformed segment), or the operation was
	// not refused.
	RefusalUnspecified Refusal = iota
	// RefusalUnregistered: no region is registered under the key.
	RefusalUnregistered
	// RefusalAccess: the region does not allow the access (a push into a
	// region registered read-only, a pull from one not readable).
	RefusalAccess
	// RefusalTooSmall: the region does not hold the span.
	RefusalTooSmall
	// RefusalRecvTooSmall: a Send is longer than the receive WQE it
	// belongs in (the sender's completion: StatusRemoteInvalid).
	RefusalRecvTooSmall
	// RefusalIndexMismatch: a Send's absolute delivery index counts
	// modulo another receive-queue depth than the target's
	// (dix.Config.Depth differs from the target's Options.RecvDepth);
	// nothing was written (the sender's completion: StatusRemoteInvalid).
	RefusalIndexMismatch
	numRefusals
)

func (r Refusal) String() string {
	switch r {
	case RefusalUnregistered:
		return "region not registered"
	case RefusalAccess:
		return "region does not allow the access"
	case RefusalTooSmall:
		return "region too small for the span"
	case RefusalRecvTooSmall:
		return "receive WQE too small for the Send"
	case RefusalIndexMismatch:
		return "absolute delivery index built for another receive-queue depth (set ConnOptions.Index.Depth to the target's Options.RecvDepth)"
	}
	return "unspecified"
}

// Latency is the time from posting to completion.
func (c *Completion) Latency() time.Duration { return c.Done.Sub(c.Posted) }

// cq is a fixed ring of completions.
type cq struct {
	buf        []Completion
	head, size int
}

func (q *cq) push(c Completion) bool {
	p := q.slot()
	if p == nil {
		return false
	}
	*p = c
	return true
}

// slot queues a zero completion and returns it for the caller to fill in
// place (nil when the queue is full): a Completion built as a value and
// pushed is copied, and the copy's wide loads stall on the narrow stores
// that just built it. Its slot is zero already: pop clears what it takes.
func (q *cq) slot() *Completion {
	if q.size == len(q.buf) {
		return nil
	}
	p := &q.buf[(q.head+q.size)%len(q.buf)]
	q.size++
	return p
}

func (q *cq) pop(out []Completion) int {
	n := min(len(out), q.size)
	for i := range n {
		out[i] = q.buf[q.head]
		q.buf[q.head] = Completion{}
		q.head = (q.head + 1) % len(q.buf)
	}
	q.size -= n
	return n
}

// completeInTurn posts the completion of initiator operation j of ordered
// connection c, whose turn came — unless an earlier operation's abort
// notice is still unacknowledged: until the target has it, the target
// holds every request behind that operation, and one completed OK here
// might never reach its ULP (the connection may fail first). Such
// completions wait, in posting order, until every notice before them is
// acknowledged (noticeReached), the connection ends (teardown: then
// StatusConnFailed, never OK), or their deadline passes (expireHeld).
func (e *Endpoint) completeInTurn(c *conn, j int32) {
	x := &e.xacts[j]
	// One that timed out is past its deadline: it waits for nothing but
	// the completions before it.
	expired := x.status == StatusTimeout
	if c.deferHead == 0 && (c.noticesOwed == 0 || expired) {
		e.complete(j, x.status)
		return
	}
	x.deferred, x.deferNext, x.expired = true, 0, expired
	if c.deferTail != 0 {
		e.xacts[c.deferTail-1].deferNext = j + 1
	} else {
		c.deferHead = j + 1
	}
	c.deferTail = j + 1
	if !expired {
		e.cnt.own[cCompletionsHeld]++
	}
}

// expireHeld: the deadline of held completion j of connection ci passed.
// A push or Send done OK here ends StatusTimeout, never OK: the target
// holds it behind the unacknowledged notice and may never hand it over
// (the connection may fail first); its own abort notice tells the target
// to drop it. A pull done here keeps its status: its data is only sent
// once its request was handed over. It ends as soon as those before it
// do, so that completions keep their posting order.
func (e *Endpoint) expireHeld(ci int32, j int32) {
	x := &e.xacts[j]
	x.expired = true
	if x.kind != OpPull && x.status == StatusOK {
		x.status = StatusTimeout // done: it keeps its state (stop)
		if e.needsNotice(x) {
			e.queueNotice(j, sched.ClassRequest)
		}
	}
	e.releaseHeld(&e.conns[ci])
}

// releaseHeld completes, in posting order, the held completions of c that
// wait for nothing more: all of them once no notice is owed, else those
// at the head whose deadline passed.
func (e *Endpoint) releaseHeld(c *conn) {
	for c.deferHead != 0 {
		j := c.deferHead - 1
		x := &e.xacts[j]
		if c.noticesOwed != 0 && !x.expired {
			return
		}
		c.deferHead = x.deferNext
		if c.deferHead == 0 {
			c.deferTail = 0
		}
		x.deferred, x.deferNext = false, 0
		e.complete(j, x.status) // one that owes a notice holds the rest again
	}
}

// noticeReached: the target acknowledged an abort notice of connection
// ci that completions waited for; those with no notice left before them
// complete now, in posting order (one that owes a notice itself holds
// the rest again).
func (e *Endpoint) noticeReached(ci int32) {
	c := &e.conns[ci]
	c.noticesOwed--
	e.releaseHeld(c)
}
