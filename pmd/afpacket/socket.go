package afpacket

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/peregrine-net/peregrine/pmd/netns"
)

// ErrPermission is wrapped when the kernel refuses a socket operation for
// lack of privilege.
var ErrPermission = errors.New("afpacket: permission denied")

// permissionError names the capabilities an operation needs.
type permissionError struct {
	what string
	err  error
}

func (e *permissionError) Error() string {
	return e.what + ": " + e.err.Error() + " (AF_PACKET sockets need CAP_NET_RAW, promisc and fanout also CAP_NET_ADMIN: run as root)"
}

func (e *permissionError) Unwrap() []error { return []error{ErrPermission, e.err} }

// ErrNoInterface is wrapped when Options.Interface does not exist.
var ErrNoInterface = errors.New("afpacket: no such interface")

// link is what the driver learns about the interface.
type link struct {
	index int
	mac   net.HardwareAddr
	mtu   int
}

// ring is one socket with its mapped rings.
type ring struct {
	fd  int
	mem []byte // RX ring, then TX ring
}

// openRings creates one socket per queue, inside the namespace when
// Options.Netns is set, and returns them with the interface's description.
// On error nothing is left open.
func openRings(o *Options) (lk link, rings []ring, err error) {
	create := func() error {
		ifc, err := net.InterfaceByName(o.Interface)
		if err != nil {
			return noInterface(o, err)
		}
		lk = link{index: ifc.Index, mac: ifc.HardwareAddr, mtu: ifc.MTU}
		// Slots sized by default hold a frame of this MTU.
		o.mtu = ifc.MTU
		if err := o.validate(); err != nil {
			return err
		}
		var fanoutID uint32
		for q := range o.Queues {
			r, err := openRing(o, lk.index)
			if err != nil {
				return fmt.Errorf("queue %d: %w", q, err)
			}
			rings = append(rings, r)
			if q == 0 && o.Promisc {
				mreq := unix.PacketMreq{Ifindex: int32(lk.index), Type: unix.PACKET_MR_PROMISC}
				if err := unix.SetsockoptPacketMreq(r.fd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, &mreq); err != nil {
					return sockErr("promisc (PACKET_ADD_MEMBERSHIP)", err)
				}
			}
			if o.Queues > 1 {
				if fanoutID, err = joinFanout(r.fd, o.Fanout, q == 0, fanoutID); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if o.Netns == "" {
		err = create()
	} else {
		ns, nsErr := netns.Open(o.Netns)
		if nsErr != nil {
			return link{}, nil, fmt.Errorf("afpacket: %w", nsErr)
		}
		err = ns.Do(create)
	}
	if err != nil {
		for _, r := range rings {
			r.close()
		}
		var unknown *unknownInterfaceError
		if errors.As(err, &unknown) {
			return link{}, nil, err
		}
		return link{}, nil, fmt.Errorf("afpacket: %s: %w", o.Interface, err)
	}
	return lk, rings, nil
}

type unknownInterfaceError struct {
	msg   string
	cause error
}

func (e *unknownInterfaceError) Error() string { return e.msg }
func (e *unknownInterfaceError) Unwrap() []error {
	return []error{ErrNoInterface, e.cause}
}

// noInterface builds the error for a missing interface, listing the ones
// that exist where we looked. It runs inside the namespace.
func noInterface(o *Options, cause error) error {
	where := "this network namespace"
	if o.Netns != "" {
		where = fmt.Sprintf("network namespace %q", o.Netns)
	}
	names, err := netns.InterfaceNames(nil)
	list := strings.Join(names, ", ")
	if err != nil {
		list = "(cannot list: " + err.Error() + ")"
	}
	return &unknownInterfaceError{
		msg:   fmt.Sprintf("afpacket: no interface %q in %s (interfaces there: %s)", o.Interface, where, list),
		cause: cause,
	}
}

func sockErr(what string, err error) error {
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
		return &permissionError{what: what, err: err}
	}
	return fmt.Errorf("%s: %w", what, err)
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// openRing creates, configures, maps and binds one queue's socket. The
// socket is created with protocol 0, so it receives nothing until bind,
// when its ring is ready.
func openRing(o *Options, ifindex int) (r ring, err error) {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return ring{}, sockErr("socket(AF_PACKET, SOCK_RAW)", err)
	}
	r.fd = fd
	defer func() {
		if err != nil {
			r.close()
			r = ring{}
		}
	}()
	setInt := func(name string, level, opt, v int) error {
		if err := unix.SetsockoptInt(fd, level, opt, v); err != nil {
			return sockErr(name, err)
		}
		return nil
	}
	version := unix.TPACKET_V2
	if o.Ring == RingV3 {
		version = unix.TPACKET_V3
	}
	if err := setInt("PACKET_VERSION "+o.Ring.String(), unix.SOL_PACKET, unix.PACKET_VERSION, version); err != nil {
		return r, err
	}
	// A transmit slot the kernel rejects is skipped instead of stalling
	// the ring.
	if err := setInt("PACKET_LOSS", unix.SOL_PACKET, unix.PACKET_LOSS, 1); err != nil {
		return r, err
	}
	// Our own transmissions are not received back (kernels since 4.20;
	// older ones are filtered in RxBurst by packet type).
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1); err != nil && !errors.Is(err, unix.ENOPROTOOPT) {
		return r, sockErr("PACKET_IGNORE_OUTGOING", err)
	}
	// A virtio-net header in front of every frame lets TxBurst ask for
	// linear socket buffers (see doc.go); it must be set before the rings.
	if err := setInt("PACKET_VNET_HDR", unix.SOL_PACKET, unix.PACKET_VNET_HDR, 1); err != nil {
		return r, err
	}
	if o.QdiscBypass {
		if err := setInt("PACKET_QDISC_BYPASS", unix.SOL_PACKET, unix.PACKET_QDISC_BYPASS, 1); err != nil {
			return r, err
		}
	}
	// A V2 socket reads only the struct tpacket_req prefix of the
	// request, so one struct serves both versions.
	frames := uint32(o.BlockSize / o.FrameSize * o.BlockCount)
	rx := unix.TpacketReq3{
		Block_size: uint32(o.BlockSize),
		Block_nr:   uint32(o.BlockCount),
		Frame_size: uint32(o.FrameSize),
		Frame_nr:   frames,
	}
	if o.Ring == RingV3 {
		rx.Retire_blk_tov = uint32(o.BlockTimeout.Milliseconds())
	}
	if err := unix.SetsockoptTpacketReq3(fd, unix.SOL_PACKET, unix.PACKET_RX_RING, &rx); err != nil {
		return r, sockErr("PACKET_RX_RING", err)
	}
	tx := unix.TpacketReq3{
		Block_size: uint32(o.BlockSize),
		Block_nr:   uint32(o.txBlocks()),
		Frame_size: uint32(o.FrameSize),
		Frame_nr:   uint32(o.BlockSize / o.FrameSize * o.txBlocks()),
	}
	if err := unix.SetsockoptTpacketReq3(fd, unix.SOL_PACKET, unix.PACKET_TX_RING, &tx); err != nil {
		return r, sockErr("PACKET_TX_RING", err)
	}
	size := o.BlockSize * (o.BlockCount + o.txBlocks())
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return r, sockErr(fmt.Sprintf("mmap of the %d-byte rings", size), err)
	}
	r.mem = mem
	sa := unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifindex}
	if err := unix.Bind(fd, &sa); err != nil {
		return r, sockErr("bind", err)
	}
	return r, nil
}

