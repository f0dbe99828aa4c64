package rpc

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/peregrine-net/peregrine/bench/internal/benchtopo"
	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/dix"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/rt/swift"
	"github.com/peregrine-net/peregrine/core/rt/txn"
	"github.com/peregrine-net/peregrine/pmd"
)

// rawDoor is the floor: two txn endpoints polled by the measuring
// goroutine, no loop and no hand-off between goroutines. Each row opens
// its own ports and endpoints.
type rawDoor struct {
	m *media
	// loops polls each endpoint from its own goroutine, locked to its
	// thread and pinned to its CPU (the raw-loops door): the public API's
	// layout, so that the API's cost is compared with the transport's on
	// the same cores. Without it one goroutine polls both (the floor).
	loops bool
	noPin bool
}

// sendIndex is how the public package's dialled connections name a Send's
// receive slot, so that both measure the same transport work.
var sendIndex = dix.Config{Kind: dix.FreeRunning, Width: 16}

func (d *rawDoor) close() error { return nil }

func (d *rawDoor) file(context.Context, int64) (float64, error) {
	return 0, errors.New("the raw door has no file transfer")
}

// rawSide is one endpoint of a raw row.
type rawSide struct {
	port port.Port
	ep   *txn.Endpoint
	reg  txn.Region
	mem  []byte
	conn *txn.Conn
}

