package rpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/peregrine-net/peregrine"
	"github.com/peregrine-net/peregrine/app"
	"github.com/peregrine-net/peregrine/app/traffic"
	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/lcore"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/rt/txn"
	"github.com/peregrine-net/peregrine/core/wire"
)

const (
	// CeilingTime is how long the veth frame ceiling is measured at the
	// default count, after a tenth of it of warm-up.
	CeilingTime = 1500 * time.Millisecond
	// minCeilingTime is the shortest measured window, whatever the count.
	minCeilingTime = 100 * time.Millisecond
	// ceilingFrames is the ceiling's packet pool, as large as the public
	// package's default host pool that the endpoints share.
	ceilingFrames = 16384
)

// ceilingTime is the ceiling's measured window: CeilingTime at the
// default count, in proportion to a smaller count (a quick run stays
// quick), at least minCeilingTime, never longer than a row may measure.
func ceilingTime(o Options) time.Duration {
	d := CeilingTime * time.Duration(min(o.Count, DefaultCount)) / DefaultCount
	return min(max(d, minCeilingTime), CeilingTime, o.RowTime)
}

// ceiling is what the veth pair carries from an AF_XDP socket on one end
// to one on the other, in frames of the transport's size sent as fast as
// the socket takes them, with nothing but a generator and a sink on the
// endpoints' CPUs: what the path gives the transport's frames in this
// run, with no transport work in the way.
type ceiling struct {
	window   time.Duration
	sent     uint64 // frames the generator gave the sending socket in the window
	arrived  uint64 // generated frames the sink took from the receiving socket in the window
	frameLen int    // bytes a frame, Ethernet header included (no FCS)
	segment  int    // transport payload bytes a frame of frameLen carries
	mtu      int
}

// payloadBps is the transport payload the arrived frames could have
// carried, bits/s: the ceiling a transfer's goodput is held to.
func (c ceiling) payloadBps() float64 {
	return float64(c.arrived) * float64(c.segment) * 8 / c.window.Seconds()
}

// print prints the ceiling's note, after its FIGURE line when figure (a
// round's ceiling is a note only: the figure is the rounds' median).
func (c ceiling) print(w io.Writer, figure bool) {
	secs := c.window.Seconds()
	if figure {
		c.figure(w)
	}
	fmt.Fprintf(w, "  # veth AF_XDP frame ceiling: %d frames of %d B (the pair's MTU %d plus the Ethernet header, the transport's full frame) arrived at an AF_XDP socket on %s from one on %s in %v, %.3f Mframes/s (%d sent, %.3f Gbit/s of frames); counted: the transport's payload per such frame, %d B, times the frames that arrived\n",
		c.arrived, c.frameLen, c.mtu, ifB, ifA, c.window.Round(time.Millisecond), float64(c.arrived)/secs/1e6, c.sent,
		float64(c.arrived)*float64(c.frameLen)*8/secs/1e9, c.segment)
}

func (c ceiling) figure(w io.Writer) {
	fmt.Fprintf(w, "FIGURE rpc_veth_afxdp_frame_ceiling_gbps %.3f\n", c.payloadBps()/1e9)
}

// share says what part of the ceiling a goodput (bytes/s) is, for a
// ratio's detail; without a ceiling, why there is none.
func (c *ceiling) share(bps float64, err error) string {
	if c == nil {
		return fmt.Sprintf("the AF_XDP frame ceiling was not measured: %v", err)
	}
	return fmt.Sprintf("%.0f %% of the AF_XDP frame ceiling %.3f Gbit/s measured in this run", 100*bps*8/c.payloadBps(), c.payloadBps()/1e9)
}

// vethCeiling measures the ceiling on m's veth pair (no door may have its
// ports open) and prints it; a failure is printed and returned, not the
// end of the run, unless ctx ended.
func vethCeiling(ctx context.Context, o Options, m *media) (*ceiling, error) {
	c, err := measureCeiling(ctx, o, m)
	if err != nil {
		err = fmt.Errorf("veth AF_XDP frame ceiling: %w", err)
		fmt.Fprintf(o.Out, "  # %v\n", err)
		return nil, err
	}
	c.print(o.Out, o.Rounds <= 1)
	return &c, nil
}

