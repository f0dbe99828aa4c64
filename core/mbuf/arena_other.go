//go:build !linux

package mbuf

import "errors"

func mapArena(length int, hugePages bool) ([]byte, error) {
	return nil, errors.New("mbuf: arenas are only implemented on linux")
}

func unmapArena(mapping []byte) error { return nil }
