package fabric

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/pmd/mem"
)

// SwitchOptions configure NewSwitch.
type SwitchOptions struct {
	// Name labels the switch and its ports.
	Name string
	// IPs are the stations' addresses, one per port: a frame goes out of
	// the port whose station has its destination IP (IPv4 or IPv6).
	// len(IPs) is the port count (at least 2).
	IPs []netip.Addr
	// Rate is each egress port's line rate in bits per second (0: no
	// limit). A frame of n bytes occupies its output port for
	// (n+Overhead)*8/Rate seconds after the frames queued before it.
	Rate uint64
	// Overhead is added to every frame's length for the rate (default 24:
	// preamble, FCS and inter-frame gap).
	Overhead int
	// Delay is each port's propagation delay, added once a frame is
	// serialised.
	Delay time.Duration
	// QueueFrames bounds each egress queue (default 1024); a frame that
	// finds its output port's queue full is tail-dropped (QueueFull), as a
	// switch with a full egress buffer does — incast shows here.
	QueueFrames int
	// Ring is the size of each station's mem-pair rings (default 4096).
	Ring int
	// Ports, if set, are the switch's ends of links the caller made, one
	// per station (a fabric.Link's B side per node, say, so that each
	// station's link carries its own impairments): the switch makes no
	// mem pairs, Port returns nil, and the caller closes them.
	Ports []port.Port
	// MACs, if set, route by destination MAC first (MACs[i] is station
	// i's), then by destination IP.
	MACs [][6]byte
}

// SwitchPortStats count one port's frames.
//
//	Rx == forwarded to some egress queue + Unknown + Filtered + (QueueFull at the output port)
type SwitchPortStats struct {
	Rx        uint64 // frames the station sent into the switch
	Tx        uint64 // frames the switch delivered to the station
	Unknown   uint64 // received frames whose destination no port has (dropped)
	Filtered  uint64 // received frames Switch.Drop chose to lose
	Injected  uint64 // frames Switch.Inject sent to this station (not in Tx)
	QueueFull uint64 // frames for this port dropped because its egress queue was full
	Refused   uint64 // frames the station's ring refused at delivery (dropped)
	MaxQueue  uint64 // deepest this port's egress queue has been
}

type swEntry struct {
	h     mbuf.Handle
	ready clock.Time
}

type swPort struct {
	station port.Port // the station's end (the caller's)
	side    port.Port // the switch's end
	q       []swEntry // egress FIFO (ring)
	qh, qn  int
	free    clock.Time // when the output line is free
	frac    uint64     // carried fraction of a nanosecond, in units of 1/Rate
	stats   SwitchPortStats
}

// Switch is an N-port switch for the emulated fabric: every port is a
// station's endpoint (a mem pair, Port(i)), with its own egress queue and
// line rate, so that many stations sending to one (incast) queue and drop
// at its port, and one station sending to many (fan-out) is paced by its
// own ingress only as the stations' endpoints pace it. It forwards by
// destination IP address. It is an lcore stage: each Poll takes one burst
// from every station, queues each frame at its output port, and delivers
// every frame whose time has come. Nothing reads a clock: the only time is
// Poll's now.
//
// The switch owns a frame from the RxBurst that takes it until the
// station's port accepts it, or it is dropped and freed at once.
type Switch struct {
	name  string
	pool  *mbuf.Pool
	opts  SwitchOptions
	ports []swPort
	ips   map[netip.Addr]int
	macs  map[[6]byte]int
	// Observe, when set, sees every frame the switch routes, as it joins
	// its output queue: from and to are port indexes; raw is valid during
	// the call.
	Observe func(from, to int, raw []byte)
	// Drop, when set, sees every routed frame first and loses those it
	// returns true for (Filtered): selective loss (only ACKs, every NACK)
	// that a per-link profile cannot express. raw is valid during the call.
	Drop     func(from, to int, raw []byte) bool
	ownSides bool // the sides are our mem pairs (else the caller's links)
	buf      []mbuf.Handle
	one      []mbuf.Handle
	// tick is the serialisation time of one byte, as a fraction: 8e9/Rate ns.
	rate uint64
}

