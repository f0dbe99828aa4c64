package rpc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/peregrine-net/peregrine"
)

// pipelined measures a row of depth > 1 round trips in flight the way an
// application keeps many requests outstanding on one connection from one
// thread (as ibverbs and io_uring programs do, as Machnet's message
// generator does, and as the tcp door's one writer and one reader do): one
// goroutine starts SendAsync and RecvAsync ops with a CompletionQueue and
// reaps their completions in batches; the echo server likewise, each of
// its buffers cycling Recv → Send (the request's bytes back) → Recv.
func (d *msgDoor) pipelined(ctx context.Context, cc, sc *peregrine.Conn, size, depth int, n rowLen) (result, error) {
	echoCtx, stopEcho := context.WithCancel(ctx)
	echoed := make(chan error, 1)
	go func() { echoed <- echoPipelined(echoCtx, sc, size, depth) }()
	res, err := callPipelined(ctx, cc, size, depth, n)
	stopEcho()
	eerr := <-echoed
	if err == nil && eerr != nil && !errors.Is(eerr, context.Canceled) {
		err = eerr
	}
	return res, err
}

// A pipelined op's Tag: its kind in the top bit, its slot below.
const tagSend = 1 << 63

// opRing is a goroutine's async ops on one connection: depth Sends and
// depth Recvs, their buffers and their completion queue.
type opRing struct {
	cq          *peregrine.CompletionQueue
	sends, recv []peregrine.Op
	sbuf, rbuf  [][]byte
	out         []*peregrine.Op
	inflight    int // ops started and not reaped
}

func newOpRing(size, depth int) (*opRing, error) {
	q := 2
	for q < 2*depth {
		q *= 2
	}
	cq, err := peregrine.NewCompletionQueue(q)
	if err != nil {
		return nil, err
	}
	r := &opRing{cq: cq, sends: make([]peregrine.Op, depth), recv: make([]peregrine.Op, depth),
		sbuf: make([][]byte, depth), rbuf: make([][]byte, depth), out: make([]*peregrine.Op, 2*depth)}
	for i := range depth {
		r.sbuf[i], r.rbuf[i] = make([]byte, size), make([]byte, size)
		r.sends[i] = peregrine.Op{CQ: cq, Tag: tagSend | uint64(i)}
		r.recv[i] = peregrine.Op{CQ: cq, Tag: uint64(i)}
	}
	return r, nil
}

func (r *opRing) send(c *peregrine.Conn, i int, msg []byte) error {
	if err := c.SendAsync(&r.sends[i], msg); err != nil {
		return err
	}
	r.inflight++
	return nil
}

func (r *opRing) post(c *peregrine.Conn, i int) error {
	if err := c.RecvAsync(&r.recv[i], r.rbuf[i]); err != nil {
		return err
	}
	r.inflight++
	return nil
}

// drain cancels what is in flight and reaps it, so that every buffer is
// the goroutine's again before it returns (bounded: a connection that
// never answers is reported).
func (r *opRing) drain() error {
	for i := range r.sends {
		r.sends[i].Cancel()
		r.recv[i].Cancel()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for r.inflight > 0 {
		if _, err := r.reap(ctx); err != nil {
			return fmt.Errorf("%d ops still in flight after their cancel: %w", r.inflight, err)
		}
	}
	return nil
}

// reap waits for completions and returns a batch of them (the ops are the
// goroutine's again).
func (r *opRing) reap(ctx context.Context) ([]*peregrine.Op, error) {
	k, err := r.cq.Wait(ctx, r.out)
	r.inflight -= k
	return r.out[:k], err
}

// callPipelined is the client: it keeps depth requests in flight, each
// stamped when sent; a response, whichever Recv it lands in, ends the
// round trip its stamp began and lets one more request go.
func callPipelined(ctx context.Context, cc *peregrine.Conn, size, depth int, n rowLen) (res result, err error) {
	r, err := newOpRing(size, depth)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, r.drain()) }()
	m := newMeter(n, 1)
	free := make([]int, 0, depth) // Send slots whose op completed
	for i := range depth {
		if err := r.post(cc, i); err != nil {
			return res, err
		}
		free = append(free, i)
	}
	credit := depth // requests that may go: depth minus those unanswered
	for {
		for credit > 0 && len(free) > 0 {
			i := free[len(free)-1]
			free = free[:len(free)-1]
			stamp(r.sbuf[i])
			if err := r.send(cc, i, r.sbuf[i]); err != nil {
				return res, err
			}
			credit--
		}
		done, err := r.reap(ctx)
		if err != nil {
			return res, err
		}
		for _, op := range done {
			got, err := op.Result()
			if err != nil {
				return res, err
			}
			i := int(op.Tag &^ tagSend)
			if op.Tag&tagSend != 0 {
				free = append(free, i)
				continue
			}
			if got != size {
				return res, fmt.Errorf("a response of %d bytes to a request of %d", got, size)
			}
			if !m.done(0, stamped(r.rbuf[i])) {
				return m.result(), nil
			}
			credit++
			if err := r.post(cc, i); err != nil {
				return res, err
			}
		}
	}
}

