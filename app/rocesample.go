package app

import (
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/peregrine-net/peregrine/core/qpx"
	"github.com/peregrine-net/peregrine/core/roce"
	"github.com/peregrine-net/peregrine/core/wire"
)

// DefaultRoCESampleQPNs are the QPNs `peregrine roce sample` names by
// default, one frame each: configs/roce-pcap.yaml's open QPs 3, 4 and
// 0x100 (four frames) and its retired QPN 2 (two stale frames).
var DefaultRoCESampleQPNs = []uint32{3, 4, 2, 0x100, 3, 2}

// WriteRoCESample writes a pcap capture to w: one RoCEv2 SEND Only frame
// (8 B payload, a correct ICRC, no UDP checksum) from 198.18.0.1 to
// 198.18.0.2 per QPN of qpns, in order, each QPN's frames numbered from
// PSN 0 — an input for the roce stage (`peregrine roce`, a run -c roce
// stage on a pcap: port). It returns the frames written.
func WriteRoCESample(w io.Writer, qpns []uint32) (int, error) {
	pw := pcapgo.NewWriter(w)
	if err := pw.WriteFileHeader(65535, layers.LinkTypeEthernet); err != nil {
		return 0, err
	}
	a := wire.Addrs{
		SrcMAC: [6]byte{2, 0, 0, 0, 0, 1}, DstMAC: [6]byte{2, 0, 0, 0, 0, 2},
		SrcIP: netip.MustParseAddr("198.18.0.1"), DstIP: netip.MustParseAddr("198.18.0.2"),
		SrcPort: 49152, NoUDPChecksum: true,
	}
	psn := map[uint32]uint32{}
	b := make([]byte, 256)
	for i, qp := range qpns {
		if qp > qpx.MaxQPN {
			return i, fmt.Errorf("QPN %#x exceeds %#x, the largest 24-bit QPN", qp, qpx.MaxQPN)
		}
		spec := roce.FrameSpec{Addrs: a, BTH: wire.BTH{Opcode: 0x04, PKey: 0xffff, DestQP: qp, PSN: psn[qp]}, Payload: []byte("payload!")}
		psn[qp]++
		n, err := spec.Encode(b)
		if err != nil {
			return i, err
		}
		ci := gopacket.CaptureInfo{Timestamp: time.Unix(1, int64(i)*1000), CaptureLength: n, Length: n}
		if err := pw.WritePacket(ci, b[:n]); err != nil {
			return i, err
		}
	}
	return len(qpns), nil
}
