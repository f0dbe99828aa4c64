package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"slices"
	"sync"
	"time"
)

type bulkOptions struct {
	Connect  string
	Bytes    int64         // total over all streams; 0 when Duration is set
	Duration time.Duration // send for this long; 0 when Bytes is set
	Streams  int
	Timeout  time.Duration // whole run, handshake included
}

func (o bulkOptions) validate(cmd string) error {
	switch {
	case o.Connect == "":
		return fmt.Errorf("%w: %s: --connect is required, e.g. --connect 198.18.0.6:4433", errUsage, cmd)
	case o.Bytes < 0:
		return fmt.Errorf("%w: %s: --bytes %d must be positive", errUsage, cmd, o.Bytes)
	case o.Duration < 0:
		return fmt.Errorf("%w: %s: --duration %v must be positive", errUsage, cmd, o.Duration)
	case (o.Bytes > 0) == (o.Duration > 0):
		return fmt.Errorf("%w: %s: give exactly one of --bytes N and --duration D (got --bytes %d --duration %v)", errUsage, cmd, o.Bytes, o.Duration)
	case o.Streams < 1:
		return fmt.Errorf("%w: %s: --streams %d must be at least 1", errUsage, cmd, o.Streams)
	case o.Bytes > 0 && o.Bytes < int64(o.Streams):
		return fmt.Errorf("%w: %s: --bytes %d is less than one byte per stream (--streams %d)", errUsage, cmd, o.Bytes, o.Streams)
	case o.Timeout <= 0:
		return fmt.Errorf("%w: %s: --timeout %v must be positive, e.g. --timeout 1m", errUsage, cmd, o.Timeout)
	case o.Duration > 0 && o.Duration >= o.Timeout:
		return fmt.Errorf("%w: %s: --duration %v leaves no time for the confirmation before --timeout %v (raise --timeout)", errUsage, cmd, o.Duration, o.Timeout)
	}
	return nil
}

type bulkResult struct {
	Proto   string
	Bytes   int64 // confirmed by the server
	Elapsed time.Duration
}

func (r bulkResult) goodputGbps() float64 {
	return float64(r.Bytes) * 8 / r.Elapsed.Seconds() / 1e9
}

func (r bulkResult) line() string {
	return fmt.Sprintf("RESULT proto=%s bytes=%d seconds=%.6f goodput_gbps=%.4f", r.Proto, r.Bytes, r.Elapsed.Seconds(), r.goodputGbps())
}

// withTimeout bounds ctx by timeout and turns a failure after it into an
// error that names the flag.
func withTimeout(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc, func(error) error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	explain := func(err error) error {
		var netErr net.Error
		if err != nil && (errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.As(err, &netErr) && netErr.Timeout()) {
			return fmt.Errorf("gave up waiting for the peer (--timeout %v; peer lost or path broken?): %w", timeout, err)
		}
		return err
	}
	return ctx, cancel, explain
}

