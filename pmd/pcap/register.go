package pcap

import (
	"fmt"
	"net/url"
	"strconv"

	"github.com/gopacket/gopacket/layers"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/internal/units"
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
		Syntax: "pcap:FILE[?timing=fast|original|speed=N|rate&rate=R&loop=N]",
		Help:   "replays a capture file (pcap or pcapng; Ethernet, Linux cooked or raw IP), receive only (loop=0 replays forever)",
		Open:   openReader,
	})
	pmd.Register(pmd.Driver{
		Name:   WriterDriverName,
		Syntax: "pcap-out:FILE[?snaplen=N&max=SIZE&linktype=ethernet|raw|linux_sll|N]",
		Help:   "writes transmitted packets to a capture file (nanosecond timestamps; a pcap: input's own), up to max bytes (e.g. 1GiB), transmit only",
		Open:   openWriter,
	})
}

func openReader(env *pmd.Env, spec pmd.Spec) (port.Port, error) {
	if err := spec.CheckParams("timing", "rate", "loop"); err != nil {
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
	timing, rate := spec.Params.Get("timing"), spec.Params.Get("rate")
	if timing == "" {
		timing = "fast"
	}
	if opts.Timing, opts.Speed, err = ParseTiming(timing); err != nil {
		return nil, fmt.Errorf("%w: pcap: timing=%v", pmd.ErrBadSpec, err)
	}
	switch {
	case opts.Timing == TimingRate && rate == "":
		return nil, fmt.Errorf("%w: pcap: timing=rate needs rate=R beside it (e.g. rate=1mpps or rate=10gbit)", pmd.ErrBadSpec)
	case opts.Timing != TimingRate && rate != "":
		return nil, fmt.Errorf("%w: pcap: rate=%s paces timing=rate only (timing is %s)", pmd.ErrBadSpec, rate, timing)
	case rate != "":
		if opts.Rate, err = units.ParseRate(rate); err != nil || opts.Rate.IsZero() {
			return nil, fmt.Errorf("%w: pcap: rate=%q: give %s", pmd.ErrBadSpec, rate, units.RateHelp)
		}
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
	if err := spec.CheckParams("snaplen", "max", "linktype"); err != nil {
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
	if opts.Max, err = maxParam(spec.Driver, spec.Params); err != nil {
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

// maxParam reads a max=SIZE parameter (0 when absent).
func maxParam(driver string, params url.Values) (int64, error) {
	if !params.Has("max") {
		return 0, nil
	}
	raw := params.Get("max")
	n, err := units.ParseSize(raw)
	if err != nil || n < fileHeader+recordHeader {
		return 0, fmt.Errorf("%w: %s: parameter max=%q: give a file size of at least %d B, e.g. max=1GiB", pmd.ErrBadParam, driver, raw, fileHeader+recordHeader)
	}
	return n, nil
}

// Capture is what a port spec's capture=FILE asks for: the file and the
// capture's own parameters, snaplen=N and max=SIZE.
type Capture struct {
	File    string
	Snaplen int
	Max     int64
}

// SplitCapture removes the capture parameters from spec (pmd.SplitCapture):
// with capture=FILE, snaplen=N and max=SIZE belong to the capture, not to
// the port ("afxdp:veth0?capture=v.pcap&snaplen=128&max=1GiB"). It
// returns the spec the driver opens and the capture (File "" when there
// is none).
func SplitCapture(spec string) (string, Capture, error) {
	rest, file, err := pmd.SplitCapture(spec)
	if err != nil || file == "" {
		return rest, Capture{}, err
	}
	c := Capture{File: file}
	s, err := pmd.ParseSpec(rest)
	if err != nil {
		return "", c, err
	}
	if s.Params.Has("snaplen") {
		if c.Snaplen, err = s.Int("snaplen", DefaultSnaplen, 1, MaxSnaplen); err != nil {
			return "", c, err
		}
	}
	if c.Max, err = maxParam(s.Driver, s.Params); err != nil {
		return "", c, err
	}
	return pmd.WithoutParams(rest, "snaplen", "max"), c, nil
}
