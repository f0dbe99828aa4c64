package main

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/peregrine-net/peregrine"
	"github.com/peregrine-net/peregrine/app/config"
	"github.com/peregrine-net/peregrine/app/metrics"
	"github.com/peregrine-net/peregrine/host"
	"github.com/peregrine-net/peregrine/host/shm"
)

// runSidecar is a run -c file's host section running: the endpoint on its
// own port and poll loop, the echo peer when asked, and the server polling
// the applications' channels on a goroutine of its own. It is outside the
// pipelines (app, where they live, sits below the public package).
type runSidecar struct {
	h        *peregrine.Host
	ep, echo *peregrine.Endpoint
	srv      *host.Server
	cancel   context.CancelFunc
	ran      chan struct{}
}

func startSidecar(hc *config.Host, obs *observer) (s *runSidecar, err error) {
	uid, gid, err := hc.IDs()
	if err != nil {
		return nil, err
	}
	s = &runSidecar{ran: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	defer func() {
		if err != nil {
			close(s.ran)
			err = errors.Join(err, s.stop())
		}
	}()
	if s.h, err = peregrine.NewHost(peregrine.HostOptions{}); err != nil {
		return s, err
	}
	if s.ep, err = s.h.Open(hc.Port, peregrine.Options{IP: hc.Addr(), Shards: hc.Shards}); err != nil {
		return s, err
	}
	q := host.Quota{Channels: hc.MaxChannels, Buffers: hc.MaxBuffers, BufSize: hc.MaxBufferSize, Conns: hc.MaxConns, Ring: hc.MaxRing}
	if hc.Echo {
		if s.echo, err = s.h.Open(hc.EchoPort(), peregrine.Options{IP: hc.Addr().Next(), Shards: hc.Shards}); err != nil {
			return s, err
		}
		if err = runEcho(ctx, s.echo, q.BufSize); err != nil {
			return s, err
		}
		a := s.echo.Addr()
		obs.textf("echo peer at %s %s on %s\n", a.IP, net.HardwareAddr(a.MAC[:]), hc.EchoPort())
	}
	if s.srv, err = host.New(host.Options{Socket: hc.Socket, Mode: hc.Mode(), UID: uid, GID: gid, Endpoint: s.ep, Quota: q,
		Default: shm.Layout{RingSize: hc.Ring, Buffers: hc.Buffers, BufSize: hc.BufferSize}}); err != nil {
		return s, err
	}
	a := s.ep.Addr()
	obs.textf("sidecar on %s: endpoint %s %s on %s\n", hc.Socket, a.IP, net.HardwareAddr(a.MAC[:]), hc.Port)
	if obs.reg != nil {
		obs.warn(obs.reg.Apps(s.sample))
	}
	go func() { defer close(s.ran); s.srv.Run(ctx) }()
	return s, nil
}

// sample is what /metrics reads of the applications, at each scrape.
func (s *runSidecar) sample(app func(metrics.App)) metrics.Sidecar {
	st := s.srv.Stats(func(a host.AppStats) {
		app(metrics.App{ID: a.ID, UID: a.UID, PID: a.PID, Channels: 1, Buffers: a.Buffers, Conns: a.Conns, InFlight: a.InFlight,
			OpsOK: a.OpsOK, OpsFailed: a.OpsFailed, OpsUnused: a.OpsUnused, BytesSent: a.BytesSent, BytesReceived: a.BytesReceived,
			Drops: map[string]uint64{"bad_op": a.BadOp, "bad_conn": a.BadConn, "bad_buffer": a.BadBuffer, "bad_ring_index": a.BadRingIndex,
				"lost_completion": a.LostCompletions, "bad_control": a.BadControl, "quota": a.QuotaRefused}})
	})
	return metrics.Sidecar{Attached: st.Attached, Attaches: st.Attaches, Detaches: st.Detaches, Refused: st.Refused}
}

// stop detaches every application (their connections close, their
// buffers return), then closes the endpoints and checks the pool.
func (s *runSidecar) stop() error {
	s.cancel()
	<-s.ran
	var err error
	if s.srv != nil {
		err = s.srv.Close()
	}
	for _, ep := range []*peregrine.Endpoint{s.echo, s.ep} {
		if ep != nil {
			err = errors.Join(err, ep.Close())
		}
	}
	if s.h != nil {
		err = errors.Join(err, s.h.Close())
	}
	if err != nil {
		return fmt.Errorf("sidecar: %w", err)
	}
	return nil
}
