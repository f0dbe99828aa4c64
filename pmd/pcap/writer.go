package pcap

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync/atomic"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/pmd/internal/portstat"
)

// Defaults of WriterOptions.
const (
	DefaultSnaplen = 65535
	MaxSnaplen     = 262144 // libpcap's MAXIMUM_SNAPLEN
	// writeBuffer is the bufio size under a file writer: large enough that
	// a burst of full frames costs about one write syscall.
	writeBuffer = 256 << 10
)

// WriterOptions configure NewWriter.
type WriterOptions struct {
	// Path is the capture file to create (truncated if it exists). Ignored
	// when Dest is set.
	Path string
	// Dest, when set, receives the capture instead of Path. The writer
	// buffers it and flushes on Close, but does not close it.
	Dest io.Writer
	// Name is Info().Name. Default "pcap-out:" + Path.
	Name string
	// Snaplen cuts each record to this many bytes. 0 → 65535.
	Snaplen int
	// Max, when positive, bounds the file's size in bytes: records that
	// would take it past Max are not written, and counted
	// (Report.OverMax).
	Max int64
	// LinkType is written in the file header. 0 (LinkTypeNull) → Ethernet;
	// BSD loopback captures are not something a port writes.
	LinkType layers.LinkType
	// Clock stamps records. nil → a real clock.
	Clock clock.Clock
	// Epoch is the wall time the clock reading at open is mapped to. Zero →
	// time.Now() at open. Set it to get reproducible captures from a
	// virtual clock.
	Epoch time.Time
}

// recorder encodes records into a capture; Writer and Mirror share it.
type recorder struct {
	snaplen  int
	clock    clock.Clock
	epoch    time.Time
	openedAt clock.Time
	stamps   *stampTable
	file     string
	max      int64
	size     int64 // bytes in the file so far; the writing goroutine's (Mirror: under its mutex)

	// Report's counters, for any goroutine.
	frames  atomic.Uint64
	bytes   atomic.Int64
	overMax atomic.Uint64
	err     atomic.Pointer[error]
}

// recordHeader is the size of a pcap record header.
const recordHeader = 16

func newRecorder(pool *mbuf.Pool, file string, snaplen int, max int64, c clock.Clock, epoch time.Time) *recorder {
	if c == nil {
		c = clock.NewReal()
	}
	if epoch.IsZero() {
		epoch = time.Now()
	}
	return &recorder{snaplen: snaplen, clock: c, epoch: epoch, openedAt: c.Now(), stamps: acquireStamps(pool), file: file, max: max}
}

// fileHeader is the size of a pcap file header, counted in the file's
// size.
const fileHeader = 24

// wrote notes a file header or n records of size bytes written.
func (rc *recorder) wrote(n int, size int64) {
	rc.size += size
	rc.bytes.Store(rc.size)
	rc.frames.Add(uint64(n))
}

// fits reports whether a record of capLen bytes fits under Max.
func (rc *recorder) fits(capLen int) bool {
	return rc.max <= 0 || rc.size+recordHeader+int64(capLen) <= rc.max
}

// fail keeps the first write error.
func (rc *recorder) fail(err error) {
	rc.err.CompareAndSwap(nil, &err)
}

// Report is what a capture written by a Writer or a Mirror holds.
type Report struct {
	// File is the capture's path ("" when written to a Dest).
	File string
	// Frames is the records written, Bytes the file's size (before the
	// last flush, as buffered).
	Frames uint64
	Bytes  int64
	// OverMax counts records not written because the file reached Max.
	OverMax uint64
	Max     int64
	// Err is the first write, flush or close error (the file is then
	// incomplete).
	Err error
}

func (rc *recorder) report() Report {
	r := Report{File: rc.file, Frames: rc.frames.Load(), Bytes: rc.bytes.Load(), OverMax: rc.overMax.Load(), Max: rc.max}
	if e := rc.err.Load(); e != nil {
		r.Err = *e
	}
	return r
}

// stampOf is h's record timestamp: the capture time it was read with, when
// a Reader on the same pool filled it (pcap→pcap keeps the input's
// timestamps), else now.
func (rc *recorder) stampOf(pool *mbuf.Pool, h mbuf.Handle, now time.Time) time.Time {
	if w := rc.stamps.take(h, pool.Meta(h).RxTime); w != 0 {
		return time.Unix(0, w)
	}
	return now
}

// stamp returns the record timestamp for the current clock reading.
func (rc *recorder) stamp() time.Time {
	return rc.epoch.Add(rc.clock.Now().Sub(rc.openedAt))
}

// write encodes one packet; it does not allocate.
func (rc *recorder) write(w *pcapgo.Writer, ts time.Time, data []byte) error {
	capLen := min(len(data), rc.snaplen)
	ci := gopacket.CaptureInfo{Timestamp: ts, CaptureLength: capLen, Length: len(data)}
	return w.WritePacket(ci, data[:capLen])
}

func checkSnaplen(field string, snaplen int) (int, error) {
	if snaplen == 0 {
		return DefaultSnaplen, nil
	}
	if snaplen < 1 || snaplen > MaxSnaplen {
		return 0, fmt.Errorf("pcap: %s %d is out of range (use 1..%d, or 0 for %d)", field, snaplen, MaxSnaplen, DefaultSnaplen)
	}
	return snaplen, nil
}

// Writer is a transmit-only port writing a capture file. It implements
// port.Port.
type Writer struct {
	pool   *mbuf.Pool
	info   port.Info
	rec    *recorder
	file   *os.File // nil when the caller gave Dest
	buf    *bufio.Writer
	w      *pcapgo.Writer
	cache  *mbuf.Cache
	stats  *portstat.Counters
	closed atomic.Bool
	err    error // first write error, returned by Close
}

