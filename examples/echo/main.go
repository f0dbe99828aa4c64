// Command echo is an RPC echo server and client over peregrine: the client
// sends N requests of S bytes, one at a time, checks that every reply is
// its request, and prints the requests per second and the round trip's
// p50 and p99.
//
// The server opens its own port in this process; the client opens one too
// or, with -sidecar, attaches to a running appliance (peregrine serve) and
// sends through it. With -role both (the default) server and client run in
// this process, e.g. over a mem: pair:
//
//	echo -port mem:e/0 -server-port mem:e/1
//
// Across processes or machines, run the server on one port and point the
// client at the address it prints:
//
//	echo -role server -server-port afxdp:veth1 -server-ip 198.18.0.2
//	echo -role client -sidecar /run/peregrine.sock -server-ip 198.18.0.2 -server-mac 02:…
package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/peregrine-net/peregrine"
	"github.com/peregrine-net/peregrine/examples/internal/macaddr"
)

type config struct {
	role       string // both, server, client
	port       string // the client's port (in-process door)
	ip         string
	sidecar    string // the appliance's socket (sidecar door)
	serverPort string
	serverIP   string
	serverMAC  string // -role client: the server's MAC, as it printed it
	n, size    int

	// host, when set, is the host the in-process ports open on (tests:
	// the two ends of a mem: pair must share one).
	host *peregrine.Host
	// ready, when set, is called with the server's address once it
	// listens (tests).
	ready func(peregrine.Addr)
}

// result is what the client measured.
type result struct {
	requests int
	elapsed  time.Duration
	p50, p99 time.Duration
}

func main() {
	var c config
	flag.StringVar(&c.role, "role", "both", "both (server and client in this process), server or client")
	flag.StringVar(&c.port, "port", "mem:echo/0", "the client's port spec (mem:PAIR/END, afxdp:IFACE?…, afpacket:IFACE?…)")
	flag.StringVar(&c.ip, "ip", "198.18.0.1", "the client's IPv4 address")
	flag.StringVar(&c.sidecar, "sidecar", "", "send through the appliance listening on this Unix socket instead of opening -port")
	flag.StringVar(&c.serverPort, "server-port", "mem:echo/1", "the server's port spec")
	flag.StringVar(&c.serverIP, "server-ip", "198.18.0.2", "the server's IPv4 address")
	flag.StringVar(&c.serverMAC, "server-mac", "", "-role client: the server's MAC address, as the server printed it")
	flag.IntVar(&c.n, "n", 10000, "requests the client sends")
	flag.IntVar(&c.size, "size", 1024, "bytes per request (at least 8)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "echo:", err)
		os.Exit(1)
	}
}

func (c *config) check() error {
	switch {
	case c.role != "both" && c.role != "server" && c.role != "client":
		return fmt.Errorf("-role %q: both, server or client", c.role)
	case c.n < 1:
		return fmt.Errorf("-n %d: send at least one request", c.n)
	case c.size < 8 || c.size > 8<<20:
		return fmt.Errorf("-size %d: 8 bytes (the request's number) to 8 MiB", c.size)
	case c.role == "client" && c.serverMAC == "":
		return errors.New("-role client needs -server-mac (the server prints it)")
	}
	return nil
}

