package shm

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// MaxRegion bounds one registered region (offsets and lengths in a Desc
// and in a control message are 32 bits).
const MaxRegion = 1<<32 - 1

// Region is a registered region's memory: a memfd of its own, sealed
// against resizing by the appliance that made it, mapped by the appliance
// (whose endpoint pushes from it, pulls into it and takes the peers'
// pushes) and by the application (that reads and writes it in place).
// A region is a memfd of its own rather than a piece of the channel so
// that it is as large as the application asks, and its mapping can be
// dropped alone when it is deregistered.
type Region struct {
	fd  int
	mem []byte
}

// CreateRegion makes and maps an n-byte region memfd named name.
func CreateRegion(name string, n int) (*Region, error) {
	if n < 1 || n > MaxRegion {
		return nil, fmt.Errorf("%w: a region of %d bytes, want 1..%d", ErrLayout, n, int64(MaxRegion))
	}
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("shm: memfd_create: %w", err)
	}
	if err := unix.Ftruncate(fd, int64(n)); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("shm: size the region to %d bytes: %w", n, err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("shm: seal the region: %w", err)
	}
	return mapRegion(fd, n)
}

// OpenRegion maps the n-byte region in fd (received from the appliance),
// checking the memfd's size. The Region owns fd (closed on an error too).
func OpenRegion(fd, n int) (*Region, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("shm: stat the region: %w", err)
	}
	if n < 1 || st.Size != int64(n) {
		unix.Close(fd)
		return nil, fmt.Errorf("%w: a region said to be %d bytes has %d", ErrLayout, n, st.Size)
	}
	return mapRegion(fd, n)
}

func mapRegion(fd, n int) (*Region, error) {
	mem, err := unix.Mmap(fd, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("shm: map a %d-byte region: %w", n, err)
	}
	return &Region{fd: fd, mem: mem}, nil
}

// Fd is the region's memfd, to pass to the application.
func (r *Region) Fd() int { return r.fd }

// Bytes is the region's mapping.
func (r *Region) Bytes() []byte { return r.mem }

// Close unmaps the region and closes its memfd; nothing may touch its
// bytes afterwards.
func (r *Region) Close() error {
	err := unmap(r.mem, r.fd)
	r.mem = nil
	return err
}
