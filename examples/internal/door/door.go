// Package door opens the endpoint an example application runs on: a port
// of its own, driven by a poll loop in the application's process (the
// in-process door, package peregrine), or a channel of a running appliance
// attached over its Unix socket (the sidecar door, host/client). The
// examples are written once against Endpoint, Listener and Conn and never
// learn which door they came through.
//
// # Who owns a buffer
//
// A buffer passed to Send is the transport's until Send returns, and a
// buffer passed to Recv is the transport's until Recv returns; the
// sidecar door copies through the channel's own buffers in between.
package door

import (
	"context"
	"net/netip"

	"github.com/peregrine-net/peregrine"
	"github.com/peregrine-net/peregrine/host/client"
)

// Endpoint is what an example needs of an endpoint.
type Endpoint interface {
	Addr() peregrine.Addr
	Dial(ctx context.Context, peer peregrine.Addr, opts peregrine.ConnOptions) (Conn, error)
	Listen(opts peregrine.ConnOptions) (Listener, error)
	Close() error
}

// Listener accepts connections.
type Listener interface {
	Accept(ctx context.Context) (Conn, error)
	Close() error
}

// Conn carries messages.
type Conn interface {
	Send(ctx context.Context, msg []byte) error
	Recv(ctx context.Context, buf []byte) (int, error)
	Close() error
}

// Spec says where an endpoint comes from.
type Spec struct {
	// Sidecar, when set, is the appliance's socket: the endpoint is a
	// channel of the appliance and Port and IP are the appliance's.
	Sidecar string
	// Port and IP open an endpoint in this process on Host.
	Port string
	IP   netip.Addr
	Host *peregrine.Host
	// MaxMessage is the longest message the application sends or
	// receives: through the sidecar, the size of the channel's buffers.
	MaxMessage int
}

// Open opens the endpoint s names.
func Open(s Spec) (Endpoint, error) {
	if s.Sidecar != "" {
		// A few buffers as long as the longest message: the examples have
		// one or two operations in flight per connection.
		ep, err := client.Attach(s.Sidecar, client.Options{Buffers: 32, RingSize: 32, BufSize: roundUp(s.MaxMessage, 64)})
		if err != nil {
			return nil, err
		}
		return wrap(ep), nil
	}
	ep, err := s.Host.Open(s.Port, peregrine.Options{IP: s.IP})
	if err != nil {
		return nil, err
	}
	return wrap(ep), nil
}

func roundUp(n, to int) int { return (max(n, to) + to - 1) / to * to }

// The two doors' endpoints have the same methods but return their own
// connection types; these adapters give both the interfaces above.

type endpointOf[C Conn, L listenerOf[C]] interface {
	Addr() peregrine.Addr
	Dial(ctx context.Context, peer peregrine.Addr, opts peregrine.ConnOptions) (C, error)
	Listen(opts peregrine.ConnOptions) (L, error)
	Close() error
}

type listenerOf[C Conn] interface {
	Accept(ctx context.Context) (C, error)
	Close() error
}

type endpoint[C Conn, L listenerOf[C]] struct{ e endpointOf[C, L] }

func wrap[C Conn, L listenerOf[C]](e endpointOf[C, L]) Endpoint { return endpoint[C, L]{e} }

func (e endpoint[C, L]) Addr() peregrine.Addr { return e.e.Addr() }
func (e endpoint[C, L]) Close() error         { return e.e.Close() }

func (e endpoint[C, L]) Dial(ctx context.Context, peer peregrine.Addr, opts peregrine.ConnOptions) (Conn, error) {
	c, err := e.e.Dial(ctx, peer, opts)
	if err != nil {
		return nil, err
	}
	return c, nil
}

func (e endpoint[C, L]) Listen(opts peregrine.ConnOptions) (Listener, error) {
	l, err := e.e.Listen(opts)
	if err != nil {
		return nil, err
	}
	return listener[C]{l}, nil
}

type listener[C Conn] struct{ l listenerOf[C] }

func (l listener[C]) Close() error { return l.l.Close() }

func (l listener[C]) Accept(ctx context.Context) (Conn, error) {
	c, err := l.l.Accept(ctx)
	if err != nil {
		return nil, err
	}
	return c, nil
}