// runBulk sends the bulk transfer and returns what the server confirmed.
func runBulk(ctx context.Context, tr transport, opts bulkOptions) (bulkResult, error) {
	ctx, cancel, explain := withTimeout(ctx, opts.Timeout)
	defer cancel()
	sess, err := tr.connect(ctx, opts.Connect, opts.Timeout)
	if err != nil {
		return bulkResult{}, explain(err)
	}
	// Closing the session unblocks every stream operation when ctx ends.
	stopAbort := context.AfterFunc(ctx, func() { _ = sess.Close() })
	defer stopAbort()
	defer sess.Close()
	deadline, _ := ctx.Deadline()
	streams := make([]stream, opts.Streams)
	for i := range streams {
		if streams[i], err = sess.open(ctx); err != nil {
			return bulkResult{}, explain(err)
		}
		_ = streams[i].SetDeadline(deadline)
	}

	confirmed := make([]int64, len(streams))
	confirmedAt := make([]time.Time, len(streams))
	errs := make([]error, len(streams))
	var wg sync.WaitGroup
	start := time.Now()
	stopAt := start.Add(opts.Duration)
	for i, s := range streams {
		limit := int64(-1) // send until stopAt
		if opts.Bytes > 0 {
			limit = opts.Bytes / int64(len(streams))
			if int64(i) < opts.Bytes%int64(len(streams)) {
				limit++
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			confirmed[i], confirmedAt[i], errs[i] = sendBulk(s, limit, stopAt)
			if errs[i] != nil {
				errs[i] = fmt.Errorf("stream %d: %w", i, errs[i])
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return bulkResult{}, explain(err)
	}
	var total int64
	end := start
	for i, n := range confirmed {
		total += n
		if confirmedAt[i].After(end) {
			end = confirmedAt[i]
		}
	}
	return bulkResult{Proto: tr.name(), Bytes: total, Elapsed: end.Sub(start)}, nil
}

// sendBulk writes limit bytes (limit < 0: until stopAt), half-closes s and
// returns the count the server confirms, which must equal what was sent,
// and when the confirmation arrived.
func sendBulk(s stream, limit int64, stopAt time.Time) (int64, time.Time, error) {
	buf := make([]byte, 64<<10)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	var sent int64
	for {
		n := int64(len(buf))
		if limit >= 0 {
			if sent >= limit {
				break
			}
			n = min(n, limit-sent)
		} else if !time.Now().Before(stopAt) {
			break
		}
		w, err := s.Write(buf[:n])
		sent += int64(w)
		if err != nil {
			return 0, time.Time{}, fmt.Errorf("write after %d bytes: %w", sent, err)
		}
	}
	if err := s.CloseWrite(); err != nil {
		return 0, time.Time{}, fmt.Errorf("close the sending side after %d bytes: %w", sent, err)
	}
	var reply [8]byte
	if _, err := io.ReadFull(s, reply[:]); err != nil {
		return 0, time.Time{}, fmt.Errorf("read the server's confirmation of %d bytes: %w", sent, err)
	}
	at := time.Now()
	got := int64(binary.BigEndian.Uint64(reply[:]))
	if got != sent {
		return 0, time.Time{}, fmt.Errorf("server confirmed %d bytes, %d were sent", got, sent)
	}
	if err := drain(s); err != nil {
		return 0, time.Time{}, err
	}
	return got, at, nil
}

// closeAndDrain half-closes s and waits for the server's end of stream, so
// the session closes only after the server has finished with the stream
// (closing a QUIC connection earlier would fail the server's pending read).
func closeAndDrain(s stream) error {
	if err := s.CloseWrite(); err != nil {
		return err
	}
	return drain(s)
}

// drain waits for the server's end of stream, which must carry no more data.
func drain(s stream) error {
	var extra [64]byte
	n, err := io.ReadFull(s, extra[:])
	switch {
	case errors.Is(err, io.EOF):
		return nil
	case err == nil || errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("server sent %d unexpected bytes at the end", n)
	default:
		return fmt.Errorf("wait for the server's end of stream: %w", err)
	}
}

type latencyOptions struct {
	Connect string
	Size    int
	Count   int
	Warmup  int
	Timeout time.Duration
}

func (o latencyOptions) validate(cmd string) error {
	switch {
	case o.Connect == "":
		return fmt.Errorf("%w: %s: --connect is required, e.g. --connect 198.18.0.6:4434", errUsage, cmd)
	case o.Size < 1 || o.Size > maxRequest:
		return fmt.Errorf("%w: %s: --size %d is out of range (1..%d)", errUsage, cmd, o.Size, maxRequest)
	case o.Count < 1:
		return fmt.Errorf("%w: %s: --count %d must be at least 1", errUsage, cmd, o.Count)
	case o.Warmup < 0:
		return fmt.Errorf("%w: %s: --warmup %d must be at least 0", errUsage, cmd, o.Warmup)
	case o.Timeout <= 0:
		return fmt.Errorf("%w: %s: --timeout %v must be positive, e.g. --timeout 1m", errUsage, cmd, o.Timeout)
	}
	return nil
}

type latencyResult struct {
	Proto          string
	Op             string
	P50, P99, P999 time.Duration
	Count          int
}

func (r latencyResult) line() string {
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	return fmt.Sprintf("RESULT proto=%s op=%s p50_us=%.1f p99_us=%.1f p999_us=%.1f count=%d",
		r.Proto, r.Op, us(r.P50), us(r.P99), us(r.P999), r.Count)
}

// percentile is the nearest-rank q-quantile of sorted (q in (0, 1]).
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// runLatency sends opts.Warmup+opts.Count requests one at a time on one
// stream and reports the round-trip percentiles of the measured ones.
func runLatency(ctx context.Context, tr transport, opts latencyOptions) (latencyResult, error) {
	ctx, cancel, explain := withTimeout(ctx, opts.Timeout)
	defer cancel()
	sess, err := tr.connect(ctx, opts.Connect, opts.Timeout)
	if err != nil {
		return latencyResult{}, explain(err)
	}
	stopAbort := context.AfterFunc(ctx, func() { _ = sess.Close() })
	defer stopAbort()
	defer sess.Close()
	s, err := sess.open(ctx)
	if err != nil {
		return latencyResult{}, explain(err)
	}
	deadline, _ := ctx.Deadline()
	_ = s.SetDeadline(deadline)

	req := make([]byte, 4+opts.Size)
	binary.BigEndian.PutUint32(req, uint32(opts.Size))
	for i := 4; i < len(req); i++ {
		req[i] = byte(i)
	}
	samples := make([]time.Duration, 0, opts.Count)
	var reply [8]byte
	for i := range opts.Warmup + opts.Count {
		t0 := time.Now()
		if _, err := s.Write(req); err != nil {
			return latencyResult{}, explain(fmt.Errorf("request %d: %w", i, err))
		}
		if _, err := io.ReadFull(s, reply[:]); err != nil {
			return latencyResult{}, explain(fmt.Errorf("reply to request %d: %w", i, err))
		}
		rtt := time.Since(t0)
		if got := binary.BigEndian.Uint64(reply[:]); got != uint64(opts.Size) {
			return latencyResult{}, fmt.Errorf("reply to request %d acknowledges %d bytes, %d were sent", i, got, opts.Size)
		}
		if i >= opts.Warmup {
			samples = append(samples, rtt)
		}
	}
	if err := closeAndDrain(s); err != nil {
		return latencyResult{}, explain(fmt.Errorf("end the request stream: %w", err))
	}
	slices.Sort(samples)
	return latencyResult{
		Proto: tr.name(), Op: opName(opts.Size), Count: len(samples),
		P50: percentile(samples, 0.50), P99: percentile(samples, 0.99), P999: percentile(samples, 0.999),
	}, nil
}
