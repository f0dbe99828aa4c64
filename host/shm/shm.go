package shm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"

	"golang.org/x/sys/unix"
)

// Magic and Version open the header; an application maps only a channel
// whose magic and version it knows.
const (
	Magic   = 0x70726768 // "prgh"
	Version = 3
)

const (
	pageSize = 4096
	line     = 64 // a ring's producer and consumer index each own a cache line
	descSize = 48
	compSize = 16
	// MaxRing, MaxBuffers and MaxBufSize bound a layout so that every
	// offset fits 32 bits of a Desc and the whole channel stays below
	// 64 GiB.
	MaxRing    = 1 << 16
	MaxBuffers = 1 << 16
	MaxBufSize = 1 << 30
	maxTotal   = 64 << 30
)

// ErrLayout: a channel's geometry is out of range or does not match its
// memfd.
var ErrLayout = errors.New("shm: bad channel layout")

// Layout is a channel's geometry.
type Layout struct {
	RingSize int // descriptors per ring, a power of two in [2, MaxRing]
	Buffers  int // buffers in the pool, [1, MaxBuffers]
	BufSize  int // bytes per buffer, a multiple of 64 in [64, MaxBufSize]
}

// Check reports what is wrong with l, if anything.
func (l Layout) Check() error {
	switch {
	case l.RingSize < 2 || l.RingSize > MaxRing || bits.OnesCount(uint(l.RingSize)) != 1:
		return fmt.Errorf("%w: ring size %d is not a power of two in [2, %d]", ErrLayout, l.RingSize, MaxRing)
	case l.Buffers < 1 || l.Buffers > MaxBuffers:
		return fmt.Errorf("%w: %d buffers, want 1..%d", ErrLayout, l.Buffers, MaxBuffers)
	case l.BufSize < 64 || l.BufSize > MaxBufSize || l.BufSize%64 != 0:
		return fmt.Errorf("%w: buffer size %d is not a multiple of 64 in [64, %d]", ErrLayout, l.BufSize, MaxBufSize)
	case l.Size() > maxTotal:
		return fmt.Errorf("%w: %d buffers of %d bytes exceed %d GiB", ErrLayout, l.Buffers, l.BufSize, maxTotal>>30)
	}
	return nil
}

func roundPage(n int) int { return (n + pageSize - 1) &^ (pageSize - 1) }

func (l Layout) submitOff() int   { return pageSize }
func (l Layout) completeOff() int { return l.submitOff() + roundPage(2*line+l.RingSize*descSize) }
func (l Layout) bufOff() int      { return l.completeOff() + roundPage(2*line+l.RingSize*compSize) }

// Size is the channel's size in bytes.
func (l Layout) Size() int { return l.bufOff() + l.Buffers*l.BufSize }

// Span returns where the bytes [off, off+n) counted from the start of
// buffer buf are in the channel, or ok false when buf is not a buffer of
// the pool, off is not within it, or the span runs past the pool's last
// buffer. A span may run on over the buffers after buf: the pool is one
// contiguous piece of the mapping, so a message of several buffers is one
// span and the appliance hands the transport one slice of it. It is the one
// check between a Desc and memory.
func (l Layout) Span(buf, off, n uint32) (start int, ok bool) {
	if uint64(buf) >= uint64(l.Buffers) || uint64(off) >= uint64(l.BufSize) {
		return 0, false
	}
	first := uint64(buf)*uint64(l.BufSize) + uint64(off)
	if first+uint64(n) > uint64(l.Buffers)*uint64(l.BufSize) {
		return 0, false
	}
	return l.bufOff() + int(first), true
}

// Channel is one mapping of a channel's memfd.
type Channel struct {
	Layout Layout
	fd     int
	mem    []byte
}

// Create makes a channel of layout l in a new memfd named name (the name
// is shown in /proc/PID/fd only; nothing can open a memfd by its name),
// sealed against resizing, and maps it.
func Create(name string, l Layout) (*Channel, error) {
	if err := l.Check(); err != nil {
		return nil, err
	}
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("shm: memfd_create: %w", err)
	}
	if err := unix.Ftruncate(fd, int64(l.Size())); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("shm: size the channel to %d bytes: %w", l.Size(), err)
	}
	seals := unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_SEAL
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("shm: seal the channel: %w", err)
	}
	c, err := mapFd(fd, l)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	h := c.mem[:pageSize]
	binary.LittleEndian.PutUint32(h[0:], Magic)
	binary.LittleEndian.PutUint32(h[4:], Version)
	binary.LittleEndian.PutUint32(h[8:], uint32(l.RingSize))
	binary.LittleEndian.PutUint32(h[12:], uint32(l.Buffers))
	binary.LittleEndian.PutUint32(h[16:], uint32(l.BufSize))
	return c, nil
}

