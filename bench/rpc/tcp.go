package rpc

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// tcpDoor is kernel TCP with Go's net: what an application would pick
// otherwise. One connection; each message is a 4-byte little-endian
// length and the payload, written with one Write (Nagle off, as Go leaves
// it). In memory the rows run over loopback in the bench's namespace; over
// veth, the server listens on the kernel's address of the veth end in
// namespace b and the client dials from namespace a.
type tcpDoor struct{ m *media }

func (d *tcpDoor) close() error { return nil }

// connect returns a connected client and the accepted server end.
func (d *tcpDoor) connect(ctx context.Context) (cc, sc net.Conn, err error) {
	var ln net.Listener
	listen := func() (err error) {
		ln, err = net.Listen("tcp4", net.JoinHostPort(d.m.tcpAddr, "0"))
		return err
	}
	dial := func() (err error) {
		var dl net.Dialer
		cc, err = dl.DialContext(ctx, "tcp4", ln.Addr().String())
		return err
	}
	if d.m.nsB != nil {
		err = d.m.nsB.Do(listen)
	} else {
		err = listen()
	}
	if err != nil {
		return nil, nil, err
	}
	defer ln.Close()
	if d.m.nsA != nil {
		err = d.m.nsA.Do(dial)
	} else {
		err = dial()
	}
	if err != nil {
		return nil, nil, err
	}
	if sc, err = ln.Accept(); err != nil {
		return nil, nil, errors.Join(err, cc.Close())
	}
	return cc, sc, nil
}

// readMsg reads one length-prefixed message into buf[4:] and returns the
// whole frame (prefix and payload).
func readMsg(r *bufio.Reader, buf []byte) ([]byte, error) {
	if _, err := io.ReadFull(r, buf[:4]); err != nil {
		return nil, err
	}
	n := int(binary.LittleEndian.Uint32(buf))
	if n > len(buf)-4 {
		return nil, fmt.Errorf("a message of %d bytes for a buffer of %d", n, len(buf)-4)
	}
	if _, err := io.ReadFull(r, buf[4:4+n]); err != nil {
		return nil, err
	}
	return buf[:4+n], nil
}

func (d *tcpDoor) rows(ctx context.Context, size, depth int, n rowLen) (result, error) {
	ctx, cancel := context.WithTimeout(ctx, rowGuard(n))
	defer cancel()
	cc, sc, err := d.connect(ctx)
	if err != nil {
		return result{}, err
	}
	// A cancelled or timed-out row unblocks every read and write.
	stop := context.AfterFunc(ctx, func() { cc.Close(); sc.Close() })
	defer stop()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // echo server: each frame back as it came
		defer wg.Done()
		r := bufio.NewReaderSize(sc, 64<<10)
		buf := make([]byte, 4+size)
		for {
			f, err := readMsg(r, buf)
			if err == nil {
				_, err = sc.Write(f)
			}
			if err != nil {
				return
			}
		}
	}()
	m := newMeter(n, 1)
	tokens := make(chan struct{}, depth) // one a request the client may send
	for range depth {
		tokens <- struct{}{}
	}
	var werr error
	go func() { // the client's writer
		defer wg.Done()
		f := make([]byte, 4+size)
		binary.LittleEndian.PutUint32(f, uint32(size))
		for {
			select {
			case <-tokens:
			case <-ctx.Done():
				return
			}
			stamp(f[4:])
			if _, err := cc.Write(f); err != nil {
				if ctx.Err() == nil {
					werr = err
				}
				return
			}
		}
	}()
	r := bufio.NewReaderSize(cc, 64<<10)
	buf := make([]byte, 4+size)
	var rerr error
	for {
		f, err := readMsg(r, buf)
		if err != nil {
			rerr = err
			break
		}
		if !m.done(0, stamped(f[4:])) {
			break
		}
		tokens <- struct{}{}
	}
	cancel()
	wg.Wait()
	if rerr != nil || werr != nil {
		return result{}, fmt.Errorf("%d of %d round trips: %w", m.n.Load(), n.count, errors.Join(rerr, werr))
	}
	return m.result(), nil
}

func (d *tcpDoor) file(ctx context.Context, size int64) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second+time.Duration(size>>20)*100*time.Millisecond)
	defer cancel()
	cc, sc, err := d.connect(ctx)
	if err != nil {
		return 0, err
	}
	stop := context.AfterFunc(ctx, func() { cc.Close(); sc.Close() })
	defer stop()
	start := time.Now()
	sent := make(chan error, 1)
	go func() {
		f := make([]byte, 4+Chunk)
		for left := size; left > 0; {
			n := min(Chunk, left)
			binary.LittleEndian.PutUint32(f, uint32(n))
			if _, err := cc.Write(f[:4+n]); err != nil {
				sent <- err
				return
			}
			left -= n
		}
		sent <- nil
	}()
	r := bufio.NewReaderSize(sc, 256<<10)
	buf := make([]byte, 4+Chunk)
	var got int64
	for got < size {
		f, err := readMsg(r, buf)
		if err != nil {
			cancel()
			return 0, errors.Join(fmt.Errorf("%d of %d bytes arrived: %w", got, size, err), <-sent)
		}
		got += int64(len(f) - 4)
	}
	wall := time.Since(start)
	if err := <-sent; err != nil {
		return 0, err
	}
	return float64(size) / wall.Seconds(), nil
}
