package netns

import (
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// linkUpTimeout bounds how long Veth waits for the kernel to finish
// bringing an end up.
const linkUpTimeout = 10 * time.Second

// ifOperUp is IF_OPER_UP from RFC 2863 as the kernel reports it.
const ifOperUp = 6

// waitLinkReady returns once interface name in ns is operationally up and
// has its real qdisc attached. `ip link set up` returns before the kernel's
// link watcher has run; until it has, the device's qdisc is noop and every
// frame sent is silently dropped, which would make the first packets of a
// test vanish. It waits on link notifications, not on a timer.
func waitLinkReady(ns *NS, name string) error {
	return ns.Do(func() error {
		fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
		if err != nil {
			return fmt.Errorf("netlink socket: %w", err)
		}
		defer unix.Close(fd)
		// Subscribe before the first look, so no change can slip between.
		if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: unix.RTMGRP_LINK}); err != nil {
			return fmt.Errorf("netlink bind: %w", err)
		}
		tv := unix.NsecToTimeval((100 * time.Millisecond).Nanoseconds())
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return fmt.Errorf("netlink timeout: %w", err)
		}
		deadline := time.Now().Add(linkUpTimeout)
		buf := make([]byte, 1<<16)
		for {
			ready, state, err := linkReady(name)
			if err != nil {
				return err
			}
			if ready {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s did not come up within %v (%s)", name, linkUpTimeout, state)
			}
			// Any link message (or the receive timeout) prompts a new look.
			if _, _, err := unix.Recvfrom(fd, buf, 0); err != nil && !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR) {
				return fmt.Errorf("netlink receive: %w", err)
			}
		}
	})
}

// linkReady asks the kernel for link name of the current namespace and
// reports whether it is operationally up with a qdisc other than noop, and
// its state for messages. A request for one link (not a dump) makes recent
// kernels run the pending link-watch work for it first, so the answer is
// usually final at once.
func linkReady(name string) (bool, string, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return false, "", fmt.Errorf("netlink socket: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return false, "", fmt.Errorf("netlink bind: %w", err)
	}
	if err := unix.Sendto(fd, getLinkRequest(name), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return false, "", fmt.Errorf("netlink request: %w", err)
	}
	buf := make([]byte, 1<<16)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return false, "", fmt.Errorf("netlink reply: %w", err)
	}
	msgs, err := syscall.ParseNetlinkMessage(buf[:n])
	if err != nil {
		return false, "", fmt.Errorf("netlink parse: %w", err)
	}
	for i := range msgs {
		switch msgs[i].Header.Type {
		case syscall.NLMSG_ERROR:
			if len(msgs[i].Data) >= 4 {
				if errno := -int32(binary.NativeEndian.Uint32(msgs[i].Data)); errno != 0 {
					return false, "", fmt.Errorf("interface %s: %w", name, syscall.Errno(errno))
				}
			}
		case syscall.RTM_NEWLINK:
			attrs, err := syscall.ParseNetlinkRouteAttr(&msgs[i])
			if err != nil {
				return false, "", fmt.Errorf("netlink attributes: %w", err)
			}
			var qdisc string
			oper := -1
			for _, a := range attrs {
				switch a.Attr.Type {
				case syscall.IFLA_QDISC:
					qdisc = cString(a.Value)
				case syscall.IFLA_OPERSTATE:
					if len(a.Value) > 0 {
						oper = int(a.Value[0])
					}
				}
			}
			return oper == ifOperUp && qdisc != "" && qdisc != "noop", fmt.Sprintf("operstate %d, qdisc %q", oper, qdisc), nil
		}
	}
	return false, "", fmt.Errorf("interface %s: no link in the kernel's reply", name)
}

// getLinkRequest builds RTM_GETLINK for one interface by name: nlmsghdr,
// ifinfomsg, IFLA_IFNAME.
func getLinkRequest(name string) []byte {
	const hdrLen = unix.NLMSG_HDRLEN + unix.SizeofIfInfomsg
	attrLen := unix.SizeofRtAttr + len(name) + 1
	total := hdrLen + (attrLen+unix.NLA_ALIGNTO-1)&^(unix.NLA_ALIGNTO-1)
	b := make([]byte, total)
	binary.NativeEndian.PutUint32(b[0:], uint32(total))
	binary.NativeEndian.PutUint16(b[4:], unix.RTM_GETLINK)
	binary.NativeEndian.PutUint16(b[6:], unix.NLM_F_REQUEST)
	binary.NativeEndian.PutUint32(b[8:], 1) // sequence
	b[unix.NLMSG_HDRLEN] = unix.AF_UNSPEC
	binary.NativeEndian.PutUint16(b[hdrLen:], uint16(attrLen))
	binary.NativeEndian.PutUint16(b[hdrLen+2:], unix.IFLA_IFNAME)
	copy(b[hdrLen+unix.SizeofRtAttr:], name)
	return b
}

func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