func run(ctx context.Context, c config, out io.Writer) (err error) {
	if err := c.check(); err != nil {
		return err
	}
	serverIP, err := netip.ParseAddr(c.serverIP)
	if err != nil {
		return fmt.Errorf("-server-ip: %w", err)
	}
	h := c.host
	if h == nil && (c.role != "client" || c.sidecar == "") {
		if h, err = peregrine.NewHost(peregrine.HostOptions{}); err != nil {
			return err
		}
		defer func() { err = errors.Join(err, h.Close()) }()
	}
	peer := peregrine.Addr{IP: serverIP}
	var wg sync.WaitGroup
	serverErr := make(chan error, 1)
	stopServer := func() {}
	if c.role != "client" {
		sctx, cancel := context.WithCancel(ctx)
		stopServer = cancel
		defer cancel()
		ready := make(chan peregrine.Addr, 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			serverErr <- serve(sctx, where{port: c.serverPort, ip: serverIP, host: h, maxMessage: c.size}, ready)
		}()
		select {
		case peer = <-ready:
		case err := <-serverErr:
			return fmt.Errorf("server: %w", err)
		}
		fmt.Fprintf(out, "server listening at %s %s on %s\n", peer.IP, net.HardwareAddr(peer.MAC[:]), c.serverPort)
		if c.ready != nil {
			c.ready(peer)
		}
		if c.role == "server" {
			wg.Wait()
			return <-serverErr
		}
	} else {
		mac, err := macaddr.Parse(c.serverMAC)
		if err != nil {
			return fmt.Errorf("-server-mac %q is not a MAC address", c.serverMAC)
		}
		peer.MAC = mac
	}
	spec := where{sidecar: c.sidecar, port: c.port, host: h, maxMessage: c.size}
	if spec.ip, err = netip.ParseAddr(c.ip); err != nil && c.sidecar == "" {
		return fmt.Errorf("-ip: %w", err)
	}
	r, err := client(ctx, spec, peer, c.n, c.size)
	stopServer()
	wg.Wait()
	if c.role == "both" {
		err = errors.Join(err, <-serverErr)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%d requests of %d B, every reply checked: %.0f requests/s, p50 %v, p99 %v\n",
		r.requests, c.size, float64(r.requests)/r.elapsed.Seconds(), r.p50, r.p99)
	return nil
}

// serve answers every connection with its own messages until ctx ends.
func serve(ctx context.Context, spec where, ready chan<- peregrine.Addr) (err error) {
	ep, err := open(spec)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, ep.Close()) }()
	l, err := ep.Listen(peregrine.ConnOptions{MaxMessage: spec.maxMessage})
	if err != nil {
		return err
	}
	ready <- ep.Addr()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := l.Accept(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return l.Close()
			}
			return errors.Join(err, l.Close())
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			buf := make([]byte, spec.maxMessage)
			for {
				n, err := c.Recv(ctx, buf)
				if err != nil {
					return // the client closed, or the server stops
				}
				if err := c.Send(ctx, buf[:n]); err != nil {
					return
				}
			}
		}()
	}
}

// client sends n requests of size bytes to peer and checks each reply.
func client(ctx context.Context, spec where, peer peregrine.Addr, n, size int) (r result, err error) {
	ep, err := open(spec)
	if err != nil {
		return r, err
	}
	defer func() { err = errors.Join(err, ep.Close()) }()
	c, err := ep.Dial(ctx, peer, peregrine.ConnOptions{MaxMessage: size})
	if err != nil {
		return r, err
	}
	defer func() { err = errors.Join(err, c.Close()) }()
	req := make([]byte, size)
	for i := range req {
		req[i] = byte(i * 7)
	}
	reply := make([]byte, size)
	rtts := make([]time.Duration, n)
	start := time.Now()
	for i := range n {
		// Every request differs (its number leads it), so a reply to an
		// earlier one, or a stale buffer, does not pass the check.
		binary.LittleEndian.PutUint64(req, uint64(i))
		t := time.Now()
		if err := c.Send(ctx, req); err != nil {
			return r, fmt.Errorf("request %d: %w", i, err)
		}
		got, err := c.Recv(ctx, reply)
		if err != nil {
			return r, fmt.Errorf("reply %d: %w", i, err)
		}
		rtts[i] = time.Since(t)
		if got != size || !bytes.Equal(reply[:got], req) {
			return r, fmt.Errorf("reply %d: %d bytes differ from the request's %d", i, got, size)
		}
	}
	r.elapsed = time.Since(start)
	slices.Sort(rtts)
	r.requests = n
	r.p50 = rtts[n/2]
	r.p99 = rtts[min(n-1, n*99/100)]
	return r, nil
}

// where says which door an endpoint comes through: the appliance's socket
// (sidecar), or a port of this process's own on host.
type where struct {
	sidecar string
	port    string
	ip      netip.Addr
	host    *peregrine.Host
	// maxMessage is the longest message the endpoint sends or receives.
	maxMessage int
}

// open is the door: both return the same *peregrine.Endpoint, so the rest
// of the program does not know which it came through.
func open(w where) (*peregrine.Endpoint, error) {
	if w.sidecar != "" {
		return peregrine.Attach(w.sidecar, peregrine.AttachOptions{})
	}
	return w.host.Open(w.port, peregrine.Options{IP: w.ip})
}
