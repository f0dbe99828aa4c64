//go:build linux

package mbuf

import "golang.org/x/sys/unix"

// mapArena maps length bytes of private anonymous memory, populated up front
// so the first packets do not take page faults, optionally on hugepages.
func mapArena(length int, hugePages bool) ([]byte, error) {
	flags := unix.MAP_PRIVATE | unix.MAP_ANONYMOUS | unix.MAP_POPULATE
	if hugePages {
		flags |= unix.MAP_HUGETLB
	}
	return unix.Mmap(-1, 0, length, unix.PROT_READ|unix.PROT_WRITE, flags)
}

func unmapArena(mapping []byte) error { return unix.Munmap(mapping) }
