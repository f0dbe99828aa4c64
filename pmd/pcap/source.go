package pcap

import (
	"bufio"
	"bytes"
	"fmt"
	"io"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// Source is a capture being read, pcap or pcapng: what pcapgo's Reader and
// NgReader have in common.
type Source interface {
	// ZeroCopyReadPacketData returns the next record; data is valid until
	// the next call.
	ZeroCopyReadPacketData() (data []byte, ci gopacket.CaptureInfo, err error)
	// LinkType is the link layer of the records (of the first interface,
	// for pcapng).
	LinkType() layers.LinkType
}

// ngMagic is the block type of a pcapng Section Header Block, the first
// four bytes of every pcapng file (the same in either byte order).
var ngMagic = []byte{0x0a, 0x0d, 0x0d, 0x0a}

// OpenSource reads the start of in to tell pcapng from pcap (gzip-compressed
// pcap too), so a stream works as well as a file. name is for errors.
func OpenSource(name string, in io.Reader) (Source, error) {
	br := bufio.NewReader(in)
	magic, err := br.Peek(4)
	if err != nil {
		return nil, fmt.Errorf("%s: not a capture: %d bytes, too short for a pcap or pcapng header", name, len(magic))
	}
	if bytes.Equal(magic, ngMagic) {
		r, err := pcapgo.NewNgReader(br, pcapgo.DefaultNgReaderOptions)
		if err != nil {
			return nil, fmt.Errorf("%s: a pcapng capture that cannot be read: %w", name, err)
		}
		return r, nil
	}
	r, err := pcapgo.NewReader(br)
	if err != nil {
		return nil, fmt.Errorf("%s: neither a pcap nor a pcapng capture (starts % x): %w", name, magic, err)
	}
	return r, nil
}
