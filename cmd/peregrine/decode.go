package main

import (
	"errors"
	"fmt"
	"io"
	"os"

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
		Use:   "decode FILE.pcap",
		Short: "Print peregrine transport headers (and RoCEv2 BTH) from a capture",
		Long: `decode reads a pcap capture (for example one written by a pcap-out: port or a
port mirror) and prints one line per frame: peregrine transport frames (UDP
port --udp-port) with their header fields, RoCEv2 frames (UDP 4791) with
their BTH, other frames by their protocol layers. Frames that fail a check
(checksum, length, version) say which.`,
		Example: `  peregrine decode capture.pcap
  peregrine decode --udp-port 6000 --count 20 capture.pcap`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if udpPort != wire.DefaultPort {
				wirelayers.RegisterPort(udpPort)
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
	r, err := pcapgo.NewReader(f)
	if err != nil {
		return fmt.Errorf("%s: not a pcap capture: %w", path, err)
	}
	for n := 1; limit == 0 || n <= limit; n++ {
		data, ci, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: frame %d: %w", path, n, err)
		}
		fmt.Fprintf(out, "%6d %s %s\n", n, ci.Timestamp.UTC().Format("15:04:05.000000"), wirelayers.Summary(data, udpPort))
	}
	return nil
}