func (d *rawDoor) rows(ctx context.Context, size, depth int, n rowLen) (res result, err error) {
	pool, err := mbuf.New(mbuf.Options{Name: "bench-rpc-raw", Frames: 16384})
	if err != nil {
		return res, err
	}
	clk := clock.NewReal()
	env := &pmd.Env{Pool: pool, Clock: clk}
	var a, z rawSide
	defer func() {
		now := clk.Now()
		for _, s := range []*rawSide{&a, &z} {
			if s.ep != nil {
				s.ep.Stop(now)
				err = errors.Join(err, s.ep.Close())
			}
			if s.port != nil {
				err = errors.Join(err, s.port.Close())
			}
		}
		err = errors.Join(err, pool.Close())
	}()
	// Client: depth send slots, then 2×depth receive slots; server:
	// 2×depth receive slots, each echoed from where it landed. Twice the
	// depth of receive slots, because a slot is posted again only once
	// the response sent from it (server) is acknowledged.
	slot := uint64(size)
	k := uint64(depth)
	open := func(s *rawSide, spec string, ip netip.Addr, memLen uint64) error {
		var err error
		if s.port, err = pmd.Open(env, spec); err != nil {
			return err
		}
		self := s
		// The public package's endpoints' congestion control and least
		// RTO, so that the doors differ in the API only.
		sp := swift.SoftwareParams()
		s.ep, err = txn.New(txn.Options{
			Transport:  rt.Options{Port: s.port, Pool: pool, Clock: clk, LocalIP: ip, LocalMAC: [6]byte(s.port.Info().MAC), MinRTO: rt.SoftwareMinRTO},
			Congestion: &sp,
			OnConnEvent: func(ev txn.ConnEvent) {
				if ev.Kind == txn.ConnEstablished && self.conn == nil {
					self.conn = ev.Conn
				}
			},
		})
		if err != nil {
			return err
		}
		s.mem = make([]byte, memLen)
		s.reg, err = s.ep.Register(s.mem, 0)
		return err
	}
	if err := open(&a, d.m.specA, ipA, 3*k*slot); err != nil {
		return res, err
	}
	if err := open(&z, d.m.specB, ipB, 2*k*slot); err != nil {
		return res, err
	}
	if a.conn, err = a.ep.Open(rt.PeerAddr{MAC: [6]byte(z.port.Info().MAC), IP: ipB}, txn.ConnOptions{Index: sendIndex}); err != nil {
		return res, err
	}
	poll := func() { now := clk.Now(); a.ep.Poll(now); z.ep.Poll(now) }
	deadline := time.Now().Add(10 * time.Second)
	for z.conn == nil {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return res, errors.Join(ctx.Err(), errors.New("the server's connection was not established within 10s"))
		}
		poll()
	}
	recvBase := k * slot // the client's receive slots follow its send slots
	for j := range 2 * k {
		if _, err := a.conn.PostRecv(txn.RecvWR{Local: a.reg, LocalAddr: recvBase + j*slot, Len: size, WRID: j}); err != nil {
			return res, err
		}
		if _, err := z.conn.PostRecv(txn.RecvWR{Local: z.reg, LocalAddr: j * slot, Len: size, WRID: j}); err != nil {
			return res, err
		}
	}
	m := newMeter(n, 1)
	free := make([]uint64, 0, k) // the client's send slots not lent
	for j := range k {
		free = append(free, j)
	}
	want, inflight := depth, 0 // requests to send; requests sent and not answered
	cq := make([]txn.Completion, 64)
	check := func(c txn.Completion) error {
		if c.Status != txn.StatusOK {
			return fmt.Errorf("%v completed %v", c.Kind, c.Status)
		}
		return nil
	}
	// client takes a's completions and sends what the window allows;
	// server echoes what z received. Each touches its own endpoint only.
	client := func(cq []txn.Completion) error {
		n := a.ep.Completions(cq)
		for _, c := range cq[:n] {
			if err := check(c); err != nil {
				return err
			}
			switch c.Kind {
			case txn.OpSend:
				free = append(free, c.Tag)
			case txn.OpRecv:
				at := recvBase + c.Tag*slot
				inflight--
				if m.done(0, stamped(a.mem[at:])) {
					want++
				}
				if _, err := a.conn.PostRecv(txn.RecvWR{Local: a.reg, LocalAddr: at, Len: size, WRID: c.Tag}); err != nil {
					return err
				}
			}
		}
		for want > 0 && len(free) > 0 {
			j := free[len(free)-1]
			stamp(a.mem[j*slot:])
			if _, err := a.conn.Send(txn.Op{Local: a.reg, LocalAddr: j * slot, Len: size, Tag: j}); err != nil {
				if errors.Is(err, txn.ErrBusy) {
					break
				}
				return err
			}
			free = free[:len(free)-1]
			want--
			inflight++
		}
		return nil
	}
	server := func(cq []txn.Completion) error {
		n := z.ep.Completions(cq)
		for _, c := range cq[:n] {
			if err := check(c); err != nil {
				return err
			}
			switch c.Kind {
			case txn.OpRecv:
				if _, err := z.conn.Send(txn.Op{Local: z.reg, LocalAddr: c.Tag * slot, Len: c.Bytes, Tag: c.Tag}); err != nil {
					return fmt.Errorf("echo: %w", err)
				}
			case txn.OpSend:
				if _, err := z.conn.PostRecv(txn.RecvWR{Local: z.reg, LocalAddr: c.Tag * slot, Len: size, WRID: c.Tag}); err != nil {
					return err
				}
			}
		}
		return nil
	}
	guard := time.Now().Add(rowGuard(n))
	expired := func() error {
		if time.Now().After(guard) || ctx.Err() != nil {
			return errors.Join(ctx.Err(), fmt.Errorf("%d of %d round trips after %v", m.n.Load(), n.count, rowGuard(n)))
		}
		return nil
	}
	if !d.loops {
		for !m.finished() || inflight > 0 {
			if err := expired(); err != nil {
				return res, err
			}
			poll()
			if err := client(cq); err != nil {
				return res, err
			}
			if err := server(cq); err != nil {
				return res, err
			}
		}
	} else {
		// The public API's layout: each endpoint polled by its own
		// goroutine, locked to its thread and pinned to its CPU. Neither
		// unlocks: a goroutine that ends locked ends its pinned thread
		// rather than handing it back to the runtime.
		var stop atomic.Bool
		loop := func(cpu int, step func() error) error {
			runtime.LockOSThread()
			if !d.noPin {
				if err := benchtopo.PinThread(cpu); err != nil {
					return err
				}
			}
			for !stop.Load() {
				if err := step(); err != nil {
					return err
				}
			}
			return nil
		}
		served, asked := make(chan error, 1), make(chan error, 1)
		cqz := make([]txn.Completion, 64)
		go func() {
			served <- loop(d.m.cpuB, func() error { z.ep.Poll(clk.Now()); return server(cqz) })
		}()
		go func() {
			err := loop(d.m.cpuA, func() error {
				if m.finished() && inflight == 0 {
					stop.Store(true)
					return nil
				}
				if err := expired(); err != nil {
					return err
				}
				a.ep.Poll(clk.Now())
				return client(cq)
			})
			stop.Store(true) // the server's loop too, when the client's failed
			asked <- err
		}()
		err := errors.Join(<-asked, <-served)
		if err != nil {
			ta, tz := a.ep.Transport().Stats(), z.ep.Transport().Stats()
			return res, fmt.Errorf("%w (client: %d resent, %d abandoned; server: %d resent, %d abandoned; txn %+v / %+v)", err,
				ta.TxRetransmit, ta.Abandoned, tz.TxRetransmit, tz.Abandoned, a.ep.Stats(), z.ep.Stats())
		}
	}
	res = m.result()
	// The last responses' acknowledgements, so that Stop fails nothing.
	posted := int(4 * k)
	for end := time.Now().Add(time.Second); a.ep.Outstanding()+z.ep.Outstanding() > posted && time.Now().Before(end); {
		poll()
		n := z.ep.Completions(cq)
		for _, c := range cq[:n] {
			if c.Kind == txn.OpSend && c.Status == txn.StatusOK {
				_, _ = z.conn.PostRecv(txn.RecvWR{Local: z.reg, LocalAddr: c.Tag * slot, Len: size, WRID: c.Tag})
			}
		}
		a.ep.Completions(cq)
	}
	return res, nil
}

// rowGuard bounds a row's run: a hang is an error, not a stuck bench.
func rowGuard(n rowLen) time.Duration {
	g := time.Duration(n.count) * 10 * time.Millisecond
	if n.limit > 0 {
		g = min(g, 2*n.limit)
	}
	return time.Minute + g
}
