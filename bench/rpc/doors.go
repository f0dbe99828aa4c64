package rpc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/peregrine-net/peregrine"
	"github.com/peregrine-net/peregrine/host"
)

// door is one way in: it measures rows and, for the sidecar and kernel
// TCP, a file transfer.
type door interface {
	rows(ctx context.Context, size, depth int, n rowLen) (result, error)
	// file moves size bytes one way and returns the goodput, bytes/s.
	file(ctx context.Context, size int64) (float64, error)
	close() error
}

// openDoor opens a door for rows of depth requests in flight.
func openDoor(o Options, m *media, name string, depth int) (door, error) {
	switch name {
	case "raw":
		return &rawDoor{m: m}, nil
	case "raw-loops":
		return &rawDoor{m: m, loops: true, noPin: o.NoPin}, nil
	case "tcp":
		return &tcpDoor{m: m}, nil
	}
	poll := peregrine.PollLoop
	if name == "api-caller" {
		poll = peregrine.PollCaller
	}
	return openMsgDoor(o, m, name == "sidecar", poll, depth)
}

// msgDoor is the public API in-process or, with a sidecar, the client
// through a host.Server on endpoint a. The echo server is in-process on
// endpoint b in both.
type msgDoor struct {
	h    *peregrine.Host
	a, b *peregrine.Endpoint

	srv    *host.Server
	cl     *peregrine.Endpoint // attached to srv (peregrine.Attach)
	stop   context.CancelFunc
	polled chan struct{}
}

func openMsgDoor(o Options, m *media, sidecar bool, poll peregrine.Poll, depth int) (_ *msgDoor, err error) {
	d := &msgDoor{}
	defer func() {
		if err != nil {
			err = errors.Join(err, d.close())
		}
	}()
	if d.h, err = peregrine.NewHost(peregrine.HostOptions{}); err != nil {
		return nil, err
	}
	pin := !o.NoPin
	if !sidecar && poll == peregrine.PollLoop {
		pin = apiLoopsPinned(o.NoPin) // the api door
	}
	if d.a, err = d.h.Open(m.specA, peregrine.Options{IP: ipA, CPU: m.cpuA, Pin: pin, Idle: o.Idle, Poll: poll}); err != nil {
		return nil, err
	}
	pollB, pinB := poll, pin
	if sidecar {
		// The echo server is an in-process application behind the
		// sidecar's client, set up as such an application would be on
		// two CPUs shared with the appliance's pinned loop: its one
		// goroutine polls it while it waits (the api-caller rows' mode),
		// for its blocking Recv with one request in flight and for its
		// completion queue with many (an unpinned loop of its own
		// measured no better there).
		pollB = peregrine.PollCaller
	}
	if d.b, err = d.h.Open(m.specB, peregrine.Options{IP: ipB, CPU: m.cpuB, Pin: pinB, Idle: o.Idle, Poll: pollB}); err != nil {
		return nil, err
	}
	if !sidecar {
		return d, nil
	}
	sock := filepath.Join(os.TempDir(), fmt.Sprintf("pgrpc%d-%s.sock", os.Getpid(), m.where))
	if d.srv, err = host.New(host.Options{Socket: sock, Mode: 0o600, UID: -1, GID: -1, Endpoint: d.a}); err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(context.Background())
	d.stop, d.polled = stop, make(chan struct{})
	go func() { defer close(d.polled); d.srv.Run(ctx) }()
	if d.cl, err = peregrine.Attach(sock, peregrine.AttachOptions{}); err != nil {
		return nil, err
	}
	return d, nil
}

func (d *msgDoor) close() error {
	var errs []error
	if d.cl != nil {
		errs = append(errs, d.cl.Close())
	}
	if d.stop != nil {
		d.stop()
		<-d.polled
	}
	if d.srv != nil {
		errs = append(errs, d.srv.Close())
	}
	for _, ep := range []*peregrine.Endpoint{d.a, d.b} {
		if ep != nil {
			errs = append(errs, ep.Close())
		}
	}
	if d.h != nil {
		errs = append(errs, d.h.Close())
	}
	return errors.Join(errs...)
}