// measureCeiling opens the endpoints' two ports in one app.Pipeline, the
// library under `peregrine gen` and `gen --rx`: a generator on m.specA's
// port (loop on cpuA) sends frames of the transport's full size as fast
// as the socket takes them, a sink on m.specB's (loop on cpuB) counts
// what arrives. Both loops idle as the endpoints' do (Options.Idle): the
// kernel carries the frames across the pair on the same CPUs, so the
// loops leave it what the endpoints' loops would. Frames are counted
// between the warm-up's end and the window's; the sink's foreign frames
// (anything not generated, such as the kernel's IPv6 neighbour
// discovery) are subtracted.
func measureCeiling(ctx context.Context, o Options, m *media) (c ceiling, err error) {
	// Two pinned loops, busy while the frames flow, hold a processor
	// each: this goroutine needs another to end the window.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(runtime.NumCPU() + 2))
	cpuA, cpuB := m.cpuA, m.cpuB
	if o.NoPin {
		cpuA, cpuB = -1, -1
	}
	p, err := app.New(app.Options{
		Pool:   mbuf.Options{Name: "bench-rpc-ceiling", Frames: ceilingFrames},
		Ports:  []string{m.specA, m.specB},
		Lcores: []app.Lcore{{CPU: cpuA}, {CPU: cpuB}},
		Idle:   lcore.IdlePolicy{Mode: loopIdle(o.Idle)},
	})
	if err != nil {
		return c, err
	}
	defer func() { err = errors.Join(err, p.Stop()) }()
	tx, rx := p.Port(0), p.Port(1)
	c.mtu = tx.Info().MTU
	if c.segment, err = transportSegment(tx, p.Pool()); err != nil {
		return c, err
	}
	// afxdp refuses a port whose MTU its pool's frames cannot hold, so a
	// full MTU is the transport's frame: its full segments fill it.
	c.frameLen = wire.EthHeaderLen + c.mtu
	gens, err := p.AddGenerators(app.GeneratorsOptions{Port: 0, Sizes: traffic.FixedSize(c.frameLen),
		SrcMAC: tx.Info().MAC, DstMAC: rx.Info().MAC, Loops: []int{0}})
	if err != nil {
		return c, err
	}
	sinks, err := p.AddSinks(app.SinksOptions{Port: 1, Loops: []int{1}})
	if err != nil {
		return c, err
	}
	if err := p.Start(); err != nil {
		return c, err
	}
	d := ceilingTime(o)
	if _, stopped, err := p.Run(ctx, app.RunOptions{Duration: d / 10}); err != nil || stopped {
		return c, errors.Join(err, ctx.Err())
	}
	f0, s0, t0 := sinks.Frames(), gens.Stats().Sent, time.Now()
	if _, stopped, err := p.Run(ctx, app.RunOptions{Duration: d}); err != nil || stopped {
		return c, errors.Join(err, ctx.Err())
	}
	f1, s1, t1 := sinks.Frames(), gens.Stats().Sent, time.Now()
	if err := p.StopLoops(); err != nil {
		return c, err
	}
	st, _ := sinks.Stats()
	c.window, c.sent = t1.Sub(t0), s1-s0
	c.arrived = f1 - f0 - min(st.Foreign, f1-f0)
	if c.arrived == 0 {
		return c, fmt.Errorf("no generated frame arrived in %v (%d sent, %d received in all, %d of them foreign)", c.window.Round(time.Millisecond), c.sent, f1, st.Foreign)
	}
	return c, nil
}

// transportSegment is the payload the transport puts in a frame on pt
// with frames from pool, asked of the transport itself, as the public
// package's endpoints configure it (sealed, no global QPNs).
func transportSegment(pt port.Port, pool *mbuf.Pool) (int, error) {
	ep, err := txn.New(txn.Options{Transport: rt.Options{Port: pt, Pool: pool, Clock: clock.NewReal(), LocalIP: ipA, LocalMAC: [6]byte(pt.Info().MAC)}})
	if err != nil {
		return 0, err
	}
	seg := ep.Segment()
	return seg, ep.Close()
}

// loopIdle is the lcore idle mode of an endpoint's loop with idle.
func loopIdle(idle peregrine.Idle) lcore.IdleMode {
	switch idle {
	case peregrine.IdleBusy:
		return lcore.IdleBusy
	case peregrine.IdleSleep:
		return lcore.IdleSleep
	}
	return lcore.IdleAdaptive
}
