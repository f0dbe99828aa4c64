package xsk

import (
	"errors"
	"fmt"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Bind retries: right after an AF_XDP socket on the same queue was closed,
// the kernel may still be tearing its buffer pool down and bind fails with
// EBUSY for a few milliseconds.
const (
	bindAttempts = 8
	bindBackoff  = 5 * time.Millisecond
)

// Config describes one AF_XDP socket.
type Config struct {
	Ifindex int
	Queue   int
	// RingSize is the number of entries of each of the four rings, a power
	// of two.
	RingSize uint32
	// UMEM, ChunkSize and Headroom are registered as the socket's UMEM
	// (XDP_UMEM_REG) unless Shared is set. UMEM must be page-aligned and a
	// whole number of chunks.
	UMEM      []byte
	ChunkSize uint32
	Headroom  uint32
	// Shared, when set, makes the socket use Shared's UMEM
	// (XDP_SHARED_UMEM) with fill and completion rings of its own; the bind
	// mode and need-wakeup setting are then inherited from Shared.
	Shared *Socket
	// BindFlags are XDP_COPY or XDP_ZEROCOPY (or neither) and
	// XDP_USE_NEED_WAKEUP; ignored with Shared.
	BindFlags uint16
	// BusyPoll, when its Usec is not 0, turns on busy polling.
	BusyPoll BusyPoll
}

// BusyPoll is a socket's busy-polling setting (socket(7)).
type BusyPoll struct {
	// Usec is SO_BUSY_POLL: how long a receive call may poll the device
	// queue for frames, in microseconds; 0 is off.
	Usec int
	// Budget is SO_BUSY_POLL_BUDGET: the most frames one busy poll
	// processes.
	Budget int
	// Prefer is SO_PREFER_BUSY_POLL: the kernel leaves the queue to the
	// application's busy polls instead of its own softirq processing, as
	// long as the application keeps polling.
	Prefer bool
}

// OptionError is a socket option the kernel refused, with its reason.
type OptionError struct {
	Name  string // e.g. "SO_BUSY_POLL"
	Value int
	Errno unix.Errno
}

func (e *OptionError) Error() string {
	return fmt.Sprintf("the kernel refused %s=%d: %s (%v)", e.Name, e.Value, unix.ErrnoName(e.Errno), e.Errno)
}

func (e *OptionError) Unwrap() error { return e.Errno }

// SetBusyPoll applies bp to the socket, the three options in turn; the
// first the kernel refuses is returned as an *OptionError. Setting one
// above the system's default (net.core.busy_read) or turning Prefer on
// needs CAP_NET_ADMIN.
func (s *Socket) SetBusyPoll(bp BusyPoll) error { return setBusyPoll(s.fd, bp) }

func setBusyPoll(fd int, bp BusyPoll) error {
	prefer := 0
	if bp.Prefer {
		prefer = 1
	}
	for _, o := range []struct {
		name     string
		opt, val int
	}{
		{"SO_BUSY_POLL", unix.SO_BUSY_POLL, bp.Usec},
		{"SO_BUSY_POLL_BUDGET", unix.SO_BUSY_POLL_BUDGET, bp.Budget},
		{"SO_PREFER_BUSY_POLL", unix.SO_PREFER_BUSY_POLL, prefer},
	} {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, o.opt, o.val); err != nil {
			errno, _ := err.(unix.Errno)
			return &OptionError{Name: o.name, Value: o.val, Errno: errno}
		}
	}
	return nil
}

