package pcap

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
)

// MirrorOptions configure NewMirror.
type MirrorOptions struct {
	// Path is the capture file to create. Ignored when Dest is set.
	Path string
	// Dest, when set, receives the capture instead of Path; it is buffered
	// and flushed on Close but not closed.
	Dest io.Writer
	// Snaplen cuts each record. 0 → 65535.
	Snaplen int
	// Max, when positive, bounds the file's size in bytes: records that
	// would take it past Max are not written, and counted (Report.OverMax).
	Max int64
	// LinkType of the header. 0 → Ethernet.
	LinkType layers.LinkType
	// Clock stamps records. nil → a real clock.
	Clock clock.Clock
	// Epoch is the wall time the clock reading at open maps to. Zero →
	// time.Now() at open.
	Epoch time.Time
}

// Mirror wraps a port and writes every packet it receives or accepts for
// transmission to a capture, passing everything through unchanged. It
// implements port.Port.
//
// Each burst is encoded into a per-queue, per-direction staging buffer with
// no lock, then appended to the file under one mutex per burst, so queues
// may run concurrently as the inner port allows. Mirroring costs a copy of
// every packet; it is a debugging tap, not a fast path.
type Mirror struct {
	inner  port.Port
	pool   *mbuf.Pool
	rec    *recorder
	rx, tx []staging // per queue

	mu     sync.Mutex // guards buf and file writes
	buf    *bufio.Writer
	file   *os.File
	err    error // first write error
	errors atomic.Uint64
	closed atomic.Bool
}

var _ port.Port = (*Mirror)(nil)

// staging collects one burst's records before they reach the file.
type staging struct {
	bytes []byte
	ends  []int // ends[i] is where record i stops in bytes
	w     *pcapgo.Writer
}

func (s *staging) Write(p []byte) (int, error) {
	s.bytes = append(s.bytes, p...)
	return len(p), nil
}

func (s *staging) reset() {
	s.bytes = s.bytes[:0]
	s.ends = s.ends[:0]
}

// NewMirror wraps inner, whose packets live in pool, and writes its traffic
// to the capture opts names. Closing the Mirror closes inner.
func NewMirror(inner port.Port, pool *mbuf.Pool, opts MirrorOptions) (*Mirror, error) {
	if inner == nil {
		return nil, errors.New("pcap: NewMirror: inner port is nil (pass the port to mirror)")
	}
	if pool == nil {
		return nil, errors.New("pcap: NewMirror: pool is nil (pass the pool the inner port's packets live in)")
	}
	snaplen, err := checkSnaplen("MirrorOptions.Snaplen", opts.Snaplen)
	if err != nil {
		return nil, err
	}
	if opts.LinkType == layers.LinkTypeNull {
		opts.LinkType = layers.LinkTypeEthernet
	}
	if opts.Max > 0 && opts.Max < fileHeader {
		return nil, fmt.Errorf("pcap: MirrorOptions.Max %d is smaller than a capture's file header (%d bytes)", opts.Max, fileHeader)
	}
	file := opts.Path
	if opts.Dest != nil {
		file = ""
	}
	queues := inner.Info().Queues
	m := &Mirror{
		inner: inner,
		pool:  pool,
		rec:   newRecorder(pool, file, snaplen, opts.Max, opts.Clock, opts.Epoch),
		rx:    make([]staging, queues),
		tx:    make([]staging, queues),
	}
	for i := range queues {
		m.rx[i].w = pcapgo.NewWriterNanos(&m.rx[i])
		m.tx[i].w = pcapgo.NewWriterNanos(&m.tx[i])
	}
	dest := opts.Dest
	if dest == nil {
		if opts.Path == "" {
			releaseStamps(pool)
			return nil, errors.New("pcap: MirrorOptions.Path is empty (name the capture file to create, or set Dest)")
		}
		f, err := os.Create(opts.Path)
		if err != nil {
			releaseStamps(pool)
			return nil, fmt.Errorf("pcap: mirror: %w", err)
		}
		m.file, dest = f, f
	}
	m.buf = bufio.NewWriterSize(dest, writeBuffer)
	if err := pcapgo.NewWriterNanos(m.buf).WriteFileHeader(uint32(snaplen), opts.LinkType); err != nil {
		if m.file != nil {
			m.file.Close()
		}
		releaseStamps(pool)
		return nil, fmt.Errorf("pcap: mirror: writing the file header: %w", err)
	}
	m.rec.wrote(0, fileHeader)
	return m, nil
}

