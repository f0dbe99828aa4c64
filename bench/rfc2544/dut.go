package rfc2544

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/peregrine-net/peregrine/app"
	"github.com/peregrine-net/peregrine/bench/anchor"
	"github.com/peregrine-net/peregrine/core/fwd"
	"github.com/peregrine-net/peregrine/core/lcore"
	"github.com/peregrine-net/peregrine/core/mbuf"
	_ "github.com/peregrine-net/peregrine/pmd/afxdp" // registers afxdp:
	"github.com/peregrine-net/peregrine/pmd/netns"
)

// setUp starts DUT d in the fwd namespace between its two interfaces and
// returns what stops it.
func (r *vethRun) setUp(ctx context.Context, d string) (func(), error) {
	switch d {
	case DUTFwd:
		return r.setUpFwd()
	case DUTKernel:
		return r.setUpBridge()
	case DUTTestpmd:
		return r.setUpTestpmd(ctx)
	case DUTExternal:
		// The user's device is already between the ports.
		return func() {}, nil
	}
	return nil, fmt.Errorf("unknown DUT %q", d)
}

// setUpFwd runs peregrine's io forwarding (core/fwd, as `peregrine fwd
// --mode io`) between two AF_XDP ports, both directions as testpmd's io
// mode polls them, on one busy-polling loop pinned to the DUT CPU, with
// the AF_XDP busy budget DPDK's net_af_xdp applies by default.
func (r *vethRun) setUpFwd() (func(), error) {
	t := r.topo
	spec := func(ifname string) string { return fmt.Sprintf("afxdp:%s?netns=%s&busy_budget=64", ifname, t.Fwd.Name) }
	var p *app.Pipeline
	var err error
	// A socket bound right after the last one on the interface closed can
	// meet EBUSY for a moment.
	for try := 0; try < 20; try++ {
		p, err = app.New(app.Options{
			Pool:   mbuf.Options{Name: "rfc2544-fwd", Frames: 16384},
			Ports:  []string{spec(t.FwdGenIf), spec(t.FwdSinkIf)},
			Lcores: []app.Lcore{{Name: "rfc2544-fwd", CPU: dutCPU}},
			Idle:   lcore.IdlePolicy{Mode: lcore.IdleBusy},
		})
		if !errors.Is(err, syscall.EBUSY) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return nil, err
	}
	in, out := p.Port(0), p.Port(1)
	q := func(i int) []app.Queue { return []app.Queue{{Port: p.Port(i), Queue: 0}} }
	there, err := fwd.New(fwd.Options{Mode: fwd.ModeIO, In: in, Out: out, Pool: p.Pool(), Cache: p.Cache(0)})
	if err == nil {
		err = p.Add(app.Stage{Stage: there, Rx: q(0), Tx: q(1)})
	}
	if err == nil {
		var back *fwd.Forwarder
		if back, err = fwd.New(fwd.Options{Mode: fwd.ModeIO, In: out, Out: in, Pool: p.Pool(), Cache: p.Cache(0)}); err == nil {
			err = p.Add(app.Stage{Stage: back})
		}
	}
	if err == nil {
		err = p.Start()
	}
	if err != nil {
		return nil, errors.Join(err, p.Stop())
	}
	return func() {
		if err := p.Stop(); err != nil {
			fmt.Fprintf(r.opts.Out, "# fwd: stopping: %v\n", err)
		}
	}, nil
}

// setUpBridge joins the two interfaces with a Linux bridge (the kernel's
// forwarding, in softirq, where the frames arrive).
func (r *vethRun) setUpBridge() (func(), error) {
	t := r.topo
	br := "br" + t.FwdGenIf[:len(t.FwdGenIf)-len(netns.FwdGenIfSuffix)]
	del, err := t.Bridge(br[:min(len(br), netns.MaxIfNameLen)])
	if err != nil {
		return nil, err
	}
	return func() {
		if err := del(); err != nil {
			fmt.Fprintf(r.opts.Out, "# kernel: deleting the bridge: %v\n", err)
		}
	}, nil
}

// setUpTestpmd runs dpdk-testpmd in io mode over net_af_xdp on the two
// interfaces (-l 0,1: main lcore 0, forwarding lcore 1) for as long as
// the size's measurements take (at most anchor.MaxTestpmdDuration).
func (r *vethRun) setUpTestpmd(ctx context.Context) (func(), error) {
	t := r.topo
	runCtx, cancel := context.WithCancel(ctx)
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := anchor.Testpmd(runCtx, anchor.TestpmdOptions{
			Netns: t.Fwd.Name, ForwardMode: "io", Lcores: fmt.Sprintf("%d,%d", trafficCPU, dutCPU), Duration: anchor.MaxTestpmdDuration,
			Vdevs: []string{
				fmt.Sprintf("net_af_xdp0,iface=%s,start_queue=0,queue_count=1", t.FwdGenIf),
				fmt.Sprintf("net_af_xdp1,iface=%s,start_queue=0,queue_count=1", t.FwdSinkIf),
			},
			BeforeStart: func() { close(started) },
		})
		done <- err
	}()
	stop := func() {
		cancel()
		<-done
		// A killed testpmd leaves its XDP programs (libxdp attaches them
		// through netlink): remove them for the next DUT.
		for _, ifname := range []string{t.FwdGenIf, t.FwdSinkIf} {
			if _, err := t.Fwd.ClearXDP(ifname); err != nil {
				fmt.Fprintf(r.opts.Out, "# testpmd: %v\n", err)
			}
		}
	}
	select {
	case <-started:
		// The warm-up trial waits until it forwards.
		return stop, nil
	case err := <-done:
		cancel()
		return nil, fmt.Errorf("testpmd: %w", err)
	}
}
