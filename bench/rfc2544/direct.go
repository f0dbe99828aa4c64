package rfc2544

import (
	"errors"
	"fmt"
	"net"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
)

// directPath joins the fwd namespace's two ends with the kernel's fastest
// path instead of a DUT: a native XDP program on the gen side's end that
// redirects every frame to the sink side's end (XDP_REDIRECT, no socket,
// no copy, no stack), so that a trial through it measures what the
// traffic side itself can offer and receive. It returns what removes it.
func (r *vethRun) directPath() (func() error, error) {
	t := r.topo
	var prog *ebpf.Program
	var l link.Link
	err := t.Fwd.Do(func() error {
		in, err := net.InterfaceByName(t.FwdGenIf)
		if err != nil {
			return err
		}
		out, err := net.InterfaceByName(t.FwdSinkIf)
		if err != nil {
			return err
		}
		prog, err = ebpf.NewProgram(&ebpf.ProgramSpec{
			Name: "rfc2544_direct", Type: ebpf.XDP, License: "GPL",
			Instructions: asm.Instructions{
				// return bpf_redirect(out, 0)
				asm.Mov.Imm(asm.R1, int32(out.Index)),
				asm.Mov.Imm(asm.R2, 0),
				asm.FnRedirect.Call(),
				asm.Return(),
			},
		})
		if err != nil {
			return fmt.Errorf("loading the redirect program: %w", err)
		}
		l, err = link.AttachXDP(link.XDPOptions{Program: prog, Interface: in.Index, Flags: link.XDPDriverMode})
		if err != nil {
			return fmt.Errorf("attaching the redirect program to %s: %w", t.FwdGenIf, err)
		}
		return nil
	})
	if err != nil {
		if prog != nil {
			err = errors.Join(err, prog.Close())
		}
		return nil, fmt.Errorf("rfc2544: the direct path in %s: %w", t.Fwd.Name, err)
	}
	return func() error { return errors.Join(l.Close(), prog.Close()) }, nil
}
