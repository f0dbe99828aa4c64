package txn

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/dix"
	"github.com/peregrine-net/peregrine/core/wire"
)

// FuzzSendPlacement hands arbitrary Send packets (descriptor, index, RSN,
// length, offset, extension, ordered or not, payload) to a live receiver's placement
// path, whose WQE buffers sit between guard bytes: nothing may panic,
// nothing may be written outside a WQE, and no WQE may complete twice.
func FuzzSendPlacement(f *testing.F) {
	f.Add(uint8(0x07), uint32(0), uint32(5), uint32(100), uint32(0), uint32(0), false, false, []byte("hello"))
	f.Add(uint8(0x03), uint32(1), uint32(9), uint32(3000), uint32(1024), uint32(0), false, true, make([]byte, 1024))
	f.Add(uint8(0x13), uint32(2), uint32(1), uint32(64), uint32(0), uint32(2), true, false, make([]byte, 64))
	f.Add(uint8(0x26), uint32(7)|3<<24, uint32(2), uint32(10), uint32(0), uint32(0), false, true, make([]byte, 10))
	f.Add(uint8(0x00), uint32(3), uint32(4), uint32(100), uint32(50), uint32(0), false, false, make([]byte, 50))
	f.Add(uint8(0x23), uint32(0), uint32(5), uint32(100), ^uint32(0), uint32(0), false, true, []byte(nil))
	// Absolute, 16 bits: WQE 3 of a 256-deep queue (depth tag 8), and the
	// same index counted modulo 64 (tag 6): refused as a depth mismatch.
	f.Add(uint8(0x05), uint32(3)|8<<24, uint32(6), uint32(40), uint32(0), uint32(0), false, false, make([]byte, 40))
	f.Add(uint8(0x05), uint32(3)|6<<24, uint32(7), uint32(40), uint32(0), uint32(0), false, true, make([]byte, 40))
	const guard, slot, wqes = 256, 2048, 16
	sp := newSendPair(f, 1, "", func(a, b *Options) { b.HoldBytes = 64 << 10 })
	sp.open(dix.Config{Kind: dix.FreeRunning, Width: 8})
	mem := make([]byte, wqes*(slot+guard)+guard)
	for i := range mem {
		mem[i] = 0xa5
	}
	rb, err := sp.b.Register(mem, RemoteWrite)
	require.NoError(f, err)
	for k := range wqes {
		_, err := sp.cb.PostRecv(RecvWR{Local: rb, LocalAddr: uint64(guard + k*(slot+guard)), Len: slot})
		require.NoError(f, err)
	}
	seen := map[uint32]int{}
	var mu sync.Mutex
	f.Fuzz(func(t *testing.T, desc uint8, ssn, rsn, reqLen, off, extIdx uint32, ext, ordered bool, payload []byte) {
		mu.Lock()
		defer mu.Unlock()
		if len(payload) > 1500 {
			payload = payload[:1500]
		}
		h := wire.Header{Version: wire.Version, Type: wire.TypeSend, Desc: desc, SSN: ssn, RSN: rsn, ReqLen: reqLen, Offset: off,
			PayloadLen: uint16(len(payload))}
		if ordered {
			h.Flags |= wire.FlagOrdered // the peer asked for request order
		}
		if ext {
			h.Ext = wire.Ext{Present: wire.ExtPlacement, Placement: wire.Placement{Mode: wire.PlacementMode(1 + extIdx%3), Index: extIdx}}
		}
		_ = sp.b.deliver(sp.cb.Transport(), &h, payload)
		for i := 0; i < len(mem); i += slot + guard {
			for j := i; j < i+guard && j < len(mem); j++ {
				require.Equal(t, byte(0xa5), mem[j], "guard byte %d written", j)
			}
		}
		n := sp.b.Completions(sp.buf)
		for _, c := range sp.buf[:n] {
			seen[c.WQE]++
			require.Equal(t, 1, seen[c.WQE], "WQE %d completed twice", c.WQE)
		}
	})
}

// FuzzSendFrames decodes arbitrary bytes as a frame, as the receive path
// does, and hands every Send it yields to a live receiver's placement
// path: nothing may panic or write outside a WQE.
func FuzzSendFrames(f *testing.F) {
	a := wire.Addrs{SrcIP: ipA, DstIP: ipB}
	for _, h := range []wire.Header{
		{Version: wire.Version, Type: wire.TypeSend, Desc: 0x07, SSN: 0, RSN: 1, ReqLen: 8},
		{Version: wire.Version, Type: wire.TypeSend, Desc: 0x13, SSN: 2 << 24, RSN: 2, ReqLen: 8, Ext: wire.Ext{Present: wire.ExtPlacement, Placement: wire.Placement{Mode: wire.PlacementAbsolute, Index: 1}}},
		{Version: wire.Version, Type: wire.TypeSend, Desc: 0x20 | 0x07, RSN: 1, ReqLen: 8, Offset: 4},
	} {
		b := make([]byte, 256)
		n, err := wire.EncodeFrame(b, &a, &h, []byte("12345678")[:h.ReqLen-h.Offset])
		require.NoError(f, err)
		f.Add(b[:n])
	}
	const guard, slot, wqes = 64, 512, 8
	sp := newSendPair(f, 2, "", nil)
	sp.open(dix.Config{Kind: dix.FreeRunning, Width: 16})
	mem := make([]byte, wqes*(slot+guard)+guard)
	for i := range mem {
		mem[i] = 0x5a
	}
	rb, err := sp.b.Register(mem, RemoteWrite)
	require.NoError(f, err)
	for k := range wqes {
		_, err := sp.cb.PostRecv(RecvWR{Local: rb, LocalAddr: uint64(guard + k*(slot+guard)), Len: slot})
		require.NoError(f, err)
	}
	var mu sync.Mutex
	f.Fuzz(func(t *testing.T, raw []byte) {
		mu.Lock()
		defer mu.Unlock()
		var fr wire.Frame
		if fr.Decode(raw) != nil || fr.Header.Type != wire.TypeSend {
			return
		}
		_ = sp.b.deliver(sp.cb.Transport(), &fr.Header, fr.Payload)
		for i := 0; i < len(mem); i += slot + guard {
			for j := i; j < i+guard && j < len(mem); j++ {
				require.Equal(t, byte(0x5a), mem[j], "guard byte %d written", j)
			}
		}
		for n := sp.b.Completions(sp.buf); n > 0; n = sp.b.Completions(sp.buf) {
		}
	})
}
