package kgen

import (
	"errors"
	"fmt"
	"net"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"

	"github.com/peregrine-net/peregrine/pmd/netns"
)

const xdpDrop = 1

// AttachDrop attaches a native XDP program that drops every frame to ifname
// in ns (nil: the caller's namespace): a sink that costs the receiving side
// almost nothing. detach removes it; it is idempotent.
func AttachDrop(ns *netns.NS, ifname string) (detach func() error, err error) {
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: "pg_drop", Type: ebpf.XDP, License: "Dual MIT/GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, xdpDrop), asm.Return()},
	})
	if err != nil {
		return nil, fmt.Errorf("kgen: loading the drop program (needs root: CAP_BPF, CAP_NET_ADMIN): %w", err)
	}
	l, err := attachNative(ns, ifname, prog)
	if err != nil {
		return nil, errors.Join(err, prog.Close())
	}
	var detached bool
	return func() error {
		if detached {
			return nil
		}
		detached = true
		return errors.Join(l.Close(), prog.Close())
	}, nil
}

// Sink is a native XDP program on one interface that counts and drops every
// frame.
type Sink struct {
	counts *ebpf.Map
	prog   *ebpf.Program
	link   link.Link
	cpus   int
}

// AttachSink attaches a counting drop program to ifname in ns (nil: the
// caller's namespace). The counter is a per-CPU array, so the program
// takes no lock and shares no cache line between CPUs.
func AttachSink(ns *netns.NS, ifname string) (*Sink, error) {
	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, fmt.Errorf("kgen: counting CPUs: %w", err)
	}
	counts, err := ebpf.NewMap(&ebpf.MapSpec{Name: "pg_sink_count", Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 1})
	if err != nil {
		return nil, fmt.Errorf("kgen: creating the sink's counter map (needs root: CAP_BPF): %w", err)
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: "pg_sink", Type: ebpf.XDP, License: "Dual MIT/GPL",
		Instructions: asm.Instructions{
			asm.StoreImm(asm.RFP, -4, 0, asm.Word), // key 0
			asm.LoadMapPtr(asm.R1, counts.FD()),
			asm.Mov.Reg(asm.R2, asm.RFP),
			asm.Add.Imm(asm.R2, -4),
			asm.FnMapLookupElem.Call(),
			asm.JEq.Imm(asm.R0, 0, "drop"),
			// This CPU's slot: no other CPU writes it, no atomic needed.
			asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord),
			asm.Add.Imm(asm.R1, 1),
			asm.StoreMem(asm.R0, 0, asm.R1, asm.DWord),
			asm.Mov.Imm(asm.R0, xdpDrop).WithSymbol("drop"),
			asm.Return(),
		},
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("kgen: loading the sink program: %w", err), counts.Close())
	}
	l, err := attachNative(ns, ifname, prog)
	if err != nil {
		return nil, errors.Join(err, prog.Close(), counts.Close())
	}
	return &Sink{counts: counts, prog: prog, link: l, cpus: cpus}, nil
}

// Count returns the frames the sink has dropped so far, summed over CPUs.
func (s *Sink) Count() (uint64, error) {
	if s.counts == nil {
		return 0, errors.New("kgen: Count on a detached sink")
	}
	perCPU := make([]uint64, s.cpus)
	if err := s.counts.Lookup(uint32(0), &perCPU); err != nil {
		return 0, fmt.Errorf("kgen: reading the sink counter: %w", err)
	}
	var total uint64
	for _, n := range perCPU {
		total += n
	}
	return total, nil
}

// Detach removes the program from the interface and frees it. It is
// idempotent.
func (s *Sink) Detach() error {
	if s.counts == nil {
		return nil
	}
	err := errors.Join(s.link.Close(), s.prog.Close(), s.counts.Close())
	s.counts = nil
	return err
}

// attachNative attaches prog in native (driver) mode through a BPF link,
// inside ns.
func attachNative(ns *netns.NS, ifname string, prog *ebpf.Program) (link.Link, error) {
	var l link.Link
	attach := func() error {
		ifc, err := net.InterfaceByName(ifname)
		if err != nil {
			return fmt.Errorf("kgen: interface %q: %w", ifname, err)
		}
		l, err = link.AttachXDP(link.XDPOptions{Program: prog, Interface: ifc.Index, Flags: link.XDPDriverMode})
		if err != nil {
			return fmt.Errorf("kgen: attaching %s to %s in native mode (is another XDP program there?): %w", prog, ifname, err)
		}
		return nil
	}
	var err error
	if ns == nil {
		err = attach()
	} else {
		err = ns.Do(attach)
	}
	return l, err
}
