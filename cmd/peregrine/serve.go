package main

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/user"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/peregrine-net/peregrine"
	"github.com/peregrine-net/peregrine/host"
	"github.com/peregrine-net/peregrine/host/shm"
)

type serveConfig struct {
	socket   string
	port     string
	ip       string
	mode     string
	owner    string
	group    string
	buffers  int
	bufSize  int
	ring     int
	quota    host.Quota
	echo     bool
	shards   int
	duration time.Duration
	period   time.Duration

	// Parsed by validate.
	addr     netip.Addr
	perm     os.FileMode
	uid, gid int
	// ready is called with the server and the echo peer's address once
	// it listens (tests).
	ready func(*host.Server, peregrine.Addr)
}

func newServeCommand() *cobra.Command {
	var cfg serveConfig
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the sidecar: applications attach over a Unix socket and send through this endpoint",
		Long: `serve opens one transport endpoint on --port and listens on the Unix socket
--socket for applications (peregrine.Attach). Each application that
attaches gets a shared-memory channel of its own (a sealed memfd passed over
the socket): rings of descriptors each way and a pool of buffers it writes its
messages into. Dial, listen, accept, close and region registration go over
the socket; sends, receives, pushes and pulls go on the rings, which serve
polls. An application that exits or dies has its
connections closed and its channel released; the others go on.

The socket is created with --socket-mode (0660) and, when given, --owner and
--group. --max-* bound what one application may hold. Per-application
counters print every --stats-period and at the end (after --duration, or on
SIGINT/SIGTERM).`,
		Example: `  peregrine serve --socket /run/peregrine.sock --port afxdp:eth1?queue=0 --ip 198.18.0.1
  peregrine serve --socket /tmp/p.sock --port mem:s/0 --echo   # try it without a network
  peregrine serve --socket /tmp/p.sock --port mem:s/0 --echo --shards 2   # two poll loops, a queue each`,
		Args:    cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error { return cfg.validate() },
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := notifyContext(cmd.Context(), cmd.ErrOrStderr())
			defer stop()
			return runServe(ctx, &cfg, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.socket, "socket", "/run/peregrine.sock", "the Unix socket applications attach to")
	f.StringVar(&cfg.port, "port", "mem:serve/0", "the endpoint's port spec: afxdp:IFACE?queue=N, afpacket:IFACE, mem:PAIR/END")
	f.StringVar(&cfg.ip, "ip", "198.18.0.1", "the endpoint's IPv4 address")
	f.StringVar(&cfg.mode, "socket-mode", "0660", "the socket file's mode, octal")
	f.StringVar(&cfg.owner, "owner", "", "the socket file's owner, a user name or id (default: as created)")
	f.StringVar(&cfg.group, "group", "", "the socket file's group, a group name or id (default: as created)")
	f.IntVar(&cfg.buffers, "buffers", 256, "buffers in a channel an application attaches without asking")
	sizeVar(f, &cfg.bufSize, "buffer-size", 64<<10, "bytes per buffer of such a channel: its longest message")
	f.IntVar(&cfg.ring, "ring", 256, "descriptors per ring of such a channel: its operations in flight")
	f.IntVar(&cfg.quota.Channels, "max-channels", 16, "channels one user may hold at once")
	f.IntVar(&cfg.quota.Buffers, "max-buffers", 1024, "buffers one channel may have")
	sizeVar(f, &cfg.quota.BufSize, "max-buffer-size", 8<<20, "the largest buffer an application may ask for")
	f.IntVar(&cfg.quota.Conns, "max-conns", 64, "connections one channel may hold open")
	f.IntVar(&cfg.quota.Ring, "max-ring", 1024, "the largest ring an application may ask for")
	f.IntVar(&cfg.quota.Regions, "max-regions", 16, "regions (Register) one channel may hold")
	sizeVar(f, &cfg.quota.RegionBytes, "max-region-bytes", 1<<30, "bytes one channel may hold in regions")
	f.IntVar(&cfg.shards, "shards", 1, "run the endpoint as N shards, one poll loop and port queue each (the port is opened with queues=N; --echo's peer gets N too)")
	f.BoolVar(&cfg.echo, "echo", false, "with a mem: port, run an echo peer (IP --ip + 1) on the pair's other end")
	f.DurationVar(&cfg.duration, "duration", 0, "stop after this long (0: until SIGINT/SIGTERM)")
	f.DurationVar(&cfg.period, "stats-period", 10*time.Second, "how often to print per-application counters")
	return cmd
}