var _ port.Port = (*Writer)(nil)

// NewWriter creates the capture and writes its header.
func NewWriter(pool *mbuf.Pool, opts WriterOptions) (*Writer, error) {
	if pool == nil {
		return nil, errors.New("pcap: NewWriter: pool is nil (pass the pool transmitted frames are freed to)")
	}
	snaplen, err := checkSnaplen("WriterOptions.Snaplen", opts.Snaplen)
	if err != nil {
		return nil, err
	}
	if opts.LinkType == layers.LinkTypeNull {
		opts.LinkType = layers.LinkTypeEthernet
	}
	if opts.Name == "" {
		opts.Name = "pcap-out:" + opts.Path
	}
	dest := opts.Dest
	if dest == nil && opts.Path == "" {
		return nil, errors.New("pcap: WriterOptions.Path is empty (name the capture file to create, or set Dest)")
	}
	if opts.Max > 0 && opts.Max < fileHeader {
		return nil, fmt.Errorf("pcap: WriterOptions.Max %d is smaller than a capture's file header (%d bytes)", opts.Max, fileHeader)
	}
	file := opts.Path
	if opts.Dest != nil {
		file = ""
	}
	w := &Writer{
		pool:  pool,
		rec:   newRecorder(pool, file, snaplen, opts.Max, opts.Clock, opts.Epoch),
		stats: portstat.New(1),
	}
	if dest == nil {
		f, err := os.Create(opts.Path)
		if err != nil {
			releaseStamps(pool)
			return nil, fmt.Errorf("pcap: %w", err)
		}
		w.file, dest = f, f
	}
	w.buf = bufio.NewWriterSize(dest, writeBuffer)
	w.w = pcapgo.NewWriterNanos(w.buf)
	if err := w.w.WriteFileHeader(uint32(snaplen), opts.LinkType); err != nil {
		w.closeFile()
		releaseStamps(pool)
		return nil, fmt.Errorf("pcap: %s: writing the file header: %w", opts.Name, err)
	}
	w.rec.wrote(0, fileHeader)
	w.info = port.Info{
		Name:   opts.Name,
		Driver: WriterDriverName,
		Queues: 1,
		MTU:    pool.FrameSize() - pool.Headroom() - 14,
		MAC:    net.HardwareAddr{0x02, 0x70, 0x63, 0x61, 0x70, 0x01},
	}
	w.cache = pool.NewCache()
	return w, nil
}

// RxBurst returns 0: the port is transmit-only.
func (w *Writer) RxBurst(int, []mbuf.Handle) int { return 0 }

// TxBurst writes every packet of bufs to the capture and frees it; it
// returns len(bufs). A write error is counted in Errors per packet.
func (w *Writer) TxBurst(queue int, bufs []mbuf.Handle) int {
	if queue != 0 || len(bufs) == 0 || w.closed.Load() {
		return 0
	}
	now := w.rec.stamp()
	var bytes uint64
	failed, written := 0, 0
	var size int64
	for _, h := range bufs {
		data := w.pool.Data(h)
		bytes += uint64(len(data))
		capLen := min(len(data), w.rec.snaplen)
		if !w.rec.fits(capLen + int(size)) {
			w.rec.overMax.Add(1)
			continue
		}
		if err := w.rec.write(w.w, w.rec.stampOf(w.pool, h, now), data); err != nil {
			failed++
			if w.err == nil {
				w.err = fmt.Errorf("pcap: %s: %w", w.info.Name, err)
				w.rec.fail(w.err)
			}
			continue
		}
		written++
		size += recordHeader + int64(capLen)
	}
	w.rec.wrote(written, size)
	w.cache.Free(bufs)
	st := w.stats.Queue(0)
	if failed > 0 {
		st.TxErrors.Add(uint64(failed))
	}
	st.AddTx(len(bufs), bytes)
	return len(bufs)
}

// Flush writes buffered records to the file. Call it from the goroutine
// that drives TxBurst.
func (w *Writer) Flush() error {
	if w.closed.Load() {
		return nil
	}
	return w.buf.Flush()
}

// Info describes the port.
func (w *Writer) Info() port.Info {
	info := w.info
	info.MAC = append(net.HardwareAddr(nil), w.info.MAC...)
	return info
}

// Stats returns a snapshot of the port's counters.
func (w *Writer) Stats() port.Stats { return w.stats.Snapshot() }

// Close flushes the capture, closes the file (unless the caller gave Dest)
// and returns cached frames to the pool. It returns the first write, flush
// or close error; a second Close returns nil.
func (w *Writer) Close() error {
	if !w.closed.CompareAndSwap(false, true) {
		return nil
	}
	w.cache.Close()
	releaseStamps(w.pool)
	err := w.err
	if ferr := w.buf.Flush(); err == nil && ferr != nil {
		err = fmt.Errorf("pcap: %s: %w", w.info.Name, ferr)
	}
	if cerr := w.closeFile(); err == nil && cerr != nil {
		err = fmt.Errorf("pcap: %s: %w", w.info.Name, cerr)
	}
	if err != nil {
		w.rec.fail(err)
	}
	return err
}

// Report says what the capture holds so far; with Err, after Close, the
// file is incomplete. Safe from any goroutine.
func (w *Writer) Report() Report { return w.rec.report() }

func (w *Writer) closeFile() error {
	if w.file == nil {
		return nil
	}
	err := w.file.Close()
	w.file = nil
	return err
}
