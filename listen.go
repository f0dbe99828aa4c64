package peregrine

import (
	"context"
	"errors"
	"sync"
)

// The listener: a peer's ConnOpen is accepted by the transport only while
// one is up (engine.acceptPeer), and the connection is handed to Accept
// through a channel once its receive slots are posted.

// checkListen checks a listener's options (and fills their defaults).
func checkListen(opts *ConnOptions) error {
	if err := checkConnOptions(opts); err != nil {
		return &Error{Op: "listen", Status: StatusInvalid, Cause: err}
	}
	if opts.Ordered {
		// The transaction layer takes an accepted connection's order from
		// the side that dialled it (every request carries it).
		return &Error{Op: "listen", Status: StatusNotSupported, Cause: errors.New("ConnOptions.Ordered on a listener: an accepted connection is ordered when its peer dials it ordered")}
	}
	return nil
}

func (e *engine) listen(opts ConnOptions) (*Listener, error) {
	if err := checkListen(&opts); err != nil {
		return nil, err
	}
	l := &Listener{l: listener{e: e, opts: opts, ch: make(chan *Conn, e.opts.MaxConns), closed: make(chan struct{})}}
	if err := e.listenWith(&l.l); err != nil {
		return nil, err
	}
	return l, nil
}

// listenWith puts l up on the engine's loop.
func (e *engine) listenWith(l *listener) error {
	op := e.takeOp()
	op.o.kind, op.o.lst = opListen, l
	_, err := e.control(context.Background(), op)
	op.o.lst = nil
	e.putOp(op)
	return err
}

func (e *engine) doListen(op *Op) {
	if e.lst != nil {
		e.finish(op, 0, StatusBusy, errors.New("the endpoint has a listener already"))
		return
	}
	e.lst = op.o.lst
	e.finish(op, 0, StatusOK, nil)
}

type listener struct {
	sc        *sidecarListener // through the sidecar: the rest unused
	e         *engine
	opts      ConnOptions
	ch        chan *Conn
	closed    chan struct{}
	closeOnce sync.Once
	// shards are a sharded endpoint's engines, each listening into ch
	// (nil: e alone).
	shards []*engine
}

func (l *listener) offer(cn *conn) bool {
	select {
	case l.ch <- cn.pub:
		return true
	default:
		return false
	}
}

func (l *listener) accept(ctx context.Context) (*Conn, error) {
	if l.sc != nil {
		return l.sc.accept(ctx)
	}
	select {
	case c := <-l.ch:
		return c, nil
	default:
	}
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.closed:
		return nil, &Error{Op: "accept", Status: StatusClosed, Cause: errors.New("the listener is closed")}
	case <-l.e.gone:
		return nil, &Error{Op: "accept", Status: StatusClosed, Cause: errors.New("the endpoint is closed")}
	case <-ctx.Done():
		return nil, cancelled("accept", ctx)
	}
}

func (l *listener) close() error {
	if l.sc != nil {
		return l.sc.close()
	}
	var err error
	l.closeOnce.Do(func() {
		close(l.closed)
		engines := l.shards
		if engines == nil {
			engines = []*engine{l.e}
		}
		for _, e := range engines {
			op := e.takeOp()
			op.o.kind = opUnlisten
			_, uerr := e.control(context.Background(), op)
			e.putOp(op)
			if !errors.Is(uerr, ErrClosed) { // the endpoint closed: nothing listens anyway
				err = errors.Join(err, uerr)
			}
		}
		// Nothing offers connections any more: those accepted by the
		// transport that no Accept took are closed, not left holding the
		// endpoint's connection slots.
		for {
			select {
			case c := <-l.ch:
				c.Close()
				continue
			default:
			}
			break
		}
	})
	return err
}
