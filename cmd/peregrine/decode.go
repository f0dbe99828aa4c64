package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/gopacket/gopacket/layers"
	"github.com/spf13/cobra"

	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/core/wire/wirelayers"
	"github.com/peregrine-net/peregrine/pmd/pcap"
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
standard input, of Ethernet frames, Linux cooked frames (tcpdump -i any:
SLL, SLL2) or raw IPv4/IPv6 (other link types are refused), and prints one
line per frame: peregrine transport frames
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

func decodeStream(name string, in io.Reader, udpPort uint16, limit int, out io.Writer) error {
	r, err := pcap.OpenSource(name, in)
	if err != nil {
		return err
	}
	link := r.LinkType()
	if err := pcap.CheckLinkType(link); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	var buf []byte
	for n := 1; limit == 0 || n <= limit; n++ {
		data, ci, err := r.ZeroCopyReadPacketData()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: frame %d: %w", name, n, err)
		}
		at := ci.Timestamp.UTC().Format("15:04:05.000000")
		frame, err := pcap.ToEthernet(link, data, buf)
		if err != nil {
			fmt.Fprintf(out, "%6d %s %v\n", n, at, err)
			continue
		}
		if link != layers.LinkTypeEthernet {
			buf = frame
		}
		fmt.Fprintf(out, "%6d %s %s\n", n, at, wirelayers.Summary(frame, udpPort))
	}
	return nil
}
