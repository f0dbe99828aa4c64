// Command peregrine is the appliance and tool box built on the peregrine
// packet stack. Run `peregrine --help` for the subcommands.
package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"runtime/pprof"
	"strings"

	"github.com/spf13/cobra"
)

// exitError carries a process exit status through cobra without printing
// usage: the command has already said what went wrong.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// Exit statuses, as peregrine --help documents them.
const (
	exitOK     = 0
	exitFailed = 1 // the run failed: a port, a peer, a check
	exitUsage  = 2 // the command line is wrong; nothing was started
)

func main() {
	os.Exit(execute(newRootCommand(), os.Args[1:], os.Stderr))
}

// execute runs root with args and returns the exit status: exitUsage for
// an error cobra found before a command ran (unknown flag or subcommand,
// a flag value of the wrong type, wrong arguments) or one a command marked
// as usageError (its flag validation); exitFailed for any other error.
func execute(root *cobra.Command, args []string, stderr io.Writer) int {
	started := false
	pre := root.PersistentPreRunE
	root.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
		started = true // flags parsed and arguments accepted
		return pre(cmd, args)
	}
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return exitOK
	}
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	fmt.Fprintln(stderr, "peregrine:", err)
	var ue usageError
	if errors.As(err, &ue) || !started {
		fmt.Fprintln(stderr, "(see peregrine --help, or peregrine COMMAND --help)")
		return exitUsage
	}
	return exitFailed
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "peregrine",
		Short: "A kernel-bypass, poll-mode packet stack and datacenter transport appliance",
		Long: `peregrine moves packets between ports in poll-mode loops pinned to cores,
with zero heap allocations per packet, and runs a reliable datacenter transport on them.

Ports are named like DPDK vdevs: mem:PAIR/END, null:, pcap:FILE, pcap-out:FILE,
afpacket:IFACE?netns=NS, afxdp:IFACE?queue=N&netns=NS.

Flag values, the same in every subcommand:
  sizes      a byte count, for every flag that takes bytes: 1500, 4KiB, 1MiB,
             1GiB (powers of 1024), 64kB, 1MB, 1GB (powers of 1000); units are
             case-insensitive; a size or count that sizes a buffer is checked
             against its memory before anything is allocated
  rates      frames per second (1000, 500kpps, 1mpps) or bits per second
             (100mbit, 10gbit, 10Gbit/s); "max" for as fast as possible; 0 is
             refused (it would send nothing)
  durations  Go durations (500ms, 10s, 2m); never negative; --duration 0
             means "until stopped" where the subcommand says so
  counts     a range, given in the error when a value is outside it

Exit status: 0 when the run succeeded; 1 when it failed (a port could not be
opened, a check failed, a peer went away); 2 for a usage error (an unknown
subcommand or flag, a bad flag value, a missing argument, a flag that does
nothing in the mode chosen, a second value for a flag that takes one),
before anything was started.`,
		Version:       versionString(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	var cpuProfile, logFormat, logLevel string
	root.PersistentFlags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile (pprof) of the whole run to this file")
	root.PersistentFlags().StringVar(&logFormat, "log-format", "text", "log lines (on standard error) as text or json")
	root.PersistentFlags().StringVar(&logLevel, "log-level", "warn", "least severe log level shown: debug, info, warn or error")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		logger, err := newLogger(cmd.ErrOrStderr(), logFormat, logLevel)
		if err != nil {
			return usage(err)
		}
		slog.SetDefault(logger)
		return nil
	}
	root.SetVersionTemplate("peregrine {{.Version}}\n")
	// A flag cobra cannot parse is a usage error (exit 2) like one the
	// command's own validation refuses.
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usage(plainFlagError(err)) })
	root.AddCommand(newRunCommand(), newDemoCommand(), newGenCommand(), newFwdCommand(), newFabricCommand(), newTransportCommand(), newBenchCommand(), newDecodeCommand(), newRoCECommand(), newServeCommand())
	root.SetHelpCommand(newHelpCommand(root))
	root.InitDefaultCompletionCmd()
	refuseUnknownSubcommands(root)
	onceEach(root)
	profileRuns(root, &cpuProfile)
	return root
}

