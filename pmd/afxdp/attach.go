package afxdp

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// Attachments shares the XDP program of an interface between the ports
// opened with it (Options.Attachments): the first port on an interface
// loads and attaches the program, later ports add their sockets to its
// XSKMAP, and the last one to close detaches it. The pmd registry keeps one
// per pmd.Env. Safe for concurrent use.
type Attachments struct {
	mu sync.Mutex
	m  map[attachKey]*attachment
}

// NewAttachments returns an empty table.
func NewAttachments() *Attachments {
	return &Attachments{m: make(map[attachKey]*attachment)}
}

// attachKey names an interface: namespace name ("" for the caller's) and
// index, which is unique only within its namespace.
type attachKey struct {
	netns string
	index int
}

// attachment is one program attached to one interface through a BPF link;
// closing the link (or the process dying) detaches it.
type attachment struct {
	key       attachKey
	ifname    string
	table     *Attachments // nil when private to one port
	refs      int
	udpPort   int
	shardBits int
	frags     bool         // the program takes multi-buffer frames (BPF_F_XDP_HAS_FRAGS)
	mode      Mode         // ModeNative or ModeGeneric: what the kernel accepted
	queues    map[int]bool // interface queues whose sockets are in the map
	prog      *program
	link      link.Link
}

// acquire returns the attachment of li, attaching the program first if no
// port of the table has, and claims the interface queues [first, first+n).
// It must run inside li's namespace.
func acquire(table *Attachments, key attachKey, li linkInfo, opts Options, frags bool, log *slog.Logger) (*attachment, error) {
	if table != nil {
		table.mu.Lock()
		defer table.mu.Unlock()
		if a := table.m[key]; a != nil {
			if err := a.compatible(opts, frags); err != nil {
				return nil, err
			}
			if err := a.claim(opts.Queue, opts.Queues); err != nil {
				return nil, err
			}
			a.refs++
			return a, nil
		}
	}
	if li.XDPProg != 0 {
		return nil, foreignProgramError(li.Name, li.XDPMode, li.XDPProg)
	}
	prog, err := loadProgram(li.Queues, uint16(opts.UDPPort), opts.ShardBits, frags)
	if err != nil {
		return nil, err
	}
	l, mode, err := attachProgram(prog, li, opts.Mode, log)
	if err != nil {
		prog.Close()
		return nil, err
	}
	a := &attachment{
		key: key, ifname: li.Name, table: table, refs: 1,
		udpPort: opts.UDPPort, shardBits: opts.ShardBits, mode: mode, frags: frags,
		queues: make(map[int]bool), prog: prog, link: l,
	}
	if err := a.claim(opts.Queue, opts.Queues); err != nil {
		a.detach()
		return nil, err
	}
	if table != nil {
		table.m[key] = a
	}
	return a, nil
}

func (a *attachment) compatible(opts Options, frags bool) error {
	if a.frags != frags {
		return fmt.Errorf("%w: %s already carries peregrine's XDP program for frames of %s; this port's pool needs %s (ports of one interface share one program: use pools of the same class, FrameSize up to a page or above it)",
			ErrInvalidOptions, a.ifname, chunkClass(a.frags), chunkClass(frags))
	}
	if a.udpPort != opts.UDPPort {
		return fmt.Errorf("%w: %s already carries peregrine's XDP program with udp_port=%d; this port asks for udp_port=%d (ports of one interface share one program: use the same udp_port)",
			ErrInvalidOptions, a.ifname, a.udpPort, opts.UDPPort)
	}
	if a.shardBits != opts.ShardBits {
		return fmt.Errorf("%w: %s already carries peregrine's XDP program with shard_bits=%d; this port asks for shard_bits=%d (ports of one interface share one program: use the same shard_bits)",
			ErrInvalidOptions, a.ifname, a.shardBits, opts.ShardBits)
	}
	if opts.Mode != ModeAuto && opts.Mode != a.mode {
		return fmt.Errorf("%w: %s already carries peregrine's XDP program in %s mode; this port asks for mode=%s (use mode=%s or auto)",
			ErrInvalidOptions, a.ifname, a.mode, opts.Mode, a.mode)
	}
	return nil
}

func (a *attachment) claim(first, n int) error {
	for q := first; q < first+n; q++ {
		if a.queues[q] {
			return fmt.Errorf("%w: queue %d of %s is already open by another afxdp port (close it first, or pick another queue)", ErrQueueBusy, q, a.ifname)
		}
	}
	for q := first; q < first+n; q++ {
		a.queues[q] = true
	}
	return nil
}

// setSocket points the program at fd for interface queue q.
func (a *attachment) setSocket(q, fd int) error {
	if err := a.prog.xsks.Put(uint32(q), uint32(fd)); err != nil {
		return fmt.Errorf("afxdp: add the socket of queue %d to the XSKMAP: %w", q, err)
	}
	return nil
}

