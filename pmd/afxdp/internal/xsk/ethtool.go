package xsk

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ethtoolChannels is struct ethtool_channels.
type ethtoolChannels struct {
	cmd                                         uint32
	maxRx, maxTx, maxOther, maxCombined         uint32
	rxCount, txCount, otherCount, combinedCount uint32
}

// ifreqData is struct ifreq with its union used as a data pointer.
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [16]byte
}

// Channels returns the interface's current channel counts (ethtool -l):
// RX-only, TX-only and combined. It must run in the interface's namespace.
// Drivers without channel support fail with EOPNOTSUPP.
func Channels(ifname string) (rx, tx, combined int, err error) {
	if len(ifname) >= unix.IFNAMSIZ {
		return 0, 0, 0, fmt.Errorf("interface name %q too long", ifname)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, 0, 0, err
	}
	defer unix.Close(fd)
	ch := &ethtoolChannels{cmd: unix.ETHTOOL_GCHANNELS}
	ifr := &ifreqData{data: unsafe.Pointer(ch)}
	copy(ifr.name[:], ifname)
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(ifr)))
	runtime.KeepAlive(ifr)
	runtime.KeepAlive(ch)
	if errno != 0 {
		return 0, 0, 0, errno
	}
	return int(ch.rxCount), int(ch.txCount), int(ch.combinedCount), nil
}