// RxBurst receives from the inner port and records what it got.
func (m *Mirror) RxBurst(queue int, bufs []mbuf.Handle) int {
	n := m.inner.RxBurst(queue, bufs)
	if n > 0 && uint(queue) < uint(len(m.rx)) && !m.closed.Load() {
		s := &m.rx[queue]
		m.stage(s, bufs[:n])
		m.commit(s, n)
	}
	return n
}

// TxBurst records bufs, hands them to the inner port, and keeps the records
// of the packets it accepted.
func (m *Mirror) TxBurst(queue int, bufs []mbuf.Handle) int {
	if len(bufs) == 0 || uint(queue) >= uint(len(m.tx)) || m.closed.Load() {
		return m.inner.TxBurst(queue, bufs)
	}
	// Recorded before the hand-over: afterwards the inner port owns them
	// and may already have freed or reused them.
	s := &m.tx[queue]
	m.stage(s, bufs)
	n := m.inner.TxBurst(queue, bufs)
	m.commit(s, n)
	return n
}

func (m *Mirror) stage(s *staging, bufs []mbuf.Handle) {
	s.reset()
	now := m.rec.stamp()
	for _, h := range bufs {
		// Writing to staging cannot fail.
		_ = m.rec.write(s.w, m.rec.stampOf(m.pool, h, now), m.pool.Data(h))
		s.ends = append(s.ends, len(s.bytes))
	}
}

// commit appends the first n staged records to the capture.
func (m *Mirror) commit(s *staging, n int) {
	if n == 0 {
		return
	}
	m.mu.Lock()
	k := n
	if m.rec.max > 0 {
		for k > 0 && m.rec.size+int64(s.ends[k-1]) > m.rec.max {
			k--
		}
		if k < n {
			m.rec.overMax.Add(uint64(n - k))
		}
	}
	var err error
	if k > 0 {
		if _, err = m.buf.Write(s.bytes[:s.ends[k-1]]); err != nil {
			if m.err == nil {
				m.err = fmt.Errorf("pcap: mirror of %s: %w", m.inner.Info().Name, err)
				m.rec.fail(m.err)
			}
		} else {
			m.rec.wrote(k, int64(s.ends[k-1]))
		}
	}
	m.mu.Unlock()
	if err != nil {
		m.errors.Add(1)
	}
}

// Flush writes buffered records to the file; any goroutine may call it.
func (m *Mirror) Flush() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.buf.Flush()
}

// UseCaches hands the caches of the loops driving queue's halves to the
// inner port when it takes them (afxdp, afpacket: app.CacheUser), so a
// mirrored port cycles its frames through the same caches as an unmirrored
// one; other ports ignore them.
func (m *Mirror) UseCaches(queue int, rx, tx *mbuf.Cache) error {
	if cu, ok := m.inner.(interface {
		UseCaches(queue int, rx, tx *mbuf.Cache) error
	}); ok {
		return cu.UseCaches(queue, rx, tx)
	}
	return nil
}

// Info returns the inner port's Info.
func (m *Mirror) Info() port.Info { return m.inner.Info() }

// TxFlush passes port.FlushTx on to the inner port.
func (m *Mirror) TxFlush(queue int) { port.FlushTx(m.inner, queue) }

// Stats returns the inner port's counters, with failed capture writes
// added to Errors.
func (m *Mirror) Stats() port.Stats {
	s := m.inner.Stats()
	s.Errors += m.errors.Load()
	return s
}

// Close closes the inner port, then flushes and closes the capture. It
// returns the first error of either; a second Close returns nil.
func (m *Mirror) Close() error {
	if !m.closed.CompareAndSwap(false, true) {
		return nil
	}
	ierr := m.inner.Close()
	m.mu.Lock()
	defer m.mu.Unlock()
	err := m.err
	if ferr := m.buf.Flush(); err == nil && ferr != nil {
		err = fmt.Errorf("pcap: mirror: %w", ferr)
	}
	if m.file != nil {
		if cerr := m.file.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("pcap: mirror: %w", cerr)
		}
		m.file = nil
	}
	releaseStamps(m.pool)
	if err != nil {
		m.rec.fail(err)
	}
	if ierr != nil {
		return ierr
	}
	return err
}

// Report says what the capture holds so far; with Err, after Close, the
// file is incomplete. Safe from any goroutine.
func (m *Mirror) Report() Report { return m.rec.report() }