// BusyPollSettings reads the socket's busy-polling options back from the
// kernel (getsockopt): what it applies, whatever was asked. Budget is -1
// when the kernel does not report it.
func (s *Socket) BusyPollSettings() (BusyPoll, error) {
	var bp BusyPoll
	var err error
	if bp.Usec, err = unix.GetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_BUSY_POLL); err != nil {
		return bp, fmt.Errorf("xsk: getsockopt SO_BUSY_POLL: %w", err)
	}
	// Kernels up to 6.18 at least do not report the budget (ENOPROTOOPT):
	// it reads -1 then, and SetBusyPoll's success is all there is to know.
	if bp.Budget, err = unix.GetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_BUSY_POLL_BUDGET); errors.Is(err, unix.ENOPROTOOPT) {
		bp.Budget = -1
	} else if err != nil {
		return bp, fmt.Errorf("xsk: getsockopt SO_BUSY_POLL_BUDGET: %w", err)
	}
	prefer, err := unix.GetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_PREFER_BUSY_POLL)
	if err != nil {
		return bp, fmt.Errorf("xsk: getsockopt SO_PREFER_BUSY_POLL: %w", err)
	}
	bp.Prefer = prefer != 0
	return bp, nil
}

// Socket is one bound AF_XDP socket and its rings.
type Socket struct {
	fd       int
	Fill     *AddrRing // user → kernel: free chunks to receive into
	Comp     *AddrRing // kernel → user: transmitted addresses
	RX       *DescRing // kernel → user: received packets
	TX       *DescRing // user → kernel: packets to send
	zeroCopy bool
}

// Step names where Open failed, so callers can explain errno values that
// mean different things at different steps (EPERM at socket vs at bind).
type Step string

// The steps of Open.
const (
	StepSocket Step = "socket(AF_XDP)"
	StepUMEM   Step = "register UMEM"
	StepRings  Step = "set up rings"
	StepBind   Step = "bind"
	StepOption Step = "set socket option"
)

// OpError is returned by Open.
type OpError struct {
	Step Step
	Err  error
}

func (e *OpError) Error() string { return fmt.Sprintf("%s: %v", e.Step, e.Err) }
func (e *OpError) Unwrap() error { return e.Err }

// Open creates, configures and binds an AF_XDP socket. It must run in the
// network namespace of the interface; the socket stays there for its life
// and may be used from any thread afterwards.
func Open(cfg Config) (*Socket, error) {
	if cfg.RingSize == 0 || cfg.RingSize&(cfg.RingSize-1) != 0 {
		return nil, fmt.Errorf("xsk: ring size %d is not a power of two", cfg.RingSize)
	}
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, &OpError{StepSocket, err}
	}
	s := &Socket{fd: fd}
	if err := s.setup(cfg); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *Socket) setup(cfg Config) error {
	if cfg.Shared == nil {
		if err := registerUMEM(s.fd, cfg.UMEM, cfg.ChunkSize, cfg.Headroom); err != nil {
			return &OpError{StepUMEM, err}
		}
	}
	for _, opt := range []int{unix.XDP_UMEM_FILL_RING, unix.XDP_UMEM_COMPLETION_RING, unix.XDP_RX_RING, unix.XDP_TX_RING} {
		if err := unix.SetsockoptInt(s.fd, unix.SOL_XDP, opt, int(cfg.RingSize)); err != nil {
			return &OpError{StepRings, fmt.Errorf("ring size %d: %w", cfg.RingSize, err)}
		}
	}
	var off unix.XDPMmapOffsets
	if err := getsockopt(s.fd, unix.XDP_MMAP_OFFSETS, unsafe.Pointer(&off), unsafe.Sizeof(off)); err != nil {
		return &OpError{StepRings, fmt.Errorf("XDP_MMAP_OFFSETS: %w", err)}
	}
	var err error
	if s.Fill, err = mapAddrRing(s.fd, unix.XDP_UMEM_PGOFF_FILL_RING, off.Fr, cfg.RingSize, true); err != nil {
		return &OpError{StepRings, fmt.Errorf("mmap fill ring: %w", err)}
	}
	if s.Comp, err = mapAddrRing(s.fd, unix.XDP_UMEM_PGOFF_COMPLETION_RING, off.Cr, cfg.RingSize, false); err != nil {
		return &OpError{StepRings, fmt.Errorf("mmap completion ring: %w", err)}
	}
	if s.RX, err = mapDescRing(s.fd, unix.XDP_PGOFF_RX_RING, off.Rx, cfg.RingSize, false); err != nil {
		return &OpError{StepRings, fmt.Errorf("mmap RX ring: %w", err)}
	}
	if s.TX, err = mapDescRing(s.fd, unix.XDP_PGOFF_TX_RING, off.Tx, cfg.RingSize, true); err != nil {
		return &OpError{StepRings, fmt.Errorf("mmap TX ring: %w", err)}
	}
	if cfg.BusyPoll.Usec > 0 {
		if err := setBusyPoll(s.fd, cfg.BusyPoll); err != nil {
			return &OpError{StepOption, err}
		}
	}
	sa := &unix.SockaddrXDP{Ifindex: uint32(cfg.Ifindex), QueueID: uint32(cfg.Queue)}
	if cfg.Shared != nil {
		sa.Flags = unix.XDP_SHARED_UMEM
		sa.SharedUmemFD = uint32(cfg.Shared.fd)
	} else {
		sa.Flags = cfg.BindFlags
	}
	for attempt := 1; ; attempt++ {
		err = unix.Bind(s.fd, sa)
		if !errors.Is(err, unix.EBUSY) || attempt == bindAttempts {
			break
		}
		time.Sleep(time.Duration(attempt) * bindBackoff)
	}
	if err != nil {
		return &OpError{StepBind, err}
	}
	var opts struct{ flags uint32 }
	if err := getsockopt(s.fd, unix.XDP_OPTIONS, unsafe.Pointer(&opts), unsafe.Sizeof(opts)); err == nil {
		s.zeroCopy = opts.flags&unix.XDP_OPTIONS_ZEROCOPY != 0
	}
	return nil
}

