package wire_test

import (
	"fmt"
	"testing"

	"github.com/peregrine-net/peregrine/core/wire"
)

// The codec works one packet at a time, so the benchmarks vary what costs
// time per packet — payload size (the UDP checksum reads all of it) and IP
// version — rather than a burst size.

type benchCase struct {
	name  string
	addrs wire.Addrs
	size  int
}

func benchCases() []benchCase {
	var cases []benchCase
	for _, size := range []int{64, 512, 1400} {
		a4 := addrs4()
		cases = append(cases, benchCase{fmt.Sprintf("ipv4/payload=%d", size), a4, size})
		a4.NoUDPChecksum = true
		cases = append(cases, benchCase{fmt.Sprintf("ipv4-nocsum/payload=%d", size), a4, size})
		cases = append(cases, benchCase{fmt.Sprintf("ipv6/payload=%d", size), addrs6(), size})
	}
	return cases
}

func reportRate(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pkts/s")
}

func BenchmarkEncodeFrame(b *testing.B) {
	for _, c := range benchCases() {
		b.Run(c.name, func(b *testing.B) {
			h := sampleHeader()
			payload := make([]byte, c.size)
			buf := make([]byte, 2048)
			b.ReportAllocs()
			b.SetBytes(int64(c.size))
			for b.Loop() {
				h.PSN++
				if _, err := wire.EncodeFrame(buf, &c.addrs, &h, payload); err != nil {
					b.Fatal(err)
				}
			}
			reportRate(b)
		})
	}
}

func BenchmarkDecodeFrame(b *testing.B) {
	for _, c := range benchCases() {
		b.Run(c.name, func(b *testing.B) {
			h := sampleHeader()
			frame := encodeFrame(b, &c.addrs, &h, make([]byte, c.size))
			var f wire.Frame
			b.ReportAllocs()
			b.SetBytes(int64(c.size))
			for b.Loop() {
				if err := f.Decode(frame); err != nil {
					b.Fatal(err)
				}
			}
			reportRate(b)
		})
	}
}

func BenchmarkHeader(b *testing.B) {
	h := sampleHeader()
	h.Ext = wire.Ext{Present: wire.ExtPlacement, Placement: wire.Placement{Mode: wire.PlacementAbsolute, Index: 1}}
	buf := make([]byte, wire.MaxHeaderLen)
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := h.Encode(buf); err != nil {
				b.Fatal(err)
			}
		}
		reportRate(b)
	})
	pkt, err := encodePacket(&h, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("decode", func(b *testing.B) {
		var got wire.Header
		b.ReportAllocs()
		for b.Loop() {
			if _, err := got.Decode(pkt); err != nil {
				b.Fatal(err)
			}
		}
		reportRate(b)
	})
	a := addrs4()
	frame := encodeFrame(b, &a, &h, nil)
	b.Run("peek-cid", func(b *testing.B) {
		b.ReportAllocs()
		var sum uint32
		for b.Loop() {
			off, _ := wire.L4Offset(frame)
			cid, _ := wire.PeekCID(frame, off)
			sum += cid
		}
		reportRate(b)
		_ = sum
	})
}

func BenchmarkRoCEFrame(b *testing.B) {
	a := addrs4()
	a.DstPort = wire.RoCEv2Port
	a.NoUDPChecksum = true
	h := wire.BTH{Opcode: 0x04, DestQP: 0x11, PSN: 1}
	payload := make([]byte, 1024)
	buf := make([]byte, 2048)
	b.Run("encode/payload=1024", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(payload)))
		for b.Loop() {
			if _, err := wire.EncodeRoCEFrame(buf, &a, &h, payload); err != nil {
				b.Fatal(err)
			}
		}
		reportRate(b)
	})
	frame := encodeRoCE(b, &a, &h, payload)
	b.Run("decode/payload=1024", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(payload)))
		for b.Loop() {
			if _, err := wire.DecodeRoCEFrame(frame); err != nil {
				b.Fatal(err)
			}
		}
		reportRate(b)
	})
}

// BenchmarkRefresh is the per-transmission header refresh of core/rt's
// send path: it reads and writes 32 header bytes whatever the payload.
func BenchmarkRefresh(b *testing.B) {
	for _, c := range benchCases() {
		b.Run(c.name, func(b *testing.B) {
			h := sampleHeader()
			tmpl, err := wire.NewFrameTemplate(&c.addrs)
			if err != nil {
				b.Fatal(err)
			}
			frame := make([]byte, 2048)
			n, err := tmpl.Encode(frame, &h, make([]byte, c.size))
			if err != nil {
				b.Fatal(err)
			}
			frame = frame[:n]
			f := wire.SendFields{Flags: wire.FlagAckRequested, Retry: 1, ReqEBSN: 5, DataEBSN: 6, TxEcho: 7}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				f.TxTime = uint32(i)
				tmpl.Refresh(frame, &f)
			}
			reportRate(b)
		})
	}
}

// BenchmarkPutUDP is a generator's per-frame header build.
func BenchmarkPutUDP(b *testing.B) {
	a := addrs4()
	a.NoUDPChecksum = true
	tmpl, err := wire.NewFrameTemplate(&a)
	if err != nil {
		b.Fatal(err)
	}
	frame := make([]byte, 64)
	b.ReportAllocs()
	for i := range b.N {
		tmpl.PutUDP(frame, uint16(i))
	}
	reportRate(b)
}
