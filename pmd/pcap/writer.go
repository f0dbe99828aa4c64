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
}

func newRecorder(snaplen int, c clock.Clock, epoch time.Time) recorder {
	if c == nil {
		c = clock.NewReal()
	}
	if epoch.IsZero() {
		epoch = time.Now()
	}
	return recorder{snaplen: snaplen, clock: c, epoch: epoch, openedAt: c.Now()}
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
	rec    recorder
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
	w := &Writer{
		pool:  pool,
		rec:   newRecorder(snaplen, opts.Clock, opts.Epoch),
		stats: portstat.New(1),
	}
	dest := opts.Dest
	if dest == nil {
		if opts.Path == "" {
			return nil, errors.New("pcap: WriterOptions.Path is empty (name the capture file to create, or set Dest)")
		}
		f, err := os.Create(opts.Path)
		if err != nil {
			return nil, fmt.Errorf("pcap: %w", err)
		}
		w.file, dest = f, f
	}
	w.buf = bufio.NewWriterSize(dest, writeBuffer)
	w.w = pcapgo.NewWriterNanos(w.buf)
	if err := w.w.WriteFileHeader(uint32(snaplen), opts.LinkType); err != nil {
		w.closeFile()
		return nil, fmt.Errorf("pcap: %s: writing the file header: %w", opts.Name, err)
	}
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
	ts := w.rec.stamp()
	var bytes uint64
	failed := 0
	for _, h := range bufs {
		data := w.pool.Data(h)
		bytes += uint64(len(data))
		if err := w.rec.write(w.w, ts, data); err != nil {
			failed++
			if w.err == nil {
				w.err = fmt.Errorf("pcap: %s: %w", w.info.Name, err)
			}
		}
	}
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
	err := w.err
	if ferr := w.buf.Flush(); err == nil && ferr != nil {
		err = fmt.Errorf("pcap: %s: %w", w.info.Name, ferr)
	}
	if cerr := w.closeFile(); err == nil && cerr != nil {
		err = fmt.Errorf("pcap: %s: %w", w.info.Name, cerr)
	}
	return err
}

func (w *Writer) closeFile() error {
	if w.file == nil {
		return nil
	}
	err := w.file.Close()
	w.file = nil
	return err
}