// connect returns a connection from a (through the sidecar, if any) and
// the echo server's end on b.
func (d *msgDoor) connect(ctx context.Context, opts peregrine.ConnOptions) (cc, sc *peregrine.Conn, err error) {
	l, err := d.b.Listen(opts)
	if err != nil {
		return nil, nil, err
	}
	defer l.Close()
	type accepted struct {
		c   *peregrine.Conn
		err error
	}
	acc := make(chan accepted, 1)
	go func() { c, err := l.Accept(ctx); acc <- accepted{c, err} }()
	from := d.a
	if d.cl != nil {
		from = d.cl // the one line an application changes between the doors
	}
	if cc, err = from.Dial(ctx, d.b.Addr(), opts); err != nil {
		return nil, nil, err
	}
	got := <-acc
	if got.err != nil {
		return nil, nil, errors.Join(got.err, cc.Close())
	}
	return cc, got.c, nil
}

func (d *msgDoor) rows(ctx context.Context, size, depth int, n rowLen) (result, error) {
	ctx, cancel := context.WithTimeout(ctx, rowGuard(n))
	defer cancel()
	cc, sc, err := d.connect(ctx, peregrine.ConnOptions{RecvSlots: min(64, max(8, 2*depth))})
	if err != nil {
		return result{}, err
	}
	if depth > 1 {
		res, err := d.pipelined(ctx, cc, sc, size, depth, n)
		err = errors.Join(err, cc.Close(), sc.Close())
		if err != nil && ctx.Err() == context.DeadlineExceeded {
			err = fmt.Errorf("round trips not done after %v: %w", rowGuard(n), err)
		}
		return res, err
	}
	echoCtx, stopEcho := context.WithCancel(ctx)
	var echoes sync.WaitGroup
	for range depth {
		echoes.Add(1)
		go func() {
			defer echoes.Done()
			buf := make([]byte, size)
			for {
				n, err := sc.Recv(echoCtx, buf)
				if err == nil {
					err = sc.Send(echoCtx, buf[:n])
				}
				if err != nil {
					return // the row is over (or failed: the callers see it)
				}
			}
		}()
	}
	m := newMeter(n, depth)
	var (
		callers sync.WaitGroup
		once    sync.Once
		failed  error
	)
	for g := range depth {
		callers.Add(1)
		go func() {
			defer callers.Done()
			req, resp := make([]byte, size), make([]byte, size)
			for {
				stamp(req)
				err := cc.Send(ctx, req)
				n := 0
				if err == nil {
					n, err = cc.Recv(ctx, resp)
				}
				if err == nil && n != size {
					err = fmt.Errorf("a response of %d bytes to a request of %d", n, size)
				}
				if err != nil {
					once.Do(func() { failed = err; cancel() })
					return
				}
				if !m.done(g, stamped(resp)) {
					return
				}
			}
		}()
	}
	callers.Wait()
	stopEcho()
	echoes.Wait()
	err = errors.Join(failed, cc.Close(), sc.Close())
	if failed != nil && ctx.Err() == context.DeadlineExceeded {
		err = fmt.Errorf("%d of %d round trips after %v: %w", m.n.Load(), n.count, rowGuard(n), err)
	}
	return m.result(), err
}

func (d *msgDoor) file(ctx context.Context, size int64) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second+time.Duration(size>>20)*100*time.Millisecond)
	defer cancel()
	cc, sc, err := d.connect(ctx, peregrine.ConnOptions{RecvSlots: 2 * chunksInFlight, MaxMessage: Chunk})
	if err != nil {
		return 0, err
	}
	got, wall, err := filePipelined(ctx, cc, sc, size)
	err = errors.Join(err, cc.Close(), sc.Close())
	if got != size {
		return 0, errors.Join(fmt.Errorf("%d of %d bytes arrived", got, size), err)
	}
	return float64(size) / wall.Seconds(), err
}