func (c *serveConfig) validate() error {
	if c.socket == "" {
		return usage(fmt.Errorf("--socket is empty: give the socket's path"))
	}
	if !strings.HasPrefix(c.port, "mem:") && !strings.HasPrefix(c.port, "afxdp:") && !strings.HasPrefix(c.port, "afpacket:") {
		return usage(fmt.Errorf("--port %q: serve runs on mem:PAIR/END, afxdp:IFACE?… or afpacket:IFACE?…", c.port))
	}
	if c.echo && !strings.HasPrefix(c.port, "mem:") {
		return usage(fmt.Errorf("--echo needs a mem: port (the echo peer runs on the pair's other end); --port is %q", c.port))
	}
	if c.echo && !strings.HasSuffix(c.port, "/0") && !strings.HasSuffix(c.port, "/1") {
		return usage(fmt.Errorf("--echo needs --port mem:PAIR/0 or mem:PAIR/1, not %q", c.port))
	}
	if c.shards == 0 {
		c.shards = 1
	}
	if c.shards < 1 || c.shards > 256 {
		return usage(fmt.Errorf("--shards %d is out of range (use 1..256)", c.shards))
	}
	ip, err := netip.ParseAddr(c.ip)
	if err != nil || !ip.Is4() {
		return usage(fmt.Errorf("--ip %q is not an IPv4 address", c.ip))
	}
	c.addr = ip
	m, err := strconv.ParseUint(c.mode, 8, 32)
	if err != nil || m > 0o777 {
		return usage(fmt.Errorf("--socket-mode %q is not an octal mode in 0..0777", c.mode))
	}
	c.perm = os.FileMode(m)
	if c.perm&0o600 != 0o600 {
		return usage(fmt.Errorf("--socket-mode %q leaves the owner unable to read or write the socket", c.mode))
	}
	if c.uid, err = lookupID(c.owner, "owner", func(s string) (string, error) {
		u, err := user.Lookup(s)
		if err != nil {
			return "", err
		}
		return u.Uid, nil
	}); err != nil {
		return usage(err)
	}
	if c.gid, err = lookupID(c.group, "group", func(s string) (string, error) {
		g, err := user.LookupGroup(s)
		if err != nil {
			return "", err
		}
		return g.Gid, nil
	}); err != nil {
		return usage(err)
	}
	q := c.quota
	if err := usage(
		checkInt("max-channels", q.Channels, 1, 1<<16),
		checkInt("max-buffers", q.Buffers, 1, shm.MaxBuffers),
		checkInt("max-buffer-size", q.BufSize, 64, shm.MaxBufSize),
		checkInt("max-conns", q.Conns, 1, 1<<16),
		checkInt("max-ring", q.Ring, 2, shm.MaxRing),
		checkInt("max-regions", q.Regions, 1, 1<<16),
		checkInt("max-region-bytes", q.RegionBytes, 1, 1<<40),
		checkInt("buffers", c.buffers, 1, q.Buffers),
		checkInt("buffer-size", c.bufSize, 64, q.BufSize),
		checkInt("ring", c.ring, 2, q.Ring),
		checkDuration("duration", c.duration, "run until SIGINT/SIGTERM"),
		checkPositiveDuration("stats-period", c.period, minPeriod),
	); err != nil {
		return err
	}
	l := shm.Layout{RingSize: c.ring, Buffers: c.buffers, BufSize: c.bufSize}
	if err := l.Check(); err != nil {
		return usage(fmt.Errorf("--ring, --buffers, --buffer-size: %v", err))
	}
	if q.Ring&(q.Ring-1) != 0 {
		return usage(fmt.Errorf("--max-ring %d is not a power of two", q.Ring))
	}
	return nil
}