// profileRuns starts --cpuprofile around every command's run, after its
// flags were checked (PreRunE): a command line refused writes no file.
func profileRuns(c *cobra.Command, path *string) {
	if run := c.RunE; run != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if *path == "" {
				return run(cmd, args)
			}
			f, err := os.Create(*path)
			if err != nil {
				return fmt.Errorf("--cpuprofile: %w", err)
			}
			defer f.Close()
			if err := pprof.StartCPUProfile(f); err != nil {
				return fmt.Errorf("--cpuprofile: %w", err)
			}
			defer pprof.StopCPUProfile()
			return run(cmd, args)
		}
	}
	for _, sub := range c.Commands() {
		profileRuns(sub, path)
	}
}

// newHelpCommand is `help [command]`: cobra's prints the root's usage and
// exits 0 for a command that does not exist.
func newHelpCommand(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		RunE: func(_ *cobra.Command, args []string) error {
			c, rest, err := root.Find(args)
			if err != nil || len(rest) > 0 {
				return usage(fmt.Errorf("help %s: no such command: use one of %s", strings.Join(args, " "), commandNames(root)))
			}
			c.InitDefaultHelpFlag()
			return c.Help()
		},
	}
}

// refuseUnknownSubcommands gives every command that only groups others
// (completion) an answer to an argument that names none of them: cobra
// prints the group's help and exits 0.
func refuseUnknownSubcommands(c *cobra.Command) {
	for _, sub := range c.Commands() {
		if sub.HasSubCommands() && !sub.Runnable() {
			sub.Args = func(cmd *cobra.Command, args []string) error {
				if len(args) > 0 {
					return usage(fmt.Errorf("%s %s: no such subcommand: use one of %s", cmd.CommandPath(), args[0], commandNames(cmd)))
				}
				return nil
			}
			sub.PreRunE = func(cmd *cobra.Command, _ []string) error {
				return usage(fmt.Errorf("%s needs a subcommand: %s", cmd.CommandPath(), commandNames(cmd)))
			}
			sub.RunE = func(*cobra.Command, []string) error { return nil } // PreRunE refused
		}
		refuseUnknownSubcommands(sub)
	}
}

func commandNames(c *cobra.Command) string {
	var names []string
	for _, sub := range c.Commands() {
		if sub.IsAvailableCommand() || sub.Name() == "help" {
			names = append(names, sub.Name())
		}
	}
	return strings.Join(names, ", ")
}

// pflagValue matches pflag's error for a value its type refused.
var pflagValue = regexp.MustCompile(`^invalid argument "(.*)" for "(?:-[^,]+, )?(--[^"]+)" flag: (.*)$`)

// plainFlagError says what pflag's parsers refused in the user's terms:
// "--burst "x": not a whole number", not strconv.ParseInt's syntax error.
func plainFlagError(err error) error {
	m := pflagValue.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	val, flag, why := m[1], m[2], m[3]
	outOfRange := strings.Contains(why, "value out of range")
	switch {
	case strings.Contains(why, "strconv.ParseBool"):
		why = "use true or false (a switch: --" + strings.TrimPrefix(flag, "--") + " alone is true)"
	case strings.Contains(why, "strconv.ParseUint") && outOfRange:
		why = "too large for this flag"
	case strings.Contains(why, "strconv.ParseUint"):
		why = "not a whole number of 0 or more"
	case strings.Contains(why, "strconv.") && outOfRange:
		why = "out of range for this flag"
	case strings.Contains(why, "strconv.ParseFloat"):
		why = "not a number"
	case strings.Contains(why, "strconv."):
		why = "not a whole number"
	case strings.HasPrefix(why, "time: "):
		why = "not a duration: write one as 500ms, 10s or 2m"
	}
	return fmt.Errorf("%s %q: %s", flag, val, why)
}
