package kgen

import (
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/peregrine-net/peregrine/pmd/netns"
)

// Defaults and limits of Options.
const (
	// DefaultCallTime: each live-frame run costs the kernel ~25 ms of
	// set-up and tear-down on top of its frames (measured here: 1024
	// frames per call give 0.04 Mpps, 2^16 give 2 Mpps, 2^22 give 6.5
	// Mpps into an XDP drop), so calls must be long; 200 ms keeps that
	// overhead near 12 % while Stop still returns promptly.
	DefaultCallTime = 200 * time.Millisecond
	MinCallTime     = 50 * time.Millisecond // twice the fixed cost of a call
	MaxCallTime     = 10 * time.Second
	// Bounds of the frames per call, which adapt to the call time.
	firstBatch = 1 << 16
	minBatch   = 1 << 8
	maxBatch   = 1 << 26
	// minTemplate is the shortest template the kernel accepts (an
	// Ethernet header).
	minTemplate = 14
)

// Options configure Start. The zero value pins the generator to CPU 0 with
// DefaultCallTime.
type Options struct {
	// CPU is the CPU the generating thread is pinned to; -1 leaves it
	// unpinned. The frames' transmission, and the receiving veth end's XDP
	// and NAPI work, run on this CPU.
	CPU int
	// CallTime is how long one bpf(2) call should last, MinCallTime..
	// MaxCallTime: the generator sizes each call's batch from the last
	// call's pace. It bounds how long Stop waits and how often Sent moves.
	// Default DefaultCallTime.
	CallTime time.Duration
}

// ErrStopped is returned by Stop when it is called a second time.
var ErrStopped = errors.New("kgen: generator already stopped")

// Gen is a running generator.
type Gen struct {
	stop    atomic.Bool
	sent    atomic.Uint64
	started chan struct{} // closed once the first frame went out
	done    chan error    // the generating goroutine's result

	stopOnce sync.Once
}

// Start floods ifname in ns (nil: the caller's namespace) with copies of
// frame until Stop. It returns once the kernel has accepted the program and
// generated a first frame, so a frame the kernel refuses (longer than a page
// allows, say) or a missing interface fails here. The receiving end of a
// veth must run a native XDP program or have GRO on, or the kernel drops
// the frames silently.
func Start(ns *netns.NS, ifname string, frame []byte, opts Options) (*Gen, error) {
	if opts.CallTime == 0 {
		opts.CallTime = DefaultCallTime
	}
	if opts.CallTime < MinCallTime || opts.CallTime > MaxCallTime {
		return nil, fmt.Errorf("kgen: Options.CallTime %v is out of range (use %v..%v, or 0 for %v)", opts.CallTime, MinCallTime, MaxCallTime, DefaultCallTime)
	}
	if opts.CPU < -1 {
		return nil, fmt.Errorf("kgen: Options.CPU %d is invalid (use a CPU number, or -1 for unpinned)", opts.CPU)
	}
	if len(frame) < minTemplate {
		return nil, fmt.Errorf("kgen: frame of %d bytes is shorter than an Ethernet header (build one with UDPFrame)", len(frame))
	}
	if ifname == "" {
		return nil, errors.New("kgen: no interface named (pass the veth end to send from, e.g. \"pg-g0\")")
	}
	template := append([]byte(nil), frame...)
	g := &Gen{started: make(chan struct{}), done: make(chan error, 1)}
	go func() {
		g.done <- inNamespace(ns, func() error { return g.run(ifname, template, opts) })
	}()
	select {
	case <-g.started:
		return g, nil
	case err := <-g.done: // failed before generating anything
		return nil, err
	}
}

// Sent is the number of frames generated so far, counted per call (every
// Options.CallTime or so): frames
// the kernel built and handed to the interface (those it then dropped, for
// want of room at the receiver, are included).
func (g *Gen) Sent() uint64 { return g.sent.Load() }

// Stop ends the generator, waits for its last batch and returns the frames
// generated and the first error it met. Later calls return ErrStopped.
func (g *Gen) Stop() (sent uint64, err error) {
	err = ErrStopped
	g.stopOnce.Do(func() {
		g.stop.Store(true)
		err = <-g.done
	})
	return g.sent.Load(), err
}

// inNamespace runs fn on a locked thread in ns (or in the caller's
// namespace when ns is nil). fn pins that thread, so it is locked once more
// and never unlocked: when the goroutine ends the runtime destroys the
// thread instead of reusing one with a changed CPU mask.
func inNamespace(ns *netns.NS, fn func() error) error {
	if ns == nil {
		runtime.LockOSThread()
		return fn()
	}
	return ns.Do(func() error {
		runtime.LockOSThread()
		return fn()
	})
}

// keepResident attaches prog, in generic mode, to the namespace's loopback
// interface, where it never sees a frame, so that it stays in the kernel's
// XDP dispatcher. A live-frame test run installs its program in that
// dispatcher at the start and removes it at the end, and each change waits
// for an RCU grace period: the generating CPU then sat idle for as long as
// the other CPUs' kernels took to pass one, which depended on the device
// under test (measured here with one thread per call: CPU 0 idle 12 % of the
// time next to testpmd forwarding on CPU 1, 35-42 % next to peregrine). With
// the program already installed, the test run only counts a reference. It
// returns nil (and calls pay the grace periods) when the attach fails.
func keepResident(prog *ebpf.Program) link.Link {
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		return nil
	}
	l, err := link.AttachXDP(link.XDPOptions{Program: prog, Interface: lo.Index, Flags: link.XDPGenericMode})
	if err != nil {
		return nil
	}
	return l
}

// run loads the program, pins the thread and generates until stopped.
func (g *Gen) run(ifname string, template []byte, opts Options) error {
	ifc, err := net.InterfaceByName(ifname)
	if err != nil {
		return fmt.Errorf("kgen: interface %q: %w", ifname, err)
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: "pg_kgen", Type: ebpf.XDP, License: "Dual MIT/GPL",
		Instructions: asm.Instructions{
			asm.Mov.Imm(asm.R1, int32(ifc.Index)),
			asm.Mov.Imm(asm.R2, 0),
			asm.FnRedirect.Call(),
			asm.Return(),
		},
	})
	if err != nil {
		return fmt.Errorf("kgen: loading the generator program (needs root: CAP_BPF, CAP_NET_ADMIN): %w", err)
	}
	defer prog.Close()
	if resident := keepResident(prog); resident != nil {
		defer resident.Close()
	}
	if opts.CPU >= 0 {
		var set unix.CPUSet
		set.Set(opts.CPU)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			return fmt.Errorf("kgen: pinning the generator to CPU %d: %w", opts.CPU, err)
		}
	}
	run := newTestRun(prog.FD(), template)
	if err := run.do(1); err != nil {
		return fmt.Errorf("kgen: live-frame test run of a %d-byte frame on %s: %w", len(template), ifname, err)
	}
	g.sent.Add(1)
	close(g.started)
	batch := uint64(firstBatch)
	for !g.stop.Load() {
		began := time.Now()
		if err := run.do(uint32(batch)); err != nil {
			return fmt.Errorf("kgen: live-frame test run on %s: %w", ifname, err)
		}
		g.sent.Add(batch)
		took := max(time.Since(began), time.Microsecond)
		batch = min(max(batch*uint64(opts.CallTime)/uint64(took), minBatch), maxBatch)
	}
	runtime.KeepAlive(template)
	return nil
}
