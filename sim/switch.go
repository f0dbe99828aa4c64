package sim

import (
	"encoding/binary"
	"net/netip"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
)

// SwitchStats count what a Switch did with the frames it took.
//
//	Received == Forwarded + Filtered + Unknown + Refused
type SwitchStats struct {
	Received  uint64 // frames taken from the ports
	Forwarded uint64 // frames an output port accepted
	Filtered  uint64 // frames Drop chose to lose
	Unknown   uint64 // no port has the destination MAC or IP (dropped)
	Refused   uint64 // the output port's ring was full (tail-dropped)
	Injected  uint64 // frames Inject sent (not counted above)
}

// Switch is an emulated N-port switch: an lcore stage that forwards each
// frame it takes from a port to the port whose station has the frame's
// destination MAC, or, failing that, its destination IPv4 address, and
// drops the rest (Unknown). It has no queues of its own: a frame the
// output port refuses is tail-dropped (Refused), as a switch with a full
// egress buffer does. Impairments live on the links between the stations
// and the switch (a fabric per port), not in the switch.
//
// The switch owns a frame from the RxBurst that takes it until an output
// port accepts it or it is dropped (freed to the pool at once).
type Switch struct {
	pool  *mbuf.Pool
	ports []port.Port
	macs  map[[6]byte]int
	ips   map[netip.Addr]int
	// Observe, when set, sees every frame the switch forwards, before it
	// leaves: from and to are port indexes. raw is valid during the call.
	Observe func(from, to int, raw []byte)
	// Drop, when set, sees every routed frame first and loses the ones it
	// returns true for (Filtered): selective loss (only ACKs, every NACK)
	// that a per-link profile cannot express. raw is valid during the call.
	Drop  func(from, to int, raw []byte) bool
	buf   []mbuf.Handle
	one   []mbuf.Handle
	stats SwitchStats
}

// NewSwitch makes a switch over ports; port i's station has MAC macs[i]
// and IP ips[i].
func NewSwitch(pool *mbuf.Pool, ports []port.Port, macs [][6]byte, ips []netip.Addr) *Switch {
	s := &Switch{pool: pool, ports: ports, macs: make(map[[6]byte]int), ips: make(map[netip.Addr]int),
		buf: make([]mbuf.Handle, 64), one: make([]mbuf.Handle, 1)}
	for i := range ports {
		s.macs[macs[i]] = i
		s.ips[ips[i]] = i
	}
	return s
}

// Name implements lcore.Stage.
func (s *Switch) Name() string { return "switch" }

// Stats returns the switch's counters.
func (s *Switch) Stats() SwitchStats { return s.stats }

// route returns the output port of a frame, or -1.
func (s *Switch) route(raw []byte) int {
	if len(raw) < 14 {
		return -1
	}
	if i, ok := s.macs[[6]byte(raw[:6])]; ok {
		return i
	}
	if len(raw) >= 34 && binary.BigEndian.Uint16(raw[12:]) == 0x0800 {
		if i, ok := s.ips[netip.AddrFrom4([4]byte(raw[30:34]))]; ok {
			return i
		}
	}
	return -1
}

// Poll takes one burst from every port and forwards it.
func (s *Switch) Poll(now clock.Time) int {
	work := 0
	for from, p := range s.ports {
		n := p.RxBurst(0, s.buf)
		work += n
		for _, h := range s.buf[:n] {
			s.stats.Received++
			raw := s.pool.Data(h)
			to := s.route(raw)
			if to < 0 {
				s.stats.Unknown++
				s.free(h)
				continue
			}
			if s.Drop != nil && s.Drop(from, to, raw) {
				s.stats.Filtered++
				s.free(h)
				continue
			}
			if s.Observe != nil {
				s.Observe(from, to, raw)
			}
			s.one[0] = h
			if s.ports[to].TxBurst(0, s.one) == 0 {
				s.stats.Refused++
				s.free(h)
				continue
			}
			s.stats.Forwarded++
		}
	}
	return work
}

func (s *Switch) free(h mbuf.Handle) {
	s.one[0] = h
	s.pool.Free(s.one)
}

// Inject sends raw out of port to, as if the switch had forwarded it. It
// reports false when the pool is empty or the port refuses it.
func (s *Switch) Inject(to int, raw []byte) bool {
	if s.pool.AllocBulk(s.one) != 1 {
		return false
	}
	h := s.one[0]
	copy(s.pool.Append(h, len(raw)), raw)
	if s.ports[to].TxBurst(0, s.one) == 0 {
		s.free(h)
		return false
	}
	s.stats.Injected++
	return true
}

// Stop frees every frame waiting in the switch's ports.
func (s *Switch) Stop() {
	for _, p := range s.ports {
		for {
			n := p.RxBurst(0, s.buf)
			if n == 0 {
				break
			}
			s.pool.Free(s.buf[:n])
		}
	}
}