// NewSwitch makes a switch with one mem-pair port per station. The caller
// owns the station ports (Port(i)) and closes them; Close closes the
// switch's own ends.
func NewSwitch(pool *mbuf.Pool, opts SwitchOptions) (*Switch, error) {
	if pool == nil {
		return nil, badOptions("NewSwitch: pool is nil")
	}
	n := len(opts.IPs)
	if n < 2 {
		return nil, badOptions("SwitchOptions.IPs: a switch needs at least 2 ports (one address per station), got %d", n)
	}
	if opts.Name == "" {
		opts.Name = "switch"
	}
	if opts.Overhead == 0 {
		opts.Overhead = 24
	}
	if opts.QueueFrames == 0 {
		opts.QueueFrames = 1024
	}
	if opts.Ring == 0 {
		opts.Ring = DefaultLinkRing
	}
	if opts.QueueFrames < 1 || opts.Overhead < 0 || opts.Delay < 0 {
		return nil, badOptions("SwitchOptions: QueueFrames must be positive, Overhead and Delay not negative")
	}
	if opts.Ports != nil && len(opts.Ports) != n {
		return nil, badOptions("SwitchOptions.Ports: %d ports for %d stations (give one per entry of IPs)", len(opts.Ports), n)
	}
	if opts.MACs != nil && len(opts.MACs) != n {
		return nil, badOptions("SwitchOptions.MACs: %d MACs for %d stations (give one per entry of IPs)", len(opts.MACs), n)
	}
	s := &Switch{name: opts.Name, pool: pool, opts: opts, ports: make([]swPort, n), ips: make(map[netip.Addr]int, n),
		buf: make([]mbuf.Handle, 64), one: make([]mbuf.Handle, 1), rate: opts.Rate, ownSides: opts.Ports == nil}
	if opts.MACs != nil {
		s.macs = make(map[[6]byte]int, n)
		for i, m := range opts.MACs {
			s.macs[m] = i
		}
	}
	for i, ip := range opts.IPs {
		if !ip.IsValid() {
			return nil, errors.Join(badOptions("SwitchOptions.IPs[%d] is not an address", i), s.closeAll())
		}
		ip = ip.Unmap()
		if _, dup := s.ips[ip]; dup {
			return nil, errors.Join(badOptions("SwitchOptions.IPs[%d]: %v is given twice", i, ip), s.closeAll())
		}
		s.ips[ip] = i
		if opts.Ports != nil {
			s.ports[i] = swPort{side: opts.Ports[i], q: make([]swEntry, opts.QueueFrames)}
			continue
		}
		station, side, err := mem.NewPair(pool, mem.PairOptions{Name: fmt.Sprintf("%s-p%d", opts.Name, i), Size: opts.Ring})
		if err != nil {
			return nil, errors.Join(badOptions("SwitchOptions.Ring: %v", err), s.closeAll())
		}
		s.ports[i] = swPort{station: station, side: side, q: make([]swEntry, opts.QueueFrames)}
	}
	return s, nil
}

// Name implements lcore.Stage.
func (s *Switch) Name() string { return s.name }

// Ports returns the port count.
func (s *Switch) Ports() int { return len(s.ports) }

// Port returns station i's port: the endpoint of the station with IPs[i]
// transmits into it and receives from it (nil with SwitchOptions.Ports:
// the caller's links reach the stations).
func (s *Switch) Port(i int) port.Port { return s.ports[i].station }

// PortStats returns port i's counters (poll-loop goroutine).
func (s *Switch) PortStats(i int) SwitchPortStats { return s.ports[i].stats }

// Stats sums every port's counters (MaxQueue is the deepest of them).
func (s *Switch) Stats() SwitchPortStats {
	var t SwitchPortStats
	for i := range s.ports {
		p := &s.ports[i].stats
		t.Rx += p.Rx
		t.Tx += p.Tx
		t.Unknown += p.Unknown
		t.Filtered += p.Filtered
		t.Injected += p.Injected
		t.QueueFull += p.QueueFull
		t.Refused += p.Refused
		t.MaxQueue = max(t.MaxQueue, p.MaxQueue)
	}
	return t
}

// route returns the output port of a frame by destination MAC (with
// SwitchOptions.MACs), else by destination IP, or -1.
func (s *Switch) route(raw []byte) int {
	if len(raw) < 14 {
		return -1
	}
	if s.macs != nil {
		if i, ok := s.macs[[6]byte(raw[:6])]; ok {
			return i
		}
	}
	switch binary.BigEndian.Uint16(raw[12:]) {
	case 0x0800:
		if len(raw) >= 34 {
			if i, ok := s.ips[netip.AddrFrom4([4]byte(raw[30:34]))]; ok {
				return i
			}
		}
	case 0x86dd:
		if len(raw) >= 54 {
			if i, ok := s.ips[netip.AddrFrom16([16]byte(raw[38:54]))]; ok {
				return i
			}
		}
	}
	return -1
}

