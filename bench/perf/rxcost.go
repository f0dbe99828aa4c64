package perf

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/wire"
)

// RxCostOptions configures RxCost.
type RxCostOptions struct {
	// Packets is how many packets to time (required, positive).
	Packets int
	// NoUDPChecksum sends the packets, and the endpoint's ACKs, without a
	// UDP checksum (IPv4 allows it; rt.Options.NoUDPChecksum): the receive
	// path then reads only the headers, not the payload.
	NoUDPChecksum bool
	// HeadersOnly times no endpoint: the same frames are taken from the
	// port in bursts, the cache lines that hold their headers are read
	// (as the endpoint's first pass over a burst reads them) and the
	// frames are freed. It is the floor under any receive path that looks
	// at its packets, for comparison.
	HeadersOnly bool
}

// RxCost measures the receive path of one rt.Endpoint in nanoseconds per
// packet: taking a burst from the port, decoding and checksumming each
// frame, finding its connection by CID, applying the receiver rules to the
// window, calling the ULP's Deliver, and building and transmitting the
// coalesced ACKs (one per rt.DefaultAckEvery packets, at most one per
// connection and burst). The frames are in-order 64-byte-payload IPv4 data
// packets of one established connection with UDP checksums, prepared
// outside the timed region, 4096 at a time, so they are no longer in the
// first-level caches when the endpoint reads them. For the
// `peregrine bench transport-core` command.
func RxCost(o RxCostOptions) (ns float64, err error) {
	packets := o.Packets
	if packets <= 0 {
		return 0, fmt.Errorf("perf: RxCost: RxCostOptions.Packets %d must be positive", packets)
	}
	b, err := newRxBench(rt.DefaultBurst, 64, o.NoUDPChecksum)
	if err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, b.close()) }()
	var total time.Duration
	for done := 0; done < packets; {
		n := min(packets-done, rxBenchBatch)
		if err := b.fill(n); err != nil {
			return 0, err
		}
		start := time.Now()
		if o.HeadersOnly {
			b.drainHeaders()
		} else {
			b.drain()
		}
		total += time.Since(start)
		done += n
	}
	if o.HeadersOnly {
		return float64(total.Nanoseconds()) / float64(packets), nil
	}
	if b.delivered != uint64(packets) {
		return 0, fmt.Errorf("perf: RxCost: %d of %d packets delivered (stats %+v)", b.delivered, packets, b.e.Stats())
	}
	return float64(total.Nanoseconds()) / float64(packets), nil
}

const rxBenchBatch = 4096

// headerLines is how many cache lines of each frame drainHeaders reads: as
// many as the endpoint's first pass over a burst (rt's touchLines), since
// three hold every header and, for a 64-byte payload, the whole frame.
const headerLines = 3

// rxBench is an endpoint on a feeder port: RxBurst hands out frames the
// bench prepared, TxBurst frees what the endpoint sends (its ACKs).
type rxBench struct {
	pool      *mbuf.Pool
	port      *feedPort
	e         *rt.Endpoint
	clk       *clock.Virtual
	addrs     wire.Addrs
	hdr       wire.Header
	payload   []byte
	psn       uint32
	delivered uint64
	hs        []mbuf.Handle
	sink      byte // drainHeaders' loads, kept alive
}

func newRxBench(burst, payload int, noUDPChecksum bool) (*rxBench, error) {
	pool, err := mbuf.New(mbuf.Options{Name: "rt-rxbench", Frames: 2*rxBenchBatch + 2048, CacheSize: 256})
	if err != nil {
		return nil, err
	}
	b := &rxBench{pool: pool, clk: clock.NewVirtual(1_000_000), payload: make([]byte, payload), hs: make([]mbuf.Handle, rxBenchBatch)}
	b.port = &feedPort{pool: pool, mac: net.HardwareAddr{2, 0, 0, 0, 0, 1}}
	local, peer := netip.MustParseAddr("10.9.0.1"), netip.MustParseAddr("10.9.0.2")
	b.e, err = rt.NewEndpoint(rt.Options{Name: "rxbench", Port: b.port, Pool: pool, Clock: b.clk, LocalIP: local, MaxConns: 4, Burst: burst, Seed: 1,
		NoUDPChecksum: noUDPChecksum})
	if err != nil {
		return nil, errors.Join(err, pool.Close())
	}
	b.e.SetULP(b)
	b.addrs = wire.Addrs{SrcMAC: [6]byte{2, 0, 0, 0, 0, 2}, DstMAC: [6]byte(b.port.mac), SrcIP: peer, DstIP: local, NoUDPChecksum: noUDPChecksum}

	// Open a connection the way a peer would: ConnOpen in, ConnAccept out.
	const peerCID, peerReq, peerData = 0x77, 1000, 2000
	open := wire.Header{Version: wire.Version, Type: wire.TypeConnOpen, ReqEBSN: peerReq, DataEBSN: peerData, TxTime: 1,
		Ext: wire.Ext{Present: wire.ExtSourceCID, SourceCID: peerCID}}
	if err := b.inject(&open, nil); err != nil {
		return nil, errors.Join(err, b.close())
	}
	b.port.record = true
	b.poll()
	b.port.record = false
	acc := b.port.last
	if acc.Type != wire.TypeConnAccept {
		return nil, errors.Join(fmt.Errorf("perf: rx bench: endpoint answered %v, not ConnAccept", acc.Type), b.close())
	}
	b.hdr = wire.Header{Version: wire.Version, DestCID: acc.Ext.SourceCID, Type: wire.TypePushUnsolicitedData,
		ReqEBSN: peerReq, DataEBSN: peerData, TxTime: 5}
	b.psn = acc.ReqEBSN
	return b, nil
}

