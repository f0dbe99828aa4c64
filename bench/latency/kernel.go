package latency

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/peregrine-net/peregrine/core/hist"
	"github.com/peregrine-net/peregrine/internal/tools"
)

// ErrNoSockperf is wrapped when sockperf, the kernel UDP anchor, is not
// installed.
var ErrNoSockperf = errors.New("bench latency: sockperf is not installed")

// checkTools finds the programs the run shells out to.
func checkTools() error {
	for _, p := range []string{"ip", "taskset"} {
		if _, err := tools.Find(p); err != nil {
			return fmt.Errorf("bench latency: %w", err)
		}
	}
	if _, err := tools.Find("sockperf"); err != nil {
		return fmt.Errorf("%w: %w", ErrNoSockperf, err)
	}
	return nil
}

const sockperfPort = "11111"

// sockperf runs `sockperf ping-pong` (kernel UDP, blocking receives) from
// namespace a against a `sockperf server` in b, each pinned to its side's
// CPU, and reads its full round-trip percentiles.
func (t *topology) sockperf(ctx context.Context, size int, d time.Duration) (quantiles, error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	server := exec.CommandContext(sctx, "ip", "netns", "exec", t.b.Name, "taskset", "-c", strconv.Itoa(t.cpuB),
		"sockperf", "server", "-i", kernelAddr(), "-p", sockperfPort)
	out, err := server.StdoutPipe()
	if err != nil {
		return quantiles{}, err
	}
	server.Stderr = server.Stdout
	if err := server.Start(); err != nil {
		return quantiles{}, fmt.Errorf("sockperf server: %w", err)
	}
	defer func() { cancel(); _ = server.Wait() }()
	// The server prints how it blocks once its socket is bound.
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		var seen []string
		for sc.Scan() {
			seen = append(seen, sc.Text())
			if strings.Contains(sc.Text(), "to block on socket") {
				ready <- nil
				_, _ = io.Copy(io.Discard, out)
				return
			}
		}
		ready <- fmt.Errorf("sockperf server ended before it listened: %s", strings.Join(seen, " | "))
	}()
	select {
	case err := <-ready:
		if err != nil {
			return quantiles{}, err
		}
	case <-time.After(10 * time.Second):
		return quantiles{}, errors.New("sockperf server did not listen within 10s")
	}
	secs := max(1, int(d/time.Second))
	client := exec.CommandContext(ctx, "ip", "netns", "exec", t.a.Name, "taskset", "-c", strconv.Itoa(t.cpuA),
		"sockperf", "ping-pong", "-i", kernelAddr(), "-p", sockperfPort, "-m", strconv.Itoa(size), "-t", strconv.Itoa(secs), "--full-rtt")
	res, err := client.CombinedOutput()
	if err != nil {
		return quantiles{}, fmt.Errorf("sockperf ping-pong: %w: %s", err, res)
	}
	return parseSockperf(res)
}

// parseSockperf reads the percentiles of a sockperf ping-pong report
// ("---> percentile 50.000 =   16.039", microseconds).
func parseSockperf(out []byte) (quantiles, error) {
	var q quantiles
	found := 0
	for _, l := range lines(out) {
		_, rest, ok := strings.Cut(l, "---> percentile ")
		if !ok {
			continue
		}
		pct, val, ok := strings.Cut(rest, "=")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil {
			return q, fmt.Errorf("sockperf: %q: %w", l, err)
		}
		switch strings.TrimSpace(pct) {
		case "50.000":
			q.p50 = v
			found++
		case "99.000":
			q.p99 = v
			found++
		case "99.900":
			q.p999 = v
			found++
		}
	}
	if found != 3 {
		return q, fmt.Errorf("sockperf: no p50, p99 and p99.9 in its report: %s", out)
	}
	return q, nil
}

// tcpPingPong measures n round trips of size bytes over kernel TCP (Go's
// net, Nagle off as Go leaves it), a client in namespace a and an echo
// server in b.
func (t *topology) tcpPingPong(ctx context.Context, size, n int) (quantiles, error) {
	var ln net.Listener
	if err := t.b.Do(func() (err error) {
		ln, err = net.Listen("tcp4", net.JoinHostPort(kernelAddr(), "0"))
		return err
	}); err != nil {
		return quantiles{}, err
	}
	defer ln.Close()
	served := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			served <- err
			return
		}
		defer c.Close()
		buf := make([]byte, size)
		for {
			if _, err := io.ReadFull(c, buf); err != nil {
				if errors.Is(err, io.EOF) {
					err = nil
				}
				served <- err
				return
			}
			if _, err := c.Write(buf); err != nil {
				served <- err
				return
			}
		}
	}()
	var c net.Conn
	if err := t.a.Do(func() (err error) {
		var d net.Dialer
		c, err = d.DialContext(ctx, "tcp4", ln.Addr().String())
		return err
	}); err != nil {
		return quantiles{}, err
	}
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	msg := make([]byte, size)
	var h hist.Histogram
	warm := max(10, n/10)
	for i := range warm + n {
		start := time.Now()
		if _, err := c.Write(msg); err != nil {
			c.Close()
			return quantiles{}, err
		}
		if _, err := io.ReadFull(c, msg); err != nil {
			c.Close()
			return quantiles{}, err
		}
		if i >= warm {
			h.Record(uint64(time.Since(start)))
		}
	}
	c.Close()
	if err := <-served; err != nil {
		return quantiles{}, fmt.Errorf("echo server: %w", err)
	}
	return fromHist(&h), nil
}
