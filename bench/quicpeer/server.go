package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// maxRequest bounds a latency request a server accepts, so a corrupt length
// prefix cannot make it allocate gigabytes.
const maxRequest = 16 << 20

type serverOptions struct {
	Listen   string
	Conns    int           // exit after this many connections; 0: no limit
	Timeout  time.Duration // per-connection limit
	Lifetime time.Duration // 0: until ctx ends
	Ready    func(addr net.Addr)
	Log      func(err error)
}

func (o serverOptions) validate(cmd string) error {
	switch {
	case o.Listen == "":
		return fmt.Errorf("%w: %s: --listen is required, e.g. --listen 198.18.0.6:4433", errUsage, cmd)
	case o.Conns < 0:
		return fmt.Errorf("%w: %s: --conns %d must be at least 0 (0 serves until stopped)", errUsage, cmd, o.Conns)
	case o.Timeout <= 0:
		return fmt.Errorf("%w: %s: --timeout %v must be positive, e.g. --timeout 1m", errUsage, cmd, o.Timeout)
	case o.Lifetime < 0:
		return fmt.Errorf("%w: %s: --lifetime %v must be at least 0 (0: no limit)", errUsage, cmd, o.Lifetime)
	}
	return nil
}

// serve accepts connections and runs handler on each of their streams. With
// opts.Conns set it returns the connections' errors joined; otherwise it
// logs them and keeps serving until ctx ends or opts.Lifetime passes.
func serve(ctx context.Context, tr transport, handler streamHandler, opts serverOptions) error {
	if opts.Lifetime > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opts.Lifetime)
		defer cancel()
	}
	ln, err := tr.listen(ctx, opts.Listen)
	if err != nil {
		return err
	}
	stopClose := context.AfterFunc(ctx, func() { _ = ln.Close() })
	defer stopClose()
	if opts.Ready != nil {
		opts.Ready(ln.Addr())
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	var acceptErr error
	for served := 0; opts.Conns == 0 || served < opts.Conns; served++ {
		c, err := ln.accept(ctx)
		if err != nil {
			if ctx.Err() == nil {
				acceptErr = fmt.Errorf("%s accept on %s: %w", tr.name(), ln.Addr(), err)
			}
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, opts.Timeout)
			defer cancel()
			if err := c.serve(cctx, handler); err != nil {
				if ctx.Err() != nil && errors.Is(err, context.Canceled) {
					return // the server is stopping; the connection was cut short, not broken
				}
				var netErr net.Error
				if ctx.Err() == nil && (cctx.Err() != nil || errors.As(err, &netErr) && netErr.Timeout()) {
					err = fmt.Errorf("%w (aborted after --timeout %v)", err, opts.Timeout)
				}
				if opts.Log != nil {
					opts.Log(err)
				}
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	closeErr := ln.Close()
	if closeErr != nil && (errors.Is(closeErr, net.ErrClosed) || ctx.Err() != nil) {
		closeErr = nil
	}
	if opts.Conns == 0 {
		return errors.Join(acceptErr, closeErr) // per-connection errors were logged
	}
	return errors.Join(append(errs, acceptErr, closeErr)...)
}

// serveBulk reads s to EOF and replies with the byte count.
func serveBulk(s stream) error {
	buf := make([]byte, 256<<10)
	var n int64
	for {
		m, err := s.Read(buf)
		n += int64(m)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("after %d bytes: %w", n, err)
		}
	}
	var reply [8]byte
	binary.BigEndian.PutUint64(reply[:], uint64(n))
	if _, err := s.Write(reply[:]); err != nil {
		return fmt.Errorf("reply with the count %d: %w", n, err)
	}
	// The reply is written; a failed FIN means the client already has what
	// it needs and closed first.
	_ = s.CloseWrite()
	return nil
}

// serveLatency acknowledges framed requests until the client half-closes.
func serveLatency(s stream) error {
	var (
		header [4]byte
		reply  [8]byte
		buf    []byte
	)
	for requests := 0; ; requests++ {
		if _, err := io.ReadFull(s, header[:]); err != nil {
			if errors.Is(err, io.EOF) {
				_ = s.CloseWrite()
				return nil
			}
			return fmt.Errorf("request %d header: %w", requests, err)
		}
		size := binary.BigEndian.Uint32(header[:])
		if size > maxRequest {
			return fmt.Errorf("request %d announces %d bytes, more than the %d this server accepts", requests, size, maxRequest)
		}
		if cap(buf) < int(size) {
			buf = make([]byte, size)
		}
		if _, err := io.ReadFull(s, buf[:size]); err != nil {
			return fmt.Errorf("request %d payload of %d bytes: %w", requests, size, err)
		}
		binary.BigEndian.PutUint64(reply[:], uint64(size))
		if _, err := s.Write(reply[:]); err != nil {
			return fmt.Errorf("request %d reply: %w", requests, err)
		}
	}
}