// Deliver, Acked and Event make rxBench the endpoint's ULP: it takes and
// counts every packet.
func (b *rxBench) Deliver(*rt.Conn, *wire.Header, []byte) rt.Verdict { b.delivered++; return rt.Accept }
func (b *rxBench) Acked(*rt.Conn, wire.Window, uint32, uint64)       {}
func (b *rxBench) Event(rt.Event)                                    {}

func (b *rxBench) inject(h *wire.Header, payload []byte) error {
	if b.pool.AllocBulk(b.hs[:1]) != 1 {
		return errors.New("perf: rx bench: pool empty")
	}
	f := b.hs[0]
	n, err := wire.EncodeFrame(b.pool.Frame(f)[b.pool.Headroom():], &b.addrs, h, payload)
	if err != nil {
		b.pool.Free(b.hs[:1])
		return err
	}
	b.pool.SetLen(f, n)
	b.port.queue = append(b.port.queue, f)
	return nil
}

// fill prepares n in-order data frames.
func (b *rxBench) fill(n int) error {
	for range n {
		b.hdr.PSN = b.psn
		b.psn++
		if err := b.inject(&b.hdr, b.payload); err != nil {
			return err
		}
	}
	return nil
}

func (b *rxBench) poll() int {
	b.clk.Advance(100 * time.Nanosecond)
	return b.e.Poll(b.clk.Now())
}

// drain polls until every prepared frame was received.
func (b *rxBench) drain() {
	for len(b.port.queue) > b.port.head {
		b.poll()
	}
	b.port.queue, b.port.head = b.port.queue[:0], 0
}

// drainHeaders takes every prepared frame from the port in bursts, reads
// the cache lines that hold its headers and frees it.
func (b *rxBench) drainHeaders() {
	burst := b.hs[:rt.DefaultBurst]
	for {
		n := b.port.RxBurst(0, burst)
		if n == 0 {
			break
		}
		var x byte
		for _, h := range burst[:n] {
			d := b.pool.Data(h)
			for i := 0; i < min(len(d), headerLines*64); i += 64 {
				x ^= d[i]
			}
		}
		b.sink ^= x
		b.pool.Free(burst[:n])
	}
	b.port.queue, b.port.head = b.port.queue[:0], 0
}

func (b *rxBench) close() error {
	b.e.Stop(b.clk.Now())
	b.pool.Free(b.port.queue[b.port.head:])
	b.port.queue, b.port.head = nil, 0
	err := b.e.Close()
	return errors.Join(err, b.pool.Close())
}

// feedPort is a port whose RxBurst hands out a prepared queue of frames and
// whose TxBurst frees what it is given, like a device, and while record is
// set remembers the last header (the bench's setup reads the ConnAccept;
// the measured loop does not decode what the endpoint sends).
type feedPort struct {
	pool   *mbuf.Pool
	mac    net.HardwareAddr
	queue  []mbuf.Handle
	head   int
	record bool
	last   wire.Header
	sent   uint64
}

func (p *feedPort) RxBurst(_ int, bufs []mbuf.Handle) int {
	n := copy(bufs, p.queue[p.head:])
	p.head += n
	return n
}

func (p *feedPort) TxBurst(_ int, bufs []mbuf.Handle) int {
	if p.record && len(bufs) > 0 {
		var f wire.Frame
		if f.Decode(p.pool.Data(bufs[len(bufs)-1])) == nil {
			p.last = f.Header
		}
	}
	p.sent += uint64(len(bufs))
	p.pool.Free(bufs)
	return len(bufs)
}

func (p *feedPort) Info() port.Info {
	return port.Info{Name: "feed", Driver: "feed", Queues: 1, MTU: 9000, MAC: p.mac}
}
func (p *feedPort) Stats() port.Stats { return port.Stats{} }
func (p *feedPort) Close() error      { return nil }
