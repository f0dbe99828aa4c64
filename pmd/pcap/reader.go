package pcap

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/gopacket/gopacket/layers"
	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/internal/units"
	"github.com/peregrine-net/peregrine/pmd/internal/portstat"
)

// Timing selects how fast a Reader releases packets.
type Timing int

const (
	// TimingFast releases packets as fast as RxBurst is called.
	TimingFast Timing = iota
	// TimingRecorded releases packets at the capture's own pace, its
	// gaps divided by ReaderOptions.Speed.
	TimingRecorded
	// TimingRate releases packets at ReaderOptions.Rate, whatever the
	// capture's timestamps say.
	TimingRate
)

// String returns "fast", "recorded" or "rate".
func (t Timing) String() string {
	switch t {
	case TimingFast:
		return "fast"
	case TimingRecorded:
		return "recorded"
	case TimingRate:
		return "rate"
	}
	return fmt.Sprintf("Timing(%d)", int(t))
}

// ParseTiming reads a replay timing as the pcap: spec's timing= and gen
// --timing take it: fast, original (or recorded: the capture's own
// gaps), speed=N (the capture's gaps divided by N, 0.001..1000) or rate
// (at a rate given beside it). speed is 1 unless the timing is speed=N.
func ParseTiming(s string) (t Timing, speed float64, err error) {
	switch s {
	case "fast":
		return TimingFast, 1, nil
	case "original", "recorded":
		return TimingRecorded, 1, nil
	case "rate":
		return TimingRate, 1, nil
	}
	if v, ok := strings.CutPrefix(s, "speed="); ok {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f >= MinSpeed && f <= MaxSpeed) {
			return 0, 0, fmt.Errorf("%q: the speed factor is a number from %g to %g (2: twice as fast as captured, 0.5: half)", s, MinSpeed, MaxSpeed)
		}
		return TimingRecorded, f, nil
	}
	return 0, 0, fmt.Errorf("%q: use fast, original (the capture's own timing), speed=N (its gaps divided by N) or rate", s)
}

// The speed factors ParseTiming takes: beyond them a replay is fast, or
// stalls for hours on a gap of seconds.
const (
	MinSpeed = 0.001
	MaxSpeed = 1000.0
)

// Forever as ReaderOptions.Loop replays the capture until the port closes.
const Forever = -1

// ReaderOptions configure NewReader.
type ReaderOptions struct {
	// Path is the capture file. Ignored when Source is set.
	Path string
	// Source, when set, is read instead of Path and is not closed by the
	// port. Loop other than 1 needs its Seek.
	Source io.ReadSeeker
	// Name is Info().Name. Default "pcap:" + Path.
	Name string
	// Timing selects fast (default), recorded or rate pacing.
	Timing Timing
	// Speed divides the capture's gaps under TimingRecorded (0 → 1).
	Speed float64
	// Rate paces TimingRate: frames per second, or bits per second of
	// the frames as sent.
	Rate units.Rate
	// Loop is the number of passes over the capture: 0 → 1, Forever
	// replays until Close.
	Loop int
	// Clock paces recorded timing and stamps Meta.RxTime. nil → a real
	// clock.
	Clock clock.Clock
	// Log receives the first read error of each pass. nil → slog.Default().
	Log *slog.Logger
}

// Reader is a receive-only port replaying a capture file. It implements
// port.Port.
type Reader struct {
	pool   *mbuf.Pool
	info   port.Info
	clock  clock.Clock
	log    *slog.Logger
	timing Timing
	speed  float64
	rate   units.Rate
	// sched is TimingRate's schedule: ns after the replay's start at
	// which the next packet read is due.
	sched float64
	// passesLeft counts passes still to start after the current one;
	// negative means forever.
	passesLeft int
	src        io.ReadSeeker
	file       *os.File // nil when the caller gave Source
	r          Source
	link       layers.LinkType
	conv       []byte // a record of another link type, as Ethernet (ToEthernet)
	cache      *mbuf.Cache
	room       int
	stats      *portstat.Counters
	closed     atomic.Bool
	stamps     *stampTable

	// What the replay could not deliver (Loss), for any goroutine.
	oversize  atomic.Uint64
	malformed atomic.Uint64
	largest   atomic.Int64
	damaged   atomic.Pointer[string]

	// The next packet, read but not yet delivered (recorded timing keeps it
	// until it is due, or the pool was empty). data aliases the pcapgo
	// reader's buffer, valid until the next read.
	pending bool
	data    []byte
	due     clock.Time
	stamp   int64 // its capture timestamp, ns since the Unix epoch

	eof          bool
	ended        atomic.Bool // eof, published for Ended
	passPackets  int         // packets read in the current pass
	firstStamp   int64       // capture time of the pass's first packet, ns
	passBase     clock.Time
	startAt      clock.Time // the first RxBurst: TimingRate's origin
	lastDue      clock.Time
	started      bool
	passErrorLog bool // logged this pass's read error already
}

var _ port.Port = (*Reader)(nil)