func registerUMEM(fd int, area []byte, chunkSize, headroom uint32) error {
	if len(area) == 0 {
		return errors.New("empty UMEM area")
	}
	reg := unix.XDPUmemReg{
		Addr:     uint64(uintptr(unsafe.Pointer(unsafe.SliceData(area)))),
		Len:      uint64(len(area)),
		Size:     chunkSize,
		Headroom: headroom,
	}
	return setsockopt(fd, unix.XDP_UMEM_REG, unsafe.Pointer(&reg), unsafe.Sizeof(reg))
}

func setsockopt(fd, opt int, val unsafe.Pointer, size uintptr) error {
	_, _, errno := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.SOL_XDP, uintptr(opt), uintptr(val), size, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

func getsockopt(fd, opt int, val unsafe.Pointer, size uintptr) error {
	length := uint32(size)
	_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_XDP, uintptr(opt), uintptr(val), uintptr(unsafe.Pointer(&length)), 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// FD returns the socket's file descriptor (for the XSKMAP).
func (s *Socket) FD() int { return s.fd }

// ZeroCopy reports whether the kernel bound the socket in zero-copy mode.
func (s *Socket) ZeroCopy() bool { return s.zeroCopy }

// Stats are the kernel's counters of one socket (struct xdp_statistics).
type Stats struct {
	RxDropped            uint64 // dropped for lack of a chunk or a frame too big
	RxInvalidDescs       uint64 // bad addresses on the fill ring
	TxInvalidDescs       uint64 // bad descriptors on the TX ring
	RxRingFull           uint64 // dropped because the RX ring was full
	RxFillRingEmptyDescs uint64 // times the fill ring was found empty
	TxRingEmptyDescs     uint64 // times the TX ring was found empty
}

// Stats reads the socket's counters (a syscall: control path only).
func (s *Socket) Stats() (Stats, error) {
	var st unix.XDPStatistics
	if err := getsockopt(s.fd, unix.XDP_STATISTICS, unsafe.Pointer(&st), unsafe.Sizeof(st)); err != nil {
		return Stats{}, fmt.Errorf("xsk: XDP_STATISTICS: %w", err)
	}
	return Stats{
		RxDropped:            st.Rx_dropped,
		RxInvalidDescs:       st.Rx_invalid_descs,
		TxInvalidDescs:       st.Tx_invalid_descs,
		RxRingFull:           st.Rx_ring_full,
		RxFillRingEmptyDescs: st.Rx_fill_ring_empty_descs,
		TxRingEmptyDescs:     st.Tx_ring_empty_descs,
	}, nil
}

// Kick asks the kernel to process the TX ring (sendto with MSG_DONTWAIT)
// and returns the errno, 0 on success. It does not allocate.
//
// Kick and Wake are raw syscalls: they never sleep (MSG_DONTWAIT), so the
// Go scheduler need not know about them, and a poll loop must not lose its
// P in them. Through syscall.Syscall, a copy-mode sendto of a burst (tens
// of microseconds) outlasted sysmon's 20 µs tick, sysmon handed the loop's
// P to another thread whenever a goroutine was waiting, and the loop's
// thread then slept until the P came back: measured in the vs-testpmd io
// comparison, other threads took 6-20 % of the forwarding CPU that way.
// The price is that a stop-the-world waits for a kick in progress (at
// most one TX budget of frames, ~2 ms for 2048).
func (s *Socket) Kick() unix.Errno {
	_, _, errno := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(s.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
	return errno
}

// Wake asks the kernel to process the fill and RX rings (recvfrom with
// MSG_DONTWAIT) and returns the errno, 0 on success. It does not allocate.
// A raw syscall, like Kick.
func (s *Socket) Wake() unix.Errno {
	_, _, errno := unix.RawSyscall6(unix.SYS_RECVFROM, uintptr(s.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
	return errno
}

// NAPIID returns the id of the NAPI context the kernel last delivered a
// frame to this socket from (SO_INCOMING_NAPI_ID), or 0 while there is
// none: until then a busy poll (Wake on a socket with BusyPoll) has
// no NAPI to poll and enters the kernel for nothing. A syscall: call it
// rarely. It does not allocate.
func (s *Socket) NAPIID() uint32 {
	var id uint32
	length := uint32(unsafe.Sizeof(id))
	_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(s.fd), unix.SOL_SOCKET, unix.SO_INCOMING_NAPI_ID,
		uintptr(unsafe.Pointer(&id)), uintptr(unsafe.Pointer(&length)), 0)
	if errno != 0 {
		return 0
	}
	return id
}

// Close unmaps the rings and closes the socket. Once it returns the kernel
// holds no UMEM address of this socket any more. Close is idempotent.
func (s *Socket) Close() error {
	var errs []error
	if s.Fill != nil {
		errs = append(errs, s.Fill.unmap())
	}
	if s.Comp != nil {
		errs = append(errs, s.Comp.unmap())
	}
	if s.RX != nil {
		errs = append(errs, s.RX.unmap())
	}
	if s.TX != nil {
		errs = append(errs, s.TX.unmap())
	}
	if s.fd >= 0 {
		errs = append(errs, unix.Close(s.fd))
		s.fd = -1
	}
	return errors.Join(errs...)
}

// SetTxBudget raises how many TX descriptors one sendto may process in copy
// mode (XDP_MAX_TX_SKB_BUDGET, default 32), so a burst needs one syscall
// instead of one per 32 frames. Kernels without the option (before 6.17)
// refuse it; callers may ignore that.
func (s *Socket) SetTxBudget(n int) error {
	return unix.SetsockoptInt(s.fd, unix.SOL_XDP, unix.XDP_MAX_TX_SKB_BUDGET, n)
}

// Probe creates and closes an AF_XDP socket, so that missing privileges
// (CAP_NET_RAW) or a kernel without AF_XDP show before any other check.
func Probe() error {
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return &OpError{StepSocket, err}
	}
	return unix.Close(fd)
}