// echoPipelined is the echo server: depth Recvs posted; a request is sent
// back from the buffer it landed in, which is posted again once that Send
// completed.
func echoPipelined(ctx context.Context, sc *peregrine.Conn, size, depth int) (err error) {
	r, err := newOpRing(size, depth)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, r.drain()) }()
	for i := range depth {
		if err := r.post(sc, i); err != nil {
			return err
		}
	}
	for {
		done, err := r.reap(ctx)
		if err != nil {
			return err
		}
		for _, op := range done {
			got, err := op.Result()
			if err != nil {
				return err
			}
			i := int(op.Tag &^ tagSend)
			if op.Tag&tagSend != 0 {
				err = r.post(sc, i)
			} else {
				err = r.send(sc, i, r.rbuf[i][:got])
			}
			if err != nil {
				return err
			}
		}
	}
}

// filePipelined moves size bytes from cc to sc in Chunk-byte messages,
// chunksInFlight Sends outstanding from one goroutine and as many Recvs
// posted by another, each reaping its completion queue in batches. It
// returns the bytes that arrived and the wall time until the last did.
func filePipelined(ctx context.Context, cc, sc *peregrine.Conn, size int64) (got int64, wall time.Duration, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	sent := make(chan error, 1)
	go func() {
		err := sendFile(ctx, cc, size)
		if err != nil {
			cancel()
		}
		sent <- err
	}()
	got, err = recvFile(ctx, sc, size)
	wall = time.Since(start)
	if err != nil {
		cancel()
	}
	return got, wall, errors.Join(err, <-sent)
}

func sendFile(ctx context.Context, cc *peregrine.Conn, size int64) (err error) {
	r, err := newOpRing(Chunk, chunksInFlight)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, r.drain()) }()
	var next int64 // bytes started
	for i := 0; i < chunksInFlight && next < size; i++ {
		n := min(Chunk, size-next)
		if err := r.send(cc, i, r.sbuf[i][:n]); err != nil {
			return err
		}
		next += n
	}
	for r.inflight > 0 {
		done, err := r.reap(ctx)
		if err != nil {
			return err
		}
		for _, op := range done {
			if _, err := op.Result(); err != nil {
				return err
			}
			if next < size {
				n := min(Chunk, size-next)
				i := int(op.Tag &^ tagSend)
				if err := r.send(cc, i, r.sbuf[i][:n]); err != nil {
					return err
				}
				next += n
			}
		}
	}
	return nil
}

func recvFile(ctx context.Context, sc *peregrine.Conn, size int64) (got int64, err error) {
	r, err := newOpRing(Chunk, 2*chunksInFlight)
	if err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, r.drain()) }()
	for i := range 2 * chunksInFlight {
		if err := r.post(sc, i); err != nil {
			return 0, err
		}
	}
	for got < size {
		done, err := r.reap(ctx)
		if err != nil {
			return got, err
		}
		for _, op := range done {
			n, err := op.Result()
			if err != nil {
				return got, err
			}
			if got += int64(n); got < size {
				if err := r.post(sc, int(op.Tag)); err != nil {
					return got, err
				}
			}
		}
	}
	return got, nil
}
