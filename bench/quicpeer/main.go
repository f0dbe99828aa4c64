package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"
)

// errUsage marks errors in the command line; main exits 2 for them.
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "quicpeer: %v\n", err)
		if errors.Is(err, errUsage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

type command struct {
	summary string
	run     func(ctx context.Context, name string, args []string, stdout, stderr io.Writer) error
}

func commands() map[string]command {
	return map[string]command{
		"quic-server":     {"serve bulk transfers over QUIC", serverCommand(transportQUIC, serveBulk)},
		"quic-client":     {"send N bytes (or for D) over QUIC and print the goodput", bulkClientCommand(transportQUIC)},
		"tcp-server":      {"serve bulk transfers over kernel TCP", serverCommand(transportTCP, serveBulk)},
		"tcp-client":      {"send N bytes (or for D) over kernel TCP and print the goodput", bulkClientCommand(transportTCP)},
		"quic-lat-server": {"acknowledge framed requests over QUIC", serverCommand(transportQUIC, serveLatency)},
		"quic-lat-client": {"measure request/response latency over QUIC", latencyClientCommand(transportQUIC)},
		"tcp-lat-server":  {"acknowledge framed requests over kernel TCP", serverCommand(transportTCP, serveLatency)},
		"tcp-lat-client":  {"measure request/response latency over kernel TCP", latencyClientCommand(transportTCP)},
	}
}

func usage(w io.Writer) {
	cmds := commands()
	names := make([]string, 0, len(cmds))
	for name := range cmds {
		names = append(names, name)
	}
	sort.Strings(names)
	fmt.Fprintln(w, "usage: quicpeer COMMAND [FLAGS]   (quicpeer COMMAND --help for its flags)")
	for _, name := range names {
		fmt.Fprintf(w, "  %-16s %s\n", name, cmds[name].summary)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		usage(stderr)
		return fmt.Errorf("%w: no command given", errUsage)
	}
	if args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout)
		return nil
	}
	cmd, ok := commands()[args[0]]
	if !ok {
		usage(stderr)
		return fmt.Errorf("%w: unknown command %q", errUsage, args[0])
	}
	return cmd.run(ctx, args[0], args[1:], stdout, stderr)
}

// parseFlags parses args into fs; --help prints the flags and returns
// errHelp, which callers turn into a clean exit.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return flag.ErrHelp
		}
		return fmt.Errorf("%w: %s: %v", errUsage, fs.Name(), err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: %s: unexpected argument %q (every option is a --flag)", errUsage, fs.Name(), fs.Arg(0))
	}
	return nil
}

func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

func helpIsSuccess(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return err
}

func serverCommand(tr transport, handler streamHandler) func(context.Context, string, []string, io.Writer, io.Writer) error {
	return func(ctx context.Context, name string, args []string, stdout, stderr io.Writer) error {
		fs := newFlagSet(name, stderr)
		var opts serverOptions
		fs.StringVar(&opts.Listen, "listen", "", "address to listen on, e.g. 198.18.0.6:4433 (port 0: any free port)")
		fs.IntVar(&opts.Conns, "conns", 0, "exit after serving this many connections (0: until SIGINT/SIGTERM or --lifetime)")
		fs.DurationVar(&opts.Timeout, "timeout", time.Minute, "abort a connection that lasts longer than this (a lost client never holds the server)")
		fs.DurationVar(&opts.Lifetime, "lifetime", 0, "exit after this long (0: no limit)")
		if err := parseFlags(fs, args); err != nil {
			return helpIsSuccess(err)
		}
		opts.Ready = func(addr net.Addr) {
			fmt.Fprintf(stdout, "READY proto=%s listen=%s\n", tr.name(), addr)
		}
		opts.Log = func(err error) { fmt.Fprintf(stderr, "quicpeer %s: %v\n", name, err) }
		if err := opts.validate(name); err != nil {
			return err
		}
		return serve(ctx, tr, handler, opts)
	}
}

func bulkClientCommand(tr transport) func(context.Context, string, []string, io.Writer, io.Writer) error {
	return func(ctx context.Context, name string, args []string, stdout, stderr io.Writer) error {
		fs := newFlagSet(name, stderr)
		var opts bulkOptions
		fs.StringVar(&opts.Connect, "connect", "", "server address, e.g. 198.18.0.6:4433")
		fs.Int64Var(&opts.Bytes, "bytes", 0, "bytes to send (split over the streams); or use --duration")
		fs.DurationVar(&opts.Duration, "duration", 0, "send for this long, then close and report; or use --bytes")
		fs.IntVar(&opts.Streams, "streams", 1, "parallel streams (QUIC: of one connection; TCP: connections)")
		fs.DurationVar(&opts.Timeout, "timeout", time.Minute, "give up (exit 1) when the transfer has not been confirmed by then")
		if err := parseFlags(fs, args); err != nil {
			return helpIsSuccess(err)
		}
		if err := opts.validate(name); err != nil {
			return err
		}
		res, err := runBulk(ctx, tr, opts)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		fmt.Fprintln(stdout, res.line())
		return nil
	}
}

func latencyClientCommand(tr transport) func(context.Context, string, []string, io.Writer, io.Writer) error {
	return func(ctx context.Context, name string, args []string, stdout, stderr io.Writer) error {
		fs := newFlagSet(name, stderr)
		var opts latencyOptions
		fs.StringVar(&opts.Connect, "connect", "", "server address, e.g. 198.18.0.6:4434")
		fs.IntVar(&opts.Size, "size", 4096, "request payload bytes")
		fs.IntVar(&opts.Count, "count", 10000, "measured requests")
		fs.IntVar(&opts.Warmup, "warmup", 100, "requests sent first and not measured")
		fs.DurationVar(&opts.Timeout, "timeout", time.Minute, "give up (exit 1) when the run has not finished by then")
		if err := parseFlags(fs, args); err != nil {
			return helpIsSuccess(err)
		}
		if err := opts.validate(name); err != nil {
			return err
		}
		res, err := runLatency(ctx, tr, opts)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		fmt.Fprintln(stdout, res.line())
		return nil
	}
}

// opName names a latency operation the way peregrine's side does: push4k
// for 4096-byte pushes, push<N> otherwise.
func opName(size int) string {
	if size%1024 == 0 {
		return fmt.Sprintf("push%dk", size/1024)
	}
	return fmt.Sprintf("push%d", size)
}

// parseResult reads a RESULT line into its key=value fields.
func parseResult(line string) (map[string]string, error) {
	fields := strings.Fields(strings.TrimSpace(line))
	if len(fields) == 0 || fields[0] != "RESULT" {
		return nil, fmt.Errorf("not a RESULT line: %q", line)
	}
	kv := make(map[string]string, len(fields)-1)
	for _, f := range fields[1:] {
		k, v, ok := strings.Cut(f, "=")
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("field %q of %q is not KEY=VALUE", f, line)
		}
		kv[k] = v
	}
	return kv, nil
}
