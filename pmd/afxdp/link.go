package afxdp

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/peregrine-net/peregrine/pmd/afxdp/internal/xsk"
)

// linkInfo is what the driver needs to know about an interface, read
// inside its namespace; queues is the current channel count.
type linkInfo = xsk.Link

// xdpModeName names an XDP_ATTACHED_* value for messages.
func xdpModeName(mode uint8) string {
	switch mode {
	case xsk.XDPAttachedDrv:
		return "native"
	case xsk.XDPAttachedSKB:
		return "generic"
	case xsk.XDPAttachedHW:
		return "offload"
	case xsk.XDPAttachedMulti:
		return "several modes"
	default:
		return "none"
	}
}

// lookupLink returns the interface called name in the current namespace,
// with the number of queues it currently has. An unknown name is an error
// wrapping ErrNoInterface that lists the interfaces there are.
func lookupLink(name, where string) (linkInfo, error) {
	all, err := xsk.Links()
	if err != nil {
		return linkInfo{}, err
	}
	i := slices.IndexFunc(all, func(l linkInfo) bool { return l.Name == name })
	if i < 0 {
		names := make([]string, len(all))
		for j, l := range all {
			names[j] = l.Name
		}
		slices.Sort(names)
		return linkInfo{}, fmt.Errorf("%w: no interface %q in %s (interfaces there: %s)", ErrNoInterface, name, where, strings.Join(names, ", "))
	}
	li := all[i]
	// The bind limit is the current channel count, which ethtool reports;
	// netlink only gives the allocated maximum. Drivers without channel
	// support (lo, some virtual devices) keep the netlink figure.
	if rx, tx, combined, err := xsk.Channels(name); err == nil && max(rx, tx)+combined > 0 {
		li.Queues = max(rx, tx) + combined
	} else if err != nil && !errors.Is(err, unix.EOPNOTSUPP) {
		return linkInfo{}, fmt.Errorf("ethtool channels of %s: %w", name, err)
	}
	return li, nil
}

// xdpState re-reads the XDP program attached to interface index.
func xdpState(index int) (mode uint8, prog uint32, err error) {
	all, err := xsk.Links()
	if err != nil {
		return 0, 0, err
	}
	for _, l := range all {
		if l.Index == index {
			return l.XDPMode, l.XDPProg, nil
		}
	}
	return 0, 0, fmt.Errorf("%w: interface index %d is gone", ErrNoInterface, index)
}