// NewReader opens a capture for replay. It reads the file header at once,
// so a missing or malformed file is an error here.
func NewReader(pool *mbuf.Pool, opts ReaderOptions) (*Reader, error) {
	if pool == nil {
		return nil, errors.New("pcap: NewReader: pool is nil (pass the pool received frames are copied into)")
	}
	if opts.Timing != TimingFast && opts.Timing != TimingRecorded && opts.Timing != TimingRate {
		return nil, fmt.Errorf("pcap: ReaderOptions.Timing %d is not valid (use TimingFast, TimingRecorded or TimingRate)", int(opts.Timing))
	}
	if opts.Speed == 0 {
		opts.Speed = 1
	}
	if !(opts.Speed >= MinSpeed && opts.Speed <= MaxSpeed) {
		return nil, fmt.Errorf("pcap: ReaderOptions.Speed %g is out of range (use %g..%g, or 0 for 1)", opts.Speed, MinSpeed, MaxSpeed)
	}
	if opts.Timing == TimingRate && !(opts.Rate.PPS > 0 || opts.Rate.Bits > 0) {
		return nil, errors.New("pcap: TimingRate needs ReaderOptions.Rate (frames or bits per second)")
	}
	if opts.Loop == 0 {
		opts.Loop = 1
	}
	if opts.Loop < Forever {
		return nil, fmt.Errorf("pcap: ReaderOptions.Loop %d is not valid (use a number of passes >= 1, or Forever)", opts.Loop)
	}
	if opts.Clock == nil {
		opts.Clock = clock.NewReal()
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.Name == "" {
		opts.Name = "pcap:" + opts.Path
	}
	r := &Reader{
		pool:   pool,
		clock:  opts.Clock,
		log:    opts.Log,
		timing: opts.Timing,
		speed:  opts.Speed,
		rate:   opts.Rate,
		src:    opts.Source,
		room:   pool.FrameSize() - pool.Headroom(),
		stats:  portstat.New(1),
	}
	if opts.Loop == Forever {
		r.passesLeft = -1
	} else {
		r.passesLeft = opts.Loop - 1
	}
	if r.src == nil {
		if opts.Path == "" {
			return nil, errors.New("pcap: ReaderOptions.Path is empty (name a capture file, or set Source)")
		}
		f, err := os.Open(opts.Path)
		if err != nil {
			return nil, fmt.Errorf("pcap: %w", err)
		}
		r.file, r.src = f, f
	}
	var err error
	if r.r, err = OpenSource(opts.Name, r.src); err != nil {
		r.closeFile()
		return nil, fmt.Errorf("pcap: %w", err)
	}
	r.link = r.r.LinkType()
	if err := CheckLinkType(r.link); err != nil {
		r.closeFile()
		return nil, fmt.Errorf("pcap: %s: %w", opts.Name, err)
	}
	var caps port.Capability = port.CapRxTimestamp
	if opts.Timing != TimingFast {
		caps |= port.CapPaced
	}
	r.info = port.Info{
		Name:   opts.Name,
		Driver: ReaderDriverName,
		Queues: 1,
		MTU:    r.room - 14, // an Ethernet frame filling a pool frame
		MAC:    net.HardwareAddr{0x02, 0x70, 0x63, 0x61, 0x70, 0x00},
		Caps:   caps,
	}
	r.cache = pool.NewCache()
	r.stamps = acquireStamps(pool)
	return r, nil
}

// Loss is what a replay could not deliver.
type Loss struct {
	// Oversize counts records longer than a frame's room (Room bytes),
	// skipped; Largest is the longest of them.
	Oversize uint64
	Largest  int
	Room     int
	// Malformed counts records too short for their link type's header
	// (a Linux cooked or raw IP capture), skipped.
	Malformed uint64
	// Damaged is the read error that ended a pass before the end of the
	// file ("" when none did).
	Damaged string
}

// Loss reports what the replay has skipped so far. Safe from any
// goroutine.
func (r *Reader) Loss() Loss {
	l := Loss{Oversize: r.oversize.Load(), Largest: int(r.largest.Load()), Room: r.room, Malformed: r.malformed.Load()}
	if d := r.damaged.Load(); d != nil {
		l.Damaged = *d
	}
	return l
}

// RxBurst copies up to len(bufs) packets from the capture into new frames.
// The caller owns bufs[:n]. It returns 0 when no packet is due yet
// (recorded timing), the pool is empty (RxNoBuf), or the replay is over.
func (r *Reader) RxBurst(queue int, bufs []mbuf.Handle) int {
	if queue != 0 || len(bufs) == 0 || r.eof || r.closed.Load() {
		return 0
	}
	st := r.stats.Queue(0)
	now := r.clock.Now()
	if !r.started {
		r.started = true
		r.passBase, r.startAt = now, now
	}
	n, dropped := 0, 0
	var bytes uint64
	for n < len(bufs) {
		if !r.pending && !r.readNext(st) {
			break
		}
		if r.timing != TimingFast && r.due > now {
			break
		}
		size := len(r.data)
		if size > r.room {
			dropped++
			if int64(size) > r.largest.Load() {
				r.largest.Store(int64(size))
			}
			r.pending = false
			continue
		}
		if r.cache.AllocBurst(bufs[n:n+1]) == 0 {
			st.RxNoBuf.Add(1)
			break
		}
		h := bufs[n]
		m := r.pool.Meta(h)
		m.DataLen = uint16(size)
		copy(r.pool.Data(h), r.data)
		if r.timing != TimingFast {
			m.RxTime = int64(r.due)
		} else {
			m.RxTime = int64(now)
		}
		r.stamps.set(h, m.RxTime, r.stamp)
		r.pending = false
		bytes += uint64(size)
		n++
	}
	if dropped > 0 {
		st.RxDropped.Add(uint64(dropped))
		r.oversize.Add(uint64(dropped))
	}
	st.AddRx(n, bytes)
	return n
}

// readNext reads the next record into the pending slot, rewinding for the
// next pass at the end of one. It returns false at the end of the replay.
func (r *Reader) readNext(st *portstat.Queue) bool {
	for {
		data, ci, err := r.r.ZeroCopyReadPacketData()
		if err == nil && r.link != layers.LinkTypeEthernet {
			conv, cerr := ToEthernet(r.link, data, r.conv)
			if cerr != nil {
				r.malformed.Add(1)
				st.RxDropped.Add(1)
				continue
			}
			data, r.conv = conv, conv
		}
		if err == nil {
			stamp := ci.Timestamp.UnixNano()
			r.stamp = stamp
			if r.passPackets == 0 {
				r.firstStamp = stamp
			}
			r.passPackets++
			r.data = data
			r.due = r.schedule(stamp, len(data))
			r.lastDue = max(r.lastDue, r.due)
			r.pending = true
			return true
		}
		if err != io.EOF {
			// A damaged record leaves the stream unsynchronised: end the
			// pass here rather than decode garbage.
			st.RxErrors.Add(1)
			if !r.passErrorLog {
				r.passErrorLog = true
				why := fmt.Sprintf("damaged after %d records: %v", r.passPackets, err)
				r.damaged.CompareAndSwap(nil, &why)
				r.log.Warn("pcap: damaged capture, ending this pass", "port", r.info.Name, "packets", r.passPackets, "err", err)
			}
		}
		if r.passPackets == 0 || r.passesLeft == 0 {
			// An empty pass would replay nothing forever.
			r.eof = true
			r.ended.Store(true)
			return false
		}
		if r.passesLeft > 0 {
			r.passesLeft--
		}
		if err := r.rewind(); err != nil {
			st.RxErrors.Add(1)
			r.log.Warn("pcap: cannot rewind capture for the next pass", "port", r.info.Name, "err", err)
			r.eof = true
			r.ended.Store(true)
			return false
		}
	}
}

// schedule returns when the packet just read, of size bytes and captured
// at stamp, is due: its capture time since the pass's first packet
// divided by the speed, after the pass's start (recorded), or the next
// slot of the rate's schedule, which runs on across passes (rate).
// Nothing reads the wall clock: the schedule is the port's clock's.
func (r *Reader) schedule(stamp int64, size int) clock.Time {
	switch r.timing {
	case TimingRate:
		due := r.startAt + clock.Time(r.sched)
		if r.rate.Bits > 0 {
			r.sched += float64(size) * 8 * 1e9 / r.rate.Bits
		} else {
			r.sched += 1e9 / r.rate.PPS
		}
		return due
	case TimingRecorded:
		gap := float64(max(stamp-r.firstStamp, 0)) / r.speed
		return r.passBase + clock.Time(gap)
	}
	return r.passBase
}

// rewind starts the next pass. It allocates a new pcapgo reader, once per
// pass rather than per packet.
func (r *Reader) rewind() error {
	if _, err := r.src.Seek(0, io.SeekStart); err != nil {
		return err
	}
	pr, err := OpenSource(r.info.Name, r.src)
	if err != nil {
		return err
	}
	r.r = pr
	r.passPackets = 0
	r.passBase = r.lastDue
	r.passErrorLog = false
	return nil
}

// Ended reports whether the replay is over: every pass read, or the
// capture damaged beyond reading. Safe from any goroutine.
func (r *Reader) Ended() bool { return r.ended.Load() }

// TxBurst refuses every packet: the port is receive-only. Refusals count as
// TxDropped.
func (r *Reader) TxBurst(queue int, bufs []mbuf.Handle) int {
	if queue == 0 && !r.closed.Load() {
		r.stats.Queue(0).AddTxDropped(len(bufs))
	}
	return 0
}

// Info describes the port.
func (r *Reader) Info() port.Info {
	info := r.info
	info.MAC = append(net.HardwareAddr(nil), r.info.MAC...)
	return info
}

// Stats returns a snapshot of the port's counters.
func (r *Reader) Stats() port.Stats { return r.stats.Snapshot() }

// Close closes the file (unless the caller gave Source) and returns the
// reader's cached frames to the pool. It is idempotent.
func (r *Reader) Close() error {
	if !r.closed.CompareAndSwap(false, true) {
		return nil
	}
	r.cache.Close()
	releaseStamps(r.pool)
	return r.closeFile()
}

func (r *Reader) closeFile() error {
	if r.file == nil {
		return nil
	}
	err := r.file.Close()
	r.file = nil
	return err
}