// lookupID reads a user or group as a name or a number; empty is -1
// (unchanged).
func lookupID(s, flag string, byName func(string) (string, error)) (int, error) {
	if s == "" {
		return -1, nil
	}
	if n, err := strconv.Atoi(s); err == nil {
		if n < 0 || n > 1<<31-2 {
			return 0, fmt.Errorf("--%s %s is out of range", flag, s)
		}
		return n, nil
	}
	id, err := byName(s)
	if err != nil {
		return 0, fmt.Errorf("--%s %q: %v", flag, s, err)
	}
	return strconv.Atoi(id)
}

func runServe(ctx context.Context, c *serveConfig, out io.Writer) error {
	h, err := peregrine.NewHost(peregrine.HostOptions{})
	if err != nil {
		return err
	}
	defer h.Close()
	ep, err := h.Open(c.port, peregrine.Options{IP: c.addr, Shards: c.shards})
	if err != nil {
		return err
	}
	defer ep.Close()
	var echoAddr peregrine.Addr
	if c.echo {
		other := c.port[:len(c.port)-1] + map[byte]string{'0': "1", '1': "0"}[c.port[len(c.port)-1]]
		peerIP := c.addr.Next()
		pe, err := h.Open(other, peregrine.Options{IP: peerIP, Shards: c.shards})
		if err != nil {
			return err
		}
		defer pe.Close()
		if err := runEcho(ctx, pe, c.quota.BufSize); err != nil {
			return err
		}
		echoAddr = pe.Addr()
		fmt.Fprintf(out, "echo peer at %s %x on %s\n", peerIP, echoAddr.MAC[:], other)
	}
	srv, err := host.New(host.Options{Socket: c.socket, Mode: c.perm, UID: c.uid, GID: c.gid, Endpoint: ep,
		Quota: c.quota, Default: shm.Layout{RingSize: c.ring, Buffers: c.buffers, BufSize: c.bufSize}})
	if err != nil {
		return err
	}
	a := ep.Addr()
	fmt.Fprintf(out, "serving %s on %s (%s %x)\n", c.socket, c.port, c.addr, a.MAC[:])
	if c.ready != nil {
		c.ready(srv, echoAddr)
	}
	if c.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.duration)
		defer cancel()
	}
	done := make(chan struct{})
	go func() { defer close(done); srv.Run(ctx) }()
	t := time.NewTicker(c.period)
	defer t.Stop()
	for running := true; running; {
		select {
		case <-ctx.Done():
			running = false
		case <-t.C:
			printServeStats(out, srv)
		}
	}
	<-done
	err = srv.Close()
	printServeStats(out, srv)
	return err
}

func printServeStats(out io.Writer, srv *host.Server) {
	st := srv.Stats(func(a host.AppStats) {
		fmt.Fprintf(out, "  app %d (uid %d pid %d): ops %d ok %d failed %d unused, %d B sent %d B received, %d conns, %d in flight (%d buffers), refused: op %d conn %d buffer %d ring %d control %d quota %d\n",
			a.ID, a.UID, a.PID, a.OpsOK, a.OpsFailed, a.OpsUnused, a.BytesSent, a.BytesReceived, a.Conns, a.InFlight, a.Buffers,
			a.BadOp, a.BadConn, a.BadBuffer, a.BadRingIndex, a.BadControl, a.QuotaRefused)
	})
	fmt.Fprintf(out, "applications: %d attached, %d attaches, %d detaches, %d refused\n", st.Attached, st.Attaches, st.Detaches, st.Refused)
}

// runEcho answers every connection dialled to ep with its own messages.
func runEcho(ctx context.Context, ep *peregrine.Endpoint, maxMsg int) error {
	l, err := ep.Listen(peregrine.ConnOptions{RecvSlots: 4, MaxMessage: maxMsg})
	if err != nil {
		return err
	}
	go func() {
		for {
			c, err := l.Accept(ctx)
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, maxMsg)
				for {
					n, err := c.Recv(ctx, buf)
					if err != nil || c.Send(ctx, buf[:n]) != nil {
						return
					}
				}
			}()
		}
	}()
	return nil
}