// joinFanout adds fd to the queues' fanout group. The first socket creates
// a group with a kernel-chosen unique id, which the others then join.
func joinFanout(fd int, mode Fanout, first bool, id uint32) (uint32, error) {
	var kernelMode uint32
	switch mode {
	case FanoutHash:
		kernelMode = unix.PACKET_FANOUT_HASH | unix.PACKET_FANOUT_FLAG_DEFRAG
	case FanoutLB:
		kernelMode = unix.PACKET_FANOUT_LB
	case FanoutCPU:
		kernelMode = unix.PACKET_FANOUT_CPU
	case FanoutQM:
		kernelMode = unix.PACKET_FANOUT_QM
	}
	if first {
		v := (kernelMode | unix.PACKET_FANOUT_FLAG_UNIQUEID) << 16
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_FANOUT, int(v)); err != nil {
			return 0, sockErr("PACKET_FANOUT", err)
		}
		got, err := unix.GetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_FANOUT)
		if err != nil {
			return 0, sockErr("PACKET_FANOUT id", err)
		}
		return uint32(got) & 0xffff, nil
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_FANOUT, int(id|kernelMode<<16)); err != nil {
		return 0, sockErr("PACKET_FANOUT join", err)
	}
	return id, nil
}

func (r *ring) close() error {
	var errs []error
	if r.mem != nil {
		errs = append(errs, unix.Munmap(r.mem))
		r.mem = nil
	}
	if r.fd >= 0 {
		errs = append(errs, unix.Close(r.fd))
		r.fd = -1
	}
	return errors.Join(errs...)
}

// kernelDrops reads and resets the socket's PACKET_STATISTICS: the frames
// the kernel dropped because the receive ring was full.
func (r *ring) kernelDrops() (uint64, error) {
	// struct tpacket_stats is the prefix of tpacket_stats_v3 the kernel
	// fills for a V2 socket; Drops sits at the same place in both.
	st, err := unix.GetsockoptTpacketStats(r.fd, unix.SOL_PACKET, unix.PACKET_STATISTICS)
	if err != nil {
		return 0, err
	}
	return uint64(st.Drops), nil
}
