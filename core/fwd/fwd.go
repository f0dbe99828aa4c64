package fwd

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
)

// Mode is a forwarding mode, named as in testpmd.
type Mode int

const (
	ModeIO       Mode = iota // forward untouched
	ModeMAC                  // set source MAC to the output port's, destination to Options.PeerMAC
	ModeMACSwap              // swap source and destination MAC
	ModeRxOnly               // receive and free
	Mode5TSwap               // swap MACs, IP addresses and TCP/UDP ports (checksums stay valid)
	ModeICMPEcho             // answer ICMP and ICMPv6 echo requests back out; drop and count anything else
	ModeCsum                 // verify IPv4 header and TCP/UDP/ICMP checksums, count bad ones, forward untouched
)

var modeNames = [...]string{"io", "mac", "macswap", "rxonly", "5tswap", "icmpecho", "csum"}

func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// ParseMode reads a mode name.
func ParseMode(s string) (Mode, error) {
	for i, n := range modeNames {
		if s == n {
			return Mode(i), nil
		}
	}
	return 0, fmt.Errorf("fwd: unknown mode %q: use one of %s", s, strings.Join(modeNames[:], ", "))
}

// FullPolicy says what happens to frames the output port refuses.
type FullPolicy int

const (
	FullDrop  FullPolicy = iota // free and count them (testpmd)
	FullRetry                   // keep them and offer them again first
)

// Options configures a Forwarder.
type Options struct {
	Mode     Mode
	In       port.Port
	InQueue  int
	Out      port.Port // ignored in rxonly mode
	OutQueue int
	Pool     *mbuf.Pool
	Burst    int // 1..256 (0 → 32)
	OnFull   FullPolicy
	// PeerMAC is the destination MAC written in mac mode.
	PeerMAC net.HardwareAddr
	// Cache is the poll loop's mbuf cache, used to free dropped frames;
	// nil makes one for this stage. Give the loop's stages and ports one
	// cache (afxdp.Port.UseCaches) so frames cycle through one LIFO stack
	// on that CPU instead of through the pool's shared ring.
	Cache *mbuf.Cache
}

// Forwarder is the stage.
type Forwarder struct {
	opts    Options
	cache   *mbuf.Cache
	burst   []mbuf.Handle
	pending []mbuf.Handle
	srcMAC  [6]byte
	peerMAC [6]byte

	rx, tx, dropped, short atomic.Uint64
	badIP, badL4, notEcho  atomic.Uint64
}

// New validates opts and builds a forwarder.
func New(opts Options) (*Forwarder, error) {
	if opts.In == nil || opts.Pool == nil || (opts.Out == nil && opts.Mode != ModeRxOnly) {
		return nil, errors.New("fwd: In, Out and Pool are required (Out may be nil only in rxonly mode)")
	}
	if opts.Burst == 0 {
		opts.Burst = 32
	}
	if opts.Burst < 1 || opts.Burst > 256 {
		return nil, fmt.Errorf("fwd: burst %d out of range: use 1..256", opts.Burst)
	}
	if q := opts.In.Info().Queues; opts.InQueue < 0 || opts.InQueue >= q {
		return nil, fmt.Errorf("fwd: input queue %d out of range: port %s has %d queues", opts.InQueue, opts.In.Info().Name, q)
	}
	cache := opts.Cache
	if cache == nil {
		cache = opts.Pool.NewCache()
	}
	f := &Forwarder{
		opts:    opts,
		cache:   cache,
		burst:   make([]mbuf.Handle, opts.Burst),
		pending: make([]mbuf.Handle, 0, opts.Burst),
	}
	if opts.Mode != ModeRxOnly {
		if q := opts.Out.Info().Queues; opts.OutQueue < 0 || opts.OutQueue >= q {
			return nil, fmt.Errorf("fwd: output queue %d out of range: port %s has %d queues", opts.OutQueue, opts.Out.Info().Name, q)
		}
		if mac := opts.Out.Info().MAC; len(mac) == 6 {
			f.srcMAC = [6]byte(mac)
		}
	}
	if opts.Mode == ModeMAC {
		if len(opts.PeerMAC) != 6 {
			return nil, errors.New("fwd: mac mode needs PeerMAC (the destination MAC to write), e.g. --peer-mac 02:00:00:00:00:02")
		}
		f.peerMAC = [6]byte(opts.PeerMAC)
	}
	return f, nil
}

// Name implements lcore.Stage.
func (f *Forwarder) Name() string { return "fwd-" + f.opts.Mode.String() }

