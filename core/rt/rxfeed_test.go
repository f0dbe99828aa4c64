package rt

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/core/wire"
)

// rxFeedBatch is how many frames one rxFeed holds prepared at most.
const rxFeedBatch = 4096

// rxFeed is an endpoint on a feeder port: RxBurst hands out frames the
// test prepared, TxBurst frees what the endpoint sends (its ACKs), so a
// test decides exactly which frames one Poll receives. (bench/perf has the
// same fixture for the receive-cost measurement, over the public API; this
// one is for tests that look inside the endpoint.)
type rxFeed struct {
	pool      *mbuf.Pool
	port      *feedPort
	e         *Endpoint
	clk       *clock.Virtual
	addrs     wire.Addrs
	hdr       wire.Header
	payload   []byte
	psn       uint32
	delivered uint64
	hs        []mbuf.Handle
}

func newRxFeed(burst, payload int, noUDPChecksum bool) (*rxFeed, error) {
	pool, err := mbuf.New(mbuf.Options{Name: "rt-rxfeed", Frames: 2*rxFeedBatch + 2048, CacheSize: 256})
	if err != nil {
		return nil, err
	}
	b := &rxFeed{pool: pool, clk: clock.NewVirtual(1_000_000), payload: make([]byte, payload), hs: make([]mbuf.Handle, rxFeedBatch)}
	b.port = &feedPort{pool: pool, mac: net.HardwareAddr{2, 0, 0, 0, 0, 1}}
	local, peer := netip.MustParseAddr("10.9.0.1"), netip.MustParseAddr("10.9.0.2")
	b.e, err = NewEndpoint(Options{Name: "rxfeed", Port: b.port, Pool: pool, Clock: b.clk, LocalIP: local, MaxConns: 4, Burst: burst, Seed: 1,
		NoUDPChecksum: noUDPChecksum, KeepAlive: -1, IdleTimeout: -1}) // its timers are the tests'

	if err != nil {
		return nil, errors.Join(err, pool.Close())
	}
	setDeliver(b.e, func(*Conn, *wire.Header, []byte) Verdict { b.delivered++; return Accept })
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
		return nil, errors.Join(fmt.Errorf("rt: rx feed: endpoint answered %v, not ConnAccept", acc.Type), b.close())
	}
	b.hdr = wire.Header{Version: wire.Version, DestCID: acc.Ext.SourceCID, Type: wire.TypePushUnsolicitedData,
		ReqEBSN: peerReq, DataEBSN: peerData, TxTime: 5}
	b.psn = acc.ReqEBSN
	return b, nil
}

func (b *rxFeed) inject(h *wire.Header, payload []byte) error {
	if b.pool.AllocBulk(b.hs[:1]) != 1 {
		return errors.New("rt: rx feed: pool empty")
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
func (b *rxFeed) fill(n int) error {
	for range n {
		b.hdr.PSN = b.psn
		b.psn++
		if err := b.inject(&b.hdr, b.payload); err != nil {
			return err
		}
	}
	return nil
}

func (b *rxFeed) poll() int {
	b.clk.Advance(100 * time.Nanosecond)
	return b.e.Poll(b.clk.Now())
}

// drain polls until every prepared frame was received.
func (b *rxFeed) drain() {
	for len(b.port.queue) > b.port.head {
		b.poll()
	}
	b.port.queue, b.port.head = b.port.queue[:0], 0
}

func (b *rxFeed) close() error {
	b.e.Stop(b.clk.Now())
	b.pool.Free(b.port.queue[b.port.head:])
	b.port.queue, b.port.head = nil, 0
	err := b.e.Close()
	return errors.Join(err, b.pool.Close())
}

// feedPort is a port whose RxBurst hands out a prepared queue of frames and
// whose TxBurst frees what it is given, like a device, and while record is
// set remembers the last header (the setup reads the ConnAccept; nothing
// else decodes what the endpoint sends).
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
