package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// countingStream counts what a server handler reads, so tests compare the
// server's own count with the client's RESULT.
type countingStream struct {
	stream
	read *atomic.Int64
}

func (c countingStream) Read(p []byte) (int, error) {
	n, err := c.stream.Read(p)
	c.read.Add(int64(n))
	return n, err
}

// startServer serves handler on 127.0.0.1 until the test ends and returns
// the address and the bytes its streams read.
func startServer(t *testing.T, tr transport, handler streamHandler) (string, *atomic.Int64) {
	t.Helper()
	var read atomic.Int64
	ready := make(chan string, 1)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var serveErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		serveErr = serve(ctx, tr, func(s stream) error { return handler(countingStream{s, &read}) }, serverOptions{
			Listen: "127.0.0.1:0", Timeout: 20 * time.Second,
			Ready: func(addr net.Addr) { ready <- addr.String() },
			Log:   func(err error) { t.Errorf("%s server: %v", tr.name(), err) },
		})
	}()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		require.NoError(t, serveErr)
	})
	select {
	case addr := <-ready:
		return addr, &read
	case <-time.After(10 * time.Second):
		cancel()
		wg.Wait()
		t.Fatalf("%s server did not start: %v", tr.name(), serveErr)
		return "", nil
	}
}

// runCLI runs quicpeer with args and returns its stdout.
func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), args, &stdout, &stderr)
	if err != nil {
		return stdout.String(), fmt.Errorf("%w (stderr: %s)", err, stderr.String())
	}
	return stdout.String(), nil
}

func resultFields(t *testing.T, out string) map[string]string {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 1, "one line of output: %q", out)
	kv, err := parseResult(lines[0])
	require.NoError(t, err)
	return kv
}

func parseFloat(t *testing.T, kv map[string]string, key string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(kv[key], 64)
	require.NoError(t, err, "field %s in %v", key, kv)
	return v
}

func TestBulkTransferCountsMatch(t *testing.T) {
	for _, tr := range []transport{transportQUIC, transportTCP} {
		for _, tc := range []struct {
			name string
			args []string
		}{
			{"bytes-1-stream", []string{"--bytes", "3000001"}},
			{"bytes-3-streams", []string{"--bytes", "1000000", "--streams", "3"}},
			{"duration", []string{"--duration", "150ms"}},
		} {
			t.Run(tr.name()+"/"+tc.name, func(t *testing.T) {
				addr, serverRead := startServer(t, tr, serveBulk)
				args := append([]string{tr.name() + "-client", "--connect", addr, "--timeout", "20s"}, tc.args...)
				out, err := runCLI(t, args...)
				require.NoError(t, err)
				kv := resultFields(t, out)
				require.Equal(t, tr.name(), kv["proto"])
				confirmed, err := strconv.ParseInt(kv["bytes"], 10, 64)
				require.NoError(t, err)
				if tc.name != "duration" {
					requested, err := strconv.ParseInt(tc.args[1], 10, 64)
					require.NoError(t, err)
					require.Equal(t, requested, confirmed, "the server confirmed every byte asked for")
				} else {
					require.Positive(t, confirmed)
					require.GreaterOrEqual(t, parseFloat(t, kv, "seconds"), 0.15, "sent for at least --duration")
				}
				require.Equal(t, confirmed, serverRead.Load(), "the server's handlers read what the client reports")
				seconds := parseFloat(t, kv, "seconds")
				require.Positive(t, seconds)
				require.InDelta(t, float64(confirmed)*8/seconds/1e9, parseFloat(t, kv, "goodput_gbps"), 0.01)
			})
		}
	}
}

func TestLatencyRoundTrips(t *testing.T) {
	for _, tr := range []transport{transportQUIC, transportTCP} {
		t.Run(tr.name(), func(t *testing.T) {
			addr, serverRead := startServer(t, tr, serveLatency)
			const count, warmup, size = 300, 20, 4096
			out, err := runCLI(t, tr.name()+"-lat-client", "--connect", addr, "--size", strconv.Itoa(size),
				"--count", strconv.Itoa(count), "--warmup", strconv.Itoa(warmup), "--timeout", "20s")
			require.NoError(t, err)
			kv := resultFields(t, out)
			require.Equal(t, tr.name(), kv["proto"])
			require.Equal(t, "push4k", kv["op"])
			require.Equal(t, strconv.Itoa(count), kv["count"])
			p50, p99, p999 := parseFloat(t, kv, "p50_us"), parseFloat(t, kv, "p99_us"), parseFloat(t, kv, "p999_us")
			require.Positive(t, p50)
			require.LessOrEqual(t, p50, p99)
			require.LessOrEqual(t, p99, p999)
			require.Equal(t, int64((count+warmup)*(4+size)), serverRead.Load(), "every framed request reached the server")
		})
	}
}

