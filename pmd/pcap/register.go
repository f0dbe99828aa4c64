package pcap

import (
	"fmt"
	"strconv"

	"github.com/gopacket/gopacket/layers"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/pmd"
)

// Driver names.
const (
	ReaderDriverName = "pcap"
	WriterDriverName = "pcap-out"
)

func init() {
	pmd.Register(pmd.Driver{
		Name:   ReaderDriverName,
		Syntax: "pcap:FILE[?timing=fast|recorded&loop=N]",
		Help:   "replays a capture file, receive only (loop=0 replays forever)",
		Open:   openReader,
	})
	pmd.Register(pmd.Driver{
		Name:   WriterDriverName,
		Syntax: "pcap-out:FILE[?snaplen=N&linktype=ethernet|raw|linux_sll|N]",
		Help:   "writes transmitted packets to a capture file (nanosecond timestamps), transmit only",
		Open:   openWriter,
	})
}

func openReader(env *pmd.Env, spec pmd.Spec) (port.Port, error) {
	if err := spec.CheckParams("timing", "loop"); err != nil {
		return nil, err
	}
	if spec.Target == "" {
		return nil, fmt.Errorf("%w: pcap: no file named (e.g. pcap:in.pcap)", pmd.ErrBadSpec)
	}
	pool, err := env.RequirePool(ReaderDriverName)
	if err != nil {
		return nil, err
	}
	opts := ReaderOptions{Path: spec.Target, Name: spec.Raw, Clock: env.ClockOrReal(), Log: env.Logger()}
	timing, err := spec.Choice("timing", "fast", "fast", "recorded")
	if err != nil {
		return nil, err
	}
	if timing == "recorded" {
		opts.Timing = TimingRecorded
	}
	loop, err := spec.Int("loop", 1, 0, 1<<30)
	if err != nil {
		return nil, err
	}
	opts.Loop = loop
	if loop == 0 {
		opts.Loop = Forever
	}
	return NewReader(pool, opts)
}

func openWriter(env *pmd.Env, spec pmd.Spec) (port.Port, error) {
	if err := spec.CheckParams("snaplen", "linktype"); err != nil {
		return nil, err
	}
	if spec.Target == "" {
		return nil, fmt.Errorf("%w: pcap-out: no file named (e.g. pcap-out:out.pcap)", pmd.ErrBadSpec)
	}
	pool, err := env.RequirePool(WriterDriverName)
	if err != nil {
		return nil, err
	}
	opts := WriterOptions{Path: spec.Target, Name: spec.Raw, Clock: env.ClockOrReal()}
	if opts.Snaplen, err = spec.Int("snaplen", DefaultSnaplen, 1, MaxSnaplen); err != nil {
		return nil, err
	}
	if spec.Params.Has("linktype") {
		if opts.LinkType, err = ParseLinkType(spec.Params.Get("linktype")); err != nil {
			return nil, fmt.Errorf("%w: pcap-out: parameter linktype: %w", pmd.ErrBadParam, err)
		}
	}
	return NewWriter(pool, opts)
}

// ParseLinkType accepts ethernet, raw, linux_sll, ipv4, ipv6 or a LINKTYPE_
// number from the tcpdump.org list.
func ParseLinkType(s string) (layers.LinkType, error) {
	switch s {
	case "ethernet", "en10mb":
		return layers.LinkTypeEthernet, nil
	case "raw":
		return layers.LinkTypeRaw, nil
	case "linux_sll", "sll":
		return layers.LinkTypeLinuxSLL, nil
	case "ipv4":
		return layers.LinkTypeIPv4, nil
	case "ipv6":
		return layers.LinkTypeIPv6, nil
	}
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("link type %q is not known (use ethernet, raw, linux_sll, ipv4, ipv6 or a LINKTYPE_ number 1..65535)", s)
	}
	return layers.LinkType(n), nil
}