// Open maps the channel in fd (received from the appliance), checking its
// header against the memfd's size and seals. The Channel owns fd.
func Open(fd int) (*Channel, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("shm: stat the channel: %w", err)
	}
	if st.Size < pageSize {
		return nil, fmt.Errorf("%w: %d bytes, less than a header", ErrLayout, st.Size)
	}
	var h [20]byte
	if _, err := unix.Pread(fd, h[:], 0); err != nil {
		return nil, fmt.Errorf("shm: read the header: %w", err)
	}
	if m, v := binary.LittleEndian.Uint32(h[0:]), binary.LittleEndian.Uint32(h[4:]); m != Magic || v != Version {
		return nil, fmt.Errorf("%w: magic %#x version %d, want %#x version %d", ErrLayout, m, v, Magic, Version)
	}
	l := Layout{
		RingSize: int(binary.LittleEndian.Uint32(h[8:])),
		Buffers:  int(binary.LittleEndian.Uint32(h[12:])),
		BufSize:  int(binary.LittleEndian.Uint32(h[16:])),
	}
	if err := l.Check(); err != nil {
		return nil, err
	}
	if int64(l.Size()) != st.Size {
		return nil, fmt.Errorf("%w: header says %d bytes, the memfd has %d", ErrLayout, l.Size(), st.Size)
	}
	c, err := mapFd(fd, l)
	if err != nil {
		return nil, err
	}
	return c, nil
}

func mapFd(fd int, l Layout) (*Channel, error) {
	mem, err := unix.Mmap(fd, 0, l.Size(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("shm: map %d bytes: %w", l.Size(), err)
	}
	return &Channel{Layout: l, fd: fd, mem: mem}, nil
}

// Fd is the channel's memfd, to pass to the application.
func (c *Channel) Fd() int { return c.fd }

// Bytes returns the bytes [off, off+n) from the start of buffer buf, or nil
// when the span is not within the pool (Layout.Span).
func (c *Channel) Bytes(buf, off, n uint32) []byte {
	start, ok := c.Layout.Span(buf, off, n)
	if !ok {
		return nil
	}
	return c.mem[start : start+int(n) : start+int(n)]
}

// Buffer returns buffer buf whole (buf must be in range).
func (c *Channel) Buffer(buf uint32) []byte { return c.Bytes(buf, 0, uint32(c.Layout.BufSize)) }

// Close unmaps the channel and closes its memfd. Nothing may use its
// rings or buffers afterwards.
func (c *Channel) Close() error {
	err := unmap(c.mem, c.fd)
	c.mem = nil
	return err
}

// unmap unmaps mem and closes fd (nothing when mem is nil: closed already).
func unmap(mem []byte, fd int) error {
	if mem == nil {
		return nil
	}
	err := unix.Munmap(mem)
	if cerr := unix.Close(fd); err == nil {
		err = cerr
	}
	return err
}

// The operations a Desc names.
const (
	// OpSend sends the span Buf, Off, Len as one message on connection
	// Conn; the Comp's Len is the bytes sent.
	OpSend uint8 = 1 + iota
	// OpRecv receives the next message of Conn into the span Buf, Off,
	// Len; the Comp's Len is the message's length.
	OpRecv
	// OpCancel asks the appliance to stop the in-flight op whose cookie is
	// Cookie (Buf, Off and Len unused). It has no completion of its own:
	// the op it names completes, cancelled or not.
	OpCancel
	// OpPush writes Len bytes of region Buf from Off into the peer's
	// region Key at Addr.
	OpPush
	// OpPull reads Len bytes of the peer's region Key at Addr into region
	// Buf at Off.
	OpPull
	opEnd
)

// FlagAhead marks an OpRecv the application posted before any call asked
// for it (a Recv posted ahead): its end without a message (the connection
// closed, its Timeout, a cancel) is counted unused, not failed.
const FlagAhead uint8 = 1

// KnownOp reports whether op is an operation of this version.
func KnownOp(op uint8) bool { return op != 0 && op < opEnd }