// WakeFDs implements lcore.Waker: the input queue's descriptor, when its
// port has one.
func (f *Forwarder) WakeFDs(fds []int) []int {
	return append(fds, port.RxWaitFD(f.opts.In, f.opts.InQueue))
}

// Poll forwards at most one burst.
func (f *Forwarder) Poll(clock.Time) int {
	if len(f.pending) > 0 {
		n := f.opts.Out.TxBurst(f.opts.OutQueue, f.pending)
		f.tx.Add(uint64(n))
		f.pending = f.pending[:copy(f.pending, f.pending[n:])]
		if len(f.pending) > 0 {
			return n
		}
	}
	n := f.opts.In.RxBurst(f.opts.InQueue, f.burst)
	if n == 0 {
		if f.opts.Mode != ModeRxOnly {
			// Full bursts the output may hold go now (port.TxFlusher).
			port.FlushTx(f.opts.Out, f.opts.OutQueue)
		}
		return 0
	}
	f.rx.Add(uint64(n))
	bufs := f.burst[:n]
	switch f.opts.Mode {
	case ModeRxOnly:
		f.cache.Free(bufs)
		return n
	case ModeMAC:
		for _, h := range bufs {
			if d := f.opts.Pool.Data(h); len(d) >= 12 {
				copy(d[0:6], f.peerMAC[:])
				copy(d[6:12], f.srcMAC[:])
			}
		}
	case ModeMACSwap:
		for _, h := range bufs {
			if d := f.opts.Pool.Data(h); len(d) >= 12 {
				swap(d[0:6], d[6:12])
			}
		}
	case Mode5TSwap:
		for _, h := range bufs {
			swap5Tuple(f.opts.Pool.Data(h))
		}
	case ModeCsum:
		var badIP, badL4 uint64
		for _, h := range bufs {
			ipOK, l4OK := checksums(f.opts.Pool.Data(h))
			if !ipOK {
				badIP++
			}
			if !l4OK {
				badL4++
			}
		}
		if badIP+badL4 > 0 {
			f.badIP.Add(badIP)
			f.badL4.Add(badL4)
		}
	case ModeICMPEcho:
		// Replies are compacted to the front of the burst; the rest is
		// freed and counted.
		k := 0
		for i, h := range bufs {
			if echoReply(f.opts.Pool.Data(h)) {
				bufs[k], bufs[i] = h, bufs[k]
				k++
			}
		}
		if k < len(bufs) {
			f.notEcho.Add(uint64(len(bufs) - k))
			f.cache.Free(bufs[k:])
		}
		bufs = bufs[:k]
		if k == 0 {
			return n
		}
	}
	sent := f.opts.Out.TxBurst(f.opts.OutQueue, bufs)
	f.tx.Add(uint64(sent))
	if rest := bufs[sent:]; len(rest) > 0 {
		f.short.Add(1)
		if f.opts.OnFull == FullRetry {
			f.pending = append(f.pending, rest...)
		} else {
			f.dropped.Add(uint64(len(rest)))
			f.cache.Free(rest)
		}
	}
	return n
}

// Stop implements the lcore stop hook.
func (f *Forwarder) Stop(clock.Time) {
	if f.opts.Mode != ModeRxOnly {
		port.FlushTx(f.opts.Out, f.opts.OutQueue)
	}
	f.dropped.Add(uint64(len(f.pending)))
	f.cache.Free(f.pending)
	f.pending = f.pending[:0]
	f.cache.Flush()
}

// Stats are the forwarder's counters.
type Stats struct {
	Rx, Tx  uint64
	Dropped uint64 // refused by the output and freed (FullDrop), or still held at Stop
	Short   uint64 // bursts the output did not take whole
	// BadIPChecksum and BadL4Checksum count frames csum mode found with a
	// wrong IPv4 header checksum, or a wrong TCP, UDP or ICMP checksum.
	BadIPChecksum, BadL4Checksum uint64
	// NotEcho counts frames icmpecho mode dropped: not an echo request.
	NotEcho uint64
}

// Stats is safe to call from any goroutine.
func (f *Forwarder) Stats() Stats {
	return Stats{Rx: f.rx.Load(), Tx: f.tx.Load(), Dropped: f.dropped.Load(), Short: f.short.Load(),
		BadIPChecksum: f.badIP.Load(), BadL4Checksum: f.badL4.Load(), NotEcho: f.notEcho.Load()}
}