// Poll takes one burst from every station, queues each frame at its
// output port (after the frames queued there, at the port's rate), and
// delivers what is due.
func (s *Switch) Poll(now clock.Time) int {
	work := 0
	for from := range s.ports {
		n := s.ports[from].side.RxBurst(0, s.buf)
		work += n
		for _, h := range s.buf[:n] {
			s.ports[from].stats.Rx++
			raw := s.pool.Data(h)
			to := s.route(raw)
			if to < 0 {
				s.ports[from].stats.Unknown++
				s.free(h)
				continue
			}
			if s.Drop != nil && s.Drop(from, to, raw) {
				s.ports[from].stats.Filtered++
				s.free(h)
				continue
			}
			if s.Observe != nil {
				s.Observe(from, to, raw)
			}
			s.enqueue(&s.ports[to], h, len(raw), now)
		}
	}
	for i := range s.ports {
		work += s.deliver(&s.ports[i], now)
	}
	return work
}

func (s *Switch) enqueue(p *swPort, h mbuf.Handle, n int, now clock.Time) {
	if p.qn == len(p.q) {
		p.stats.QueueFull++
		s.free(h)
		return
	}
	start := max(p.free, now)
	if s.rate > 0 {
		// (n+Overhead)*8 bits at Rate bit/s, in ns, fractions carried.
		num := uint64(n+s.opts.Overhead)*8*uint64(time.Second) + p.frac
		p.free = start.Add(time.Duration(num / s.rate))
		p.frac = num % s.rate
	} else {
		p.free = start
	}
	p.q[(p.qh+p.qn)%len(p.q)] = swEntry{h: h, ready: p.free.Add(s.opts.Delay)}
	p.qn++
	p.stats.MaxQueue = max(p.stats.MaxQueue, uint64(p.qn))
}

func (s *Switch) deliver(p *swPort, now clock.Time) int {
	work := 0
	for p.qn > 0 {
		e := &p.q[p.qh]
		if e.ready > now {
			break
		}
		s.one[0] = e.h
		if p.side.TxBurst(0, s.one) == 0 {
			p.stats.Refused++
			s.free(e.h)
		} else {
			p.stats.Tx++
		}
		p.qh = (p.qh + 1) % len(p.q)
		p.qn--
		work++
	}
	return work
}

func (s *Switch) free(h mbuf.Handle) {
	s.one[0] = h
	s.pool.Free(s.one)
}

// Inject sends raw out of port to at once (past its queue), as if the
// switch had forwarded it: a replayed or forged frame. It reports false
// when the pool is empty or the port refuses it.
func (s *Switch) Inject(to int, raw []byte) bool {
	if s.pool.AllocBulk(s.one) != 1 {
		return false
	}
	h := s.one[0]
	copy(s.pool.Append(h, len(raw)), raw)
	if s.ports[to].side.TxBurst(0, s.one) == 0 {
		s.free(h)
		return false
	}
	s.ports[to].stats.Injected++
	return true
}

// NextDeadline returns when the next queued frame is due.
func (s *Switch) NextDeadline() (clock.Time, bool) {
	var t clock.Time
	ok := false
	for i := range s.ports {
		p := &s.ports[i]
		if p.qn > 0 && (!ok || p.q[p.qh].ready < t) {
			t, ok = p.q[p.qh].ready, true
		}
	}
	return t, ok
}

// Stop frees every frame queued in the switch or waiting at its ends.
func (s *Switch) Stop(clock.Time) {
	for i := range s.ports {
		p := &s.ports[i]
		for p.qn > 0 {
			s.free(p.q[p.qh].h)
			p.qh = (p.qh + 1) % len(p.q)
			p.qn--
		}
		if p.side == nil {
			continue
		}
		for {
			n := p.side.RxBurst(0, s.buf)
			if n == 0 {
				break
			}
			s.pool.Free(s.buf[:n])
		}
	}
}

// Close closes the switch's ends of the station pairs (after Stop); ports
// the caller gave (SwitchOptions.Ports) are the caller's to close.
func (s *Switch) Close() error {
	if !s.ownSides {
		return nil
	}
	var errs []error
	for i := range s.ports {
		if p := s.ports[i].side; p != nil {
			errs = append(errs, p.Close())
			s.ports[i].side = nil
		}
	}
	return errors.Join(errs...)
}

// closeAll closes both ends of every pair made so far (NewSwitch failed).
func (s *Switch) closeAll() error {
	err := s.Close()
	for i := range s.ports {
		if p := s.ports[i].station; p != nil {
			err = errors.Join(err, p.Close())
		}
	}
	return err
}