// release drops the queues [first, first+n) and one reference, detaching
// the program with the last one.
func (a *attachment) release(first, n int) error {
	if a.table != nil {
		a.table.mu.Lock()
		defer a.table.mu.Unlock()
	}
	var errs []error
	for q := first; q < first+n; q++ {
		if a.queues[q] {
			delete(a.queues, q)
			// A queue whose socket was never added has no entry: that is fine.
			if err := a.prog.xsks.Delete(uint32(q)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				errs = append(errs, fmt.Errorf("afxdp: remove queue %d from the XSKMAP: %w", q, err))
			}
		}
	}
	a.refs--
	if a.refs == 0 {
		if a.table != nil && a.table.m[a.key] == a {
			delete(a.table.m, a.key)
		}
		errs = append(errs, a.detach())
	}
	return errors.Join(errs...)
}

func (a *attachment) detach() error {
	var errs []error
	if a.link != nil {
		if err := a.link.Close(); err != nil {
			errs = append(errs, fmt.Errorf("afxdp: detach XDP program from %s: %w", a.ifname, err))
		}
	}
	errs = append(errs, a.prog.Close())
	return errors.Join(errs...)
}

// attachProgram links prog to the interface in the mode asked for; ModeAuto
// tries native first. It never replaces an attached program: the kernel
// refuses a link over an existing program, and that refusal is reported as
// ErrForeignProgram.
func attachProgram(p *program, li linkInfo, mode Mode, log *slog.Logger) (link.Link, Mode, error) {
	try := func(m Mode) (link.Link, error) {
		l, err := link.AttachXDP(link.XDPOptions{Program: p.prog, Interface: li.Index, Flags: attachFlags(m)})
		if err != nil {
			return nil, attachError(li, m, err)
		}
		return l, nil
	}
	if mode != ModeAuto {
		l, err := try(mode)
		return l, mode, err
	}
	l, err := try(ModeNative)
	if err == nil {
		return l, ModeNative, nil
	}
	if errors.Is(err, ErrForeignProgram) || errors.Is(err, ErrPermission) {
		return nil, "", err
	}
	log.Warn("afxdp: native XDP refused, falling back to generic mode (slower)", "interface", li.Name, "reason", err)
	l, err = try(ModeGeneric)
	return l, ModeGeneric, err
}

// attachError explains why the kernel refused a link.
func attachError(li linkInfo, m Mode, err error) error {
	switch {
	case errors.Is(err, unix.EBUSY) || errors.Is(err, unix.EEXIST):
		mode, prog, qerr := xdpState(li.Index)
		if qerr == nil && prog != 0 {
			return foreignProgramError(li.Name, mode, prog)
		}
		return fmt.Errorf("%w: attaching in %s mode to %s: %w", ErrForeignProgram, m, li.Name, err)
	case errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES):
		return fmt.Errorf("%w: attach XDP program to %s: %w", ErrPermission, li.Name, err)
	case m == ModeNative && errors.Is(err, unix.ERANGE):
		return fmt.Errorf("%w: native XDP on %s refused: its MTU %d (or its peer's) is above what the driver allows for XDP (a veth allows at most %d with %d-byte pages); lower the MTU or use mode=generic: %w",
			ErrNotSupported, li.Name, li.MTU, vethXDPMaxMTU(), os.Getpagesize(), err)
	case m == ModeNative && (errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL)):
		return fmt.Errorf("%w: native XDP on %s refused (the driver may lack XDP support; use mode=generic or auto): %w", ErrNotSupported, li.Name, err)
	default:
		return fmt.Errorf("afxdp: attach XDP program to %s in %s mode: %w", li.Name, m, err)
	}
}

func foreignProgramError(ifname string, mode uint8, id uint32) error {
	desc := fmt.Sprintf("id %d", id)
	if p, err := ebpf.NewProgramFromID(ebpf.ProgramID(id)); err == nil {
		if info, err := p.Info(); err == nil && info.Name != "" {
			desc = fmt.Sprintf("id %d %q", id, info.Name)
		}
		p.Close()
	}
	if strings.Contains(desc, ProgramName) {
		return fmt.Errorf("%w: %s already has XDP program %s attached in %s mode, attached by another afxdp port or process; this port will not detach it (ports that share an interface must be opened with one Options.Attachments, as the pmd registry does per Env)",
			ErrForeignProgram, ifname, desc, xdpModeName(mode))
	}
	return fmt.Errorf("%w: %s already has XDP program %s attached in %s mode, which peregrine did not attach and will not detach; remove it yourself (ip link set dev %s xdp off) or use another interface",
		ErrForeignProgram, ifname, desc, xdpModeName(mode), ifname)
}

// privilegeError wraps EPERM with the capabilities AF_XDP needs.
func privilegeError(what string, err error) error {
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
		return fmt.Errorf("%w: %s: %w", ErrPermission, what, err)
	}
	return fmt.Errorf("afxdp: %s: %w", what, err)
}

// vethXDPMaxMTU is the largest MTU veth accepts for a native XDP program
// without multi-buffer support: one page minus XDP_PACKET_HEADROOM, the
// skb_shared_info tail (320 bytes on x86-64) and the Ethernet header.
// Measured: 3506 with 4 KiB pages on kernel 6.18.
func vethXDPMaxMTU() int {
	const sharedInfo = 320
	return os.Getpagesize() - xdpPacketHeadroom - sharedInfo - ethHeaderLen
}

func chunkClass(frags bool) string {
	if frags {
		return "several UMEM chunks (FrameSize above a page)"
	}
	return "one UMEM chunk"
}
