package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/spf13/cobra"

	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/core/wire/wirelayers"
)

func newDecodeCommand() *cobra.Command {
	var (
		udpPort uint16
		limit   int
	)
	cmd := &cobra.Command{
		Use:   "decode FILE|-",
		Short: "Print peregrine transport headers (and RoCEv2 BTH) from a capture",
		Long: `decode reads a capture, pcap or pcapng (Wireshark's and tcpdump's formats;
for example one written by a pcap-out: port), from FILE or, with -, from
standard input, and prints one line per frame: peregrine transport frames
(UDP port --udp-port) with their header fields, RoCEv2 frames (UDP 4791)
with their BTH fields, extended headers (RETH, AETH, DETH) and ICRC status
(ok, or BAD with the value it should have), other frames by their
protocol layers. Frames that fail a
check (checksum, length, version) say which.`,
		Example: `  peregrine decode capture.pcap
  peregrine decode capture.pcapng
  tcpdump -i veth0 -w - udp | peregrine decode -
  peregrine decode --udp-port 6000 --count 20 capture.pcap`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usage(fmt.Errorf("decode reads one capture: give a file name, or - for standard input (got %d arguments), e.g. peregrine decode capture.pcap", len(args)))
			}
			return nil
		},
		PreRunE: func(*cobra.Command, []string) error {
			return usage(checkInt("count", limit, 0, math.MaxInt32), checkInt("udp-port", int(udpPort), 1, 65535))
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if udpPort != wire.DefaultPort {
				wirelayers.RegisterPort(udpPort)
			}
			if args[0] == "-" {
				return decodeStream("standard input", cmd.InOrStdin(), udpPort, limit, cmd.OutOrStdout())
			}
			return decodeFile(args[0], udpPort, limit, cmd.OutOrStdout())
		},
	}
	cmd.Flags().Uint16Var(&udpPort, "udp-port", wire.DefaultPort, "UDP port of the peregrine transport")
	cmd.Flags().IntVar(&limit, "count", 0, "stop after this many frames (0: all)")
	return cmd
}

func decodeFile(path string, udpPort uint16, limit int, out io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return decodeStream(path, f, udpPort, limit, out)
}

// packetSource is what pcapgo's Reader and NgReader have in common.
type packetSource interface {
	ReadPacketData() ([]byte, gopacket.CaptureInfo, error)
}

// pcapngMagic is the block type of a pcapng Section Header Block, the
// first four bytes of every pcapng file (the same in either byte order).
var pcapngMagic = []byte{0x0a, 0x0d, 0x0d, 0x0a}

// openCapture reads the first bytes to tell pcapng from pcap, so a stream
// (standard input) works as well as a file.
func openCapture(name string, in io.Reader) (packetSource, error) {
	br := bufio.NewReader(in)
	magic, err := br.Peek(4)
	if err != nil {
		return nil, fmt.Errorf("%s: not a capture: %d bytes, too short for a pcap or pcapng header", name, len(magic))
	}
	if bytes.Equal(magic, pcapngMagic) {
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

func decodeStream(name string, in io.Reader, udpPort uint16, limit int, out io.Writer) error {
	r, err := openCapture(name, in)
	if err != nil {
		return err
	}
	for n := 1; limit == 0 || n <= limit; n++ {
		data, ci, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: frame %d: %w", name, n, err)
		}
		fmt.Fprintf(out, "%6d %s %s\n", n, ci.Timestamp.UTC().Format("15:04:05.000000"), wirelayers.Summary(data, udpPort))
	}
	return nil
}
