// Command peregrine is the appliance and tool box built on the peregrine
// packet stack. Run `peregrine --help` for the subcommands.
package main

import (
	"errors"
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/spf13/cobra"
)

// exitError carries a process exit status through cobra without printing
// usage: the command has already said what went wrong.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func main() {
	root := newRootCommand()
	if err := root.Execute(); err != nil {
		var ee exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		fmt.Fprintln(os.Stderr, "peregrine:", err)
		os.Exit(2)
	}
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "peregrine",
		Short: "A kernel-bypass, poll-mode packet stack and datacenter transport appliance",
		Long: `peregrine moves packets between ports in poll-mode loops pinned to cores,
with zero heap allocations per packet, and runs a reliable datacenter transport on them.

Ports are named like DPDK vdevs: mem:PAIR/END, null:, pcap:FILE, pcap-out:FILE,
afpacket:IFACE?netns=NS, afxdp:IFACE?queue=N&netns=NS.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	var cpuProfile string
	root.PersistentFlags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile (pprof) of the whole run to this file")
	var stopProfile func()
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		if cpuProfile == "" {
			return nil
		}
		f, err := os.Create(cpuProfile)
		if err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		stopProfile = func() { pprof.StopCPUProfile(); f.Close() }
		return nil
	}
	root.PersistentPostRun = func(*cobra.Command, []string) {
		if stopProfile != nil {
			stopProfile()
		}
	}
	root.AddCommand(newDemoCommand(), newGenCommand(), newFwdCommand(), newFabricCommand(), newTransportCommand(), newBenchCommand(), newDecodeCommand())
	return root
}
