package fabric

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
)

// Test frames: Ethernet / IPv4 / UDP, the sequence number in the first four
// payload bytes and a pattern after it. The UDP source port names the flow.
const (
	offUDP   = ethHeaderLen + 20
	offSeq   = offUDP + 8
	minFrame = offSeq + 4
)

func newPool(t testing.TB, frames int) *mbuf.Pool {
	t.Helper()
	pool, err := mbuf.New(mbuf.Options{Name: t.Name(), Frames: frames})
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, pool.CheckLeaks())
		require.NoError(t, pool.Close())
	})
	return pool
}

// writeFrame fills b (len(b) >= minFrame) with a test frame.
func writeFrame(b []byte, seq uint32, flow uint16) {
	copy(b[0:6], []byte{0x02, 0, 0, 0, 0, 2})
	copy(b[6:12], []byte{0x02, 0, 0, 0, 0, 1})
	binary.BigEndian.PutUint16(b[12:], etherTypeIPv4)
	ip := b[ethHeaderLen:]
	ip[0], ip[1] = 0x45, 0
	binary.BigEndian.PutUint16(ip[2:], uint16(len(b)-ethHeaderLen))
	binary.BigEndian.PutUint32(ip[4:], 0)
	ip[8], ip[9] = 64, protoUDP
	binary.BigEndian.PutUint16(ip[10:], 0)
	copy(ip[12:16], []byte{10, 0, 0, 1})
	copy(ip[16:20], []byte{10, 0, 0, 2})
	udp := b[offUDP:]
	binary.BigEndian.PutUint16(udp[0:], flow)
	binary.BigEndian.PutUint16(udp[2:], 4791)
	binary.BigEndian.PutUint16(udp[4:], uint16(len(b)-offUDP))
	binary.BigEndian.PutUint16(udp[6:], 0)
	binary.BigEndian.PutUint32(b[offSeq:], seq)
	for i := offSeq + 4; i < len(b); i++ {
		b[i] = byte(seq) + byte(i)
	}
}

func frameSeq(b []byte) uint32  { return binary.BigEndian.Uint32(b[offSeq:]) }
func frameFlow(b []byte) uint16 { return binary.BigEndian.Uint16(b[offUDP:]) }
func expectedFrame(seq uint32, flow uint16, size int) []byte {
	b := make([]byte, size)
	writeFrame(b, seq, flow)
	return b
}

// arrival is one frame as a receiver saw it.
type arrival struct {
	seq  uint32
	flow uint16
	at   clock.Time // the virtual time of the Poll that delivered it
	size int
	sum  uint64 // FNV-1a of the bytes
}

// sim drives a Link on a virtual clock: it sends frames at chosen times,
// polls the fabric at every release time in between, and records what
// comes out of each end.
type sim struct {
	t        testing.TB
	pool     *mbuf.Pool
	a, b     port.Port
	f        *Fabric
	now      clock.Time
	onFrame  func(a arrival, data []byte) // sees every frame received
	atB, atA []arrival                    // frames received at b (sent from a) and at a
	buf      []mbuf.Handle
}

func newSim(t testing.TB, pool *mbuf.Pool, opts Options) *sim {
	t.Helper()
	a, b, f, err := Link(pool, opts)
	require.NoError(t, err)
	s := &sim{t: t, pool: pool, a: a, b: b, f: f, buf: make([]mbuf.Handle, 64)}
	t.Cleanup(func() {
		require.NoError(t, f.Close())
		require.NoError(t, a.Close())
		require.NoError(t, b.Close())
	})
	return s
}

// advance polls the fabric at every event up to and including to, then
// moves the clock to to.
func (s *sim) advance(to clock.Time) {
	for {
		t, ok := s.f.NextDeadline()
		if !ok || t > to {
			break
		}
		s.pollAt(max(t, s.now))
	}
	s.now = max(s.now, to)
}

// pollAt polls until nothing moves at now, draining both ends.
func (s *sim) pollAt(now clock.Time) {
	s.now = now
	for {
		work := s.f.Poll(now)
		s.drain()
		if work == 0 {
			return
		}
	}
}

func (s *sim) drain() {
	s.atB = s.drainPort(s.b, s.atB)
	s.atA = s.drainPort(s.a, s.atA)
}

func (s *sim) drainPort(p port.Port, into []arrival) []arrival {
	for {
		n := p.RxBurst(0, s.buf)
		if n == 0 {
			return into
		}
		for _, h := range s.buf[:n] {
			d := s.pool.Data(h)
			a := arrival{at: s.now, size: len(d), sum: fnv64(d)}
			if rx := s.pool.Meta(h).RxTime; rx != int64(s.now) {
				s.t.Fatalf("RxTime %d, want the delivery time %d", rx, s.now)
			}
			if len(d) >= minFrame {
				a.seq, a.flow = frameSeq(d), frameFlow(d)
			}
			if s.onFrame != nil {
				s.onFrame(a, d)
			}
			into = append(into, a)
		}
		s.pool.Free(s.buf[:n])
	}
}

// fnv64 is FNV-1a, without hash/fnv's allocation.
func fnv64(b []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range b {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

// sendBurst transmits count frames from p at time at, numbered from seq.
func (s *sim) sendBurst(p port.Port, at clock.Time, seq uint32, count int, flow uint16, size int) {
	s.advance(at)
	hs := s.buf[:count]
	if s.pool.AllocBulk(hs) != count {
		s.t.Fatalf("pool exhausted")
	}
	for i, h := range hs {
		writeFrame(s.pool.Append(h, size), seq+uint32(i), flow)
	}
	if p.TxBurst(0, hs) != count {
		s.t.Fatalf("link ring full")
	}
	s.pollAt(at)
}

// send transmits one frame from p at time at.
func (s *sim) send(p port.Port, at clock.Time, seq uint32, flow uint16, size int) {
	s.sendBurst(p, at, seq, 1, flow, size)
}

// finish runs the clock until the fabric holds nothing.
func (s *sim) finish() {
	for {
		t, ok := s.f.NextDeadline()
		if !ok {
			return
		}
		s.pollAt(max(t, s.now))
	}
}

// requireBalanced checks the conservation law of DirStats.
func requireBalanced(t testing.TB, d DirStats) {
	t.Helper()
	require.Equal(t, d.Received+d.Duplicated,
		d.Sent+d.LossRandom+d.LossBurst+d.QueueFull+d.LimitFull+d.TTLExpired+d.LinkDown+d.LinkCut+d.Flushed+d.PathQueueFull+d.PathLossDrops+d.PathDownDrops+d.Held, "frames unaccounted for: %+v", d)
	var paths uint64
	for _, n := range d.Paths {
		paths += n
	}
	require.Equal(t, d.Sent+d.LinkCut+d.Held+d.Flushed, paths, "every frame past the queues took one path")
	var pathDrops uint64
	for i, ps := range d.PathDetail {
		require.Equal(t, d.Paths[i], ps.Frames)
		pathDrops += ps.Drops
	}
	require.Equal(t, d.PathQueueFull+d.PathLossDrops+d.PathDownDrops, pathDrops, "every path drop is one path's")
}

func ratio(n, of int) float64 { return float64(n) / float64(of) }