func TestServerCommandPrintsReadyAndStopsAfterConns(t *testing.T) {
	for _, name := range []string{"quic-server", "tcp-server", "quic-lat-server", "tcp-lat-server"} {
		t.Run(name, func(t *testing.T) {
			pr, pw := io.Pipe()
			var stderr bytes.Buffer
			done := make(chan error, 1)
			go func() {
				err := run(context.Background(), []string{name, "--listen", "127.0.0.1:0", "--conns", "1", "--timeout", "20s"}, pw, &stderr)
				_ = pw.Close()
				done <- err
			}()
			line, err := bufio.NewReader(pr).ReadString('\n')
			require.NoError(t, err, stderr.String())
			proto, _, _ := strings.Cut(name, "-")
			require.True(t, strings.HasPrefix(line, "READY proto="+proto+" listen=127.0.0.1:"), line)
			addr := strings.TrimSpace(strings.TrimPrefix(line, "READY proto="+proto+" listen="))
			go func() { _, _ = io.Copy(io.Discard, pr) }()

			client := []string{proto + "-client", "--connect", addr, "--bytes", "12345", "--timeout", "20s"}
			if strings.Contains(name, "-lat-") {
				client = []string{proto + "-lat-client", "--connect", addr, "--count", "10", "--warmup", "0", "--timeout", "20s"}
			}
			out, err := runCLI(t, client...)
			require.NoError(t, err)
			resultFields(t, out)
			select {
			case err := <-done:
				require.NoError(t, err, stderr.String())
			case <-time.After(20 * time.Second):
				t.Fatal("the server did not exit after --conns 1")
			}
		})
	}
}

func TestClientGivesUpOnSilentPeer(t *testing.T) {
	t.Run("quic", func(t *testing.T) {
		// A UDP socket nobody reads: the handshake never completes.
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		require.NoError(t, err)
		defer pc.Close()
		startedAt := time.Now()
		_, err = runCLI(t, "quic-client", "--connect", pc.LocalAddr().String(), "--bytes", "1000", "--timeout", "500ms")
		require.Error(t, err)
		require.Contains(t, err.Error(), "--timeout 500ms")
		require.Less(t, time.Since(startedAt), 10*time.Second)
	})
	t.Run("tcp", func(t *testing.T) {
		// Accepts and reads but never confirms.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer ln.Close()
		testDone := make(chan struct{})
		defer close(testDone)
		go func() {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			_, _ = io.Copy(io.Discard, c)
			<-testDone
		}()
		_, err = runCLI(t, "tcp-client", "--connect", ln.Addr().String(), "--bytes", "1000", "--timeout", "500ms")
		require.Error(t, err)
		require.Contains(t, err.Error(), "--timeout 500ms")
	})
}

func TestServerAbortsLostClient(t *testing.T) {
	for _, tr := range []transport{transportQUIC, transportTCP} {
		t.Run(tr.name(), func(t *testing.T) {
			ready := make(chan string, 1)
			done := make(chan error, 1)
			go func() {
				done <- serve(context.Background(), tr, serveBulk, serverOptions{
					Listen: "127.0.0.1:0", Conns: 1, Timeout: 300 * time.Millisecond,
					Ready: func(addr net.Addr) { ready <- addr.String() },
				})
			}()
			addr := <-ready
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			sess, err := tr.connect(ctx, addr, 10*time.Second)
			require.NoError(t, err)
			defer sess.Close()
			s, err := sess.open(ctx)
			require.NoError(t, err)
			_, err = s.Write([]byte("some bytes, then silence"))
			require.NoError(t, err)
			select {
			case err := <-done:
				require.Error(t, err)
				require.Contains(t, err.Error(), "--timeout 300ms")
			case <-time.After(10 * time.Second):
				t.Fatal("the server kept waiting for a silent client")
			}
		})
	}
}

func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "no command"},
		{[]string{"udp-client"}, "unknown command"},
		{[]string{"quic-client", "--connect", "127.0.0.1:1"}, "exactly one of --bytes N and --duration D"},
		{[]string{"quic-client", "--connect", "127.0.0.1:1", "--bytes", "10", "--duration", "1s"}, "exactly one of"},
		{[]string{"tcp-client", "--bytes", "10"}, "--connect is required"},
		{[]string{"tcp-client", "--connect", "127.0.0.1:1", "--bytes", "10", "--streams", "0"}, "--streams 0"},
		{[]string{"quic-client", "--connect", "127.0.0.1:1", "--duration", "2s", "--timeout", "1s"}, "raise --timeout"},
		{[]string{"quic-server"}, "--listen is required"},
		{[]string{"quic-lat-client", "--connect", "127.0.0.1:1", "--size", "0"}, "--size 0"},
		{[]string{"tcp-server", "--listen", "127.0.0.1:0", "stray"}, "unexpected argument"},
	} {
		_, err := runCLI(t, tc.args...)
		require.Error(t, err, "%v", tc.args)
		require.True(t, errors.Is(err, errUsage), "%v: %v", tc.args, err)
		require.Contains(t, err.Error(), tc.want)
	}
	out, err := runCLI(t, "quic-client", "--help")
	require.NoError(t, err, "--help is not a failure")
	require.Empty(t, out)
}

func TestPercentileIsNearestRank(t *testing.T) {
	sorted := make([]time.Duration, 1000)
	for i := range sorted {
		sorted[i] = time.Duration(i+1) * time.Microsecond
	}
	require.Equal(t, 500*time.Microsecond, percentile(sorted, 0.5))
	require.Equal(t, 990*time.Microsecond, percentile(sorted, 0.99))
	require.Equal(t, 999*time.Microsecond, percentile(sorted, 0.999))
	require.Equal(t, 7*time.Microsecond, percentile([]time.Duration{7 * time.Microsecond}, 0.999))
	require.Zero(t, percentile(nil, 0.5))
}

func TestParseResult(t *testing.T) {
	kv, err := parseResult(bulkResult{Proto: "quic", Bytes: 1e6, Elapsed: time.Millisecond}.line())
	require.NoError(t, err)
	require.Equal(t, map[string]string{"proto": "quic", "bytes": "1000000", "seconds": "0.001000", "goodput_gbps": "8.0000"}, kv)
	_, err = parseResult("# quic 1 Gbit/s")
	require.Error(t, err)
	_, err = parseResult("RESULT proto")
	require.Error(t, err)
}
