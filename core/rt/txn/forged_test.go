package txn

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/dix"
	"github.com/peregrine-net/peregrine/core/wire"
)

// forgeWord rewrites the 32-bit header field at off (offRSN 12, offReqLen
// 36…) of a frame in place, clearing the UDP checksum.
func forgeWord(frame []byte, off int, v uint32) {
	binary.BigEndian.PutUint32(frame[hdrOff+off:], v)
	frame[udpCsumOff], frame[udpCsumOff+1] = 0, 0
}

// Request and data packets the receiver will not take, with valid PSNs,
// are dropped unacknowledged, so the packet that really holds the PSN
// still comes: before, each was acknowledged, and the operation whose
// packet it displaced never completed (a push request lost for good, a
// pull whose data never all came).
func TestForgedPacketsAreNotAcknowledged(t *testing.T) {
	const offRSN, offReqLen = 12, 36
	for _, tc := range []struct {
		name  string
		forge func(fromA bool, h wire.HeaderView, frame []byte) bool
		pull  bool
	}{
		{"push request under a registered RSN", func(fromA bool, h wire.HeaderView, frame []byte) bool {
			if fromA && h.Type() == wire.TypePushRequest && h.RSN() == 1 && h.Flags()&wire.FlagRetransmission == 0 {
				forgeWord(frame, offRSN, 0) // push 0's RSN, still waiting for its data
				return true
			}
			return false
		}, false},
		{"pull data of another length", func(fromA bool, h wire.HeaderView, frame []byte) bool {
			if !fromA && h.Type() == wire.TypePullData && h.Flags()&wire.FlagRetransmission == 0 {
				forgeWord(frame, offReqLen, h.ReqLen()+1)
				return true
			}
			return false
		}, true},
		{"pull data under an RSN never posted", func(fromA bool, h wire.HeaderView, frame []byte) bool {
			if !fromA && h.Type() == wire.TypePullData && h.Flags()&wire.FlagRetransmission == 0 {
				forgeWord(frame, offRSN, 7)
				return true
			}
			return false
		}, true},
		{"pull data under a push's RSN", func(fromA bool, h wire.HeaderView, frame []byte) bool {
			if !fromA && h.Type() == wire.TypePullData && h.Flags()&wire.FlagRetransmission == 0 {
				forgeWord(frame, offRSN, 2) // the push posted after the pulls
				return true
			}
			return false
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Unsealed: what this layer refuses of a forger that holds the
			// key (a sealed connection drops these in rt: TestForgedFieldUnderAValidPSN).
			sp, m := newTamperPair(t, nil, 8, func(a, b *Options) { a.SolicitThreshold = 1024; a.Transport.NoSeal = true })
			forged := 0
			m.tamper = func(fromA bool, h wire.HeaderView, frame []byte) bool {
				if forged == 0 && tc.forge(fromA, h, frame) {
					forged++
				}
				return false
			}
			c := sp.openWith(ConnOptions{Ordered: true})
			src, local, dst, ra, rl, rb := forgeRegions(t, sp)
			var err error
			for tag := range uint64(2) {
				op := Op{Local: ra, LocalAddr: 4096 * tag, Len: 3000, Remote: wire.RegionRef{Key: rb.Key, Addr: 4096 * tag}, Tag: tag}
				if tc.pull {
					op.Local, op.Remote.Addr = rl, 8192+4096*tag
					_, err = c.Pull(op)
				} else {
					_, err = c.Push(op)
				}
				require.NoError(t, err)
			}
			ops := 2
			if tc.pull {
				// A push of the same length, whose RSN a forgery may name.
				_, err = c.Push(Op{Local: ra, LocalAddr: 8192, Len: 3000, Remote: wire.RegionRef{Key: rb.Key, Addr: 0}, Tag: 2})
				require.NoError(t, err)
				ops++
			}
			done := sp.runFor(func() bool { return len(sp.cqA) == ops }, time.Second)
			require.Equal(t, 1, forged)
			require.True(t, done, "completions %s: the operation whose packet the forgery displaced never completed", statuses(sp.cqA))
			for _, cp := range sp.cqA {
				require.Equal(t, StatusOK, cp.Status, "op %d", cp.Tag)
			}
			if tc.pull {
				require.True(t, bytes.Equal(dst[8192:8192+3000], local[:3000]))
				require.Positive(t, sp.a.Transport().Stats().RxDropped)
			} else {
				require.True(t, bytes.Equal(src[4096:4096+3000], dst[4096:4096+3000]))
				require.Positive(t, sp.b.Transport().Stats().RxDropped)
			}
			sp.run(func() bool { return sp.settled() }, time.Second)
		})
	}
}

// One field of one packet of a message rewritten under its valid PSN and
// connection, every other packet real: request number, request length or
// offset of a push segment, the index or offset of a Send segment, the
// offset or request number of pull data. The packet fails its seal and is
// dropped unacknowledged, the real packet's resend wins, and every
// operation completes OK with its bytes where they belong, each push
// handed to B's ULP once and each Send in its own WQE. Without the seal,
// each was taken: a segment placed in another push or at another offset,
// a Send segment in another WQE, a message refused for good.
func TestForgedFieldUnderAValidPSN(t *testing.T) {
	const offRSN, offReqLen, offOffset = 12, 36, 40
	const seg, n = 1024, 3000
	// The first transmission of the second packet of operation 1.
	second := func(typ wire.Type, fromA bool) func(bool, wire.HeaderView) bool {
		return func(a bool, h wire.HeaderView) bool {
			return a == fromA && h.Type() == typ && h.Offset() == seg && h.ReqLen() == n &&
				h.Flags()&wire.FlagRetransmission == 0 && h.RSN()%2 == 1
		}
	}
	for _, tc := range []struct {
		name  string
		kind  OpKind
		which func(fromA bool, h wire.HeaderView) bool
		forge func(frame []byte)
	}{
		{"push segment, request number", OpPush, second(wire.TypePushUnsolicitedData, true), func(f []byte) { forgeWord(f, offRSN, 0) }},
		{"push segment, request length", OpPush, second(wire.TypePushUnsolicitedData, true), func(f []byte) { forgeWord(f, offReqLen, 2*seg) }},
		{"push segment, offset", OpPush, second(wire.TypePushUnsolicitedData, true), func(f []byte) { forgeWord(f, offOffset, 0) }},
		{"Send segment, index", OpSend, func(a bool, h wire.HeaderView) bool {
			return a && h.Type() == wire.TypeSend && h.Offset() == 0 && h.Flags()&wire.FlagRetransmission == 0 && h.RSN()%2 == 1
		}, func(f []byte) { forgeSSN(f, 2) }}, // its first packet, to WQE 2: posted, bound to no Send
		{"Send segment, offset", OpSend, second(wire.TypeSend, true), func(f []byte) { forgeWord(f, offOffset, 2*seg) }},
		{"Send segment, request length", OpSend, second(wire.TypeSend, true), func(f []byte) { forgeWord(f, offReqLen, 2*seg) }},
		{"pull data, offset", OpPull, second(wire.TypePullData, false), func(f []byte) { forgeWord(f, offOffset, 0) }},
		{"pull data, request number", OpPull, second(wire.TypePullData, false), func(f []byte) { forgeWord(f, offRSN, 0) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp, m := newTamperPair(t, nil, 8, func(a, b *Options) { a.SolicitThreshold = 1 << 20 })
			forged := 0
			m.tamper = func(fromA bool, h wire.HeaderView, frame []byte) bool {
				if forged == 0 && tc.which(fromA, h) {
					forged++
					tc.forge(frame)
				}
				return false
			}
			c := sp.openWith(ConnOptions{Index: dix.Config{Kind: dix.FreeRunning, Width: 16}})
			src, local, dst, ra, rl, rb := forgeRegions(t, sp)
			wqes := make([]byte, 16384)
			rw, err := sp.b.Register(wqes, 0)
			require.NoError(t, err)
			if tc.kind == OpSend {
				for tag := range uint64(3) { // the third, WQE 2, for no Send
					_, err = sp.cb.PostRecv(RecvWR{Local: rw, LocalAddr: 4096 * tag, Len: n, WRID: tag})
					require.NoError(t, err)
				}
			}
			for tag := range uint64(2) {
				op := Op{Local: ra, LocalAddr: 4096 * tag, Len: n, Remote: wire.RegionRef{Key: rb.Key, Addr: 4096 * tag}, Tag: tag}
				switch tc.kind {
				case OpPush:
					_, err = c.Push(op)
				case OpPull:
					op.Local = rl
					_, err = c.Pull(op)
				default:
					op.Remote = wire.RegionRef{}
					_, err = c.Send(op)
				}
				require.NoError(t, err)
			}
			done := sp.runFor(func() bool { return len(sp.cqA) == 2 }, 2*time.Second)
			require.Equal(t, 1, forged, "the forger found its packet")
			require.True(t, done, "completions %s", statuses(sp.cqA))
			for _, cp := range sp.cqA {
				require.Equal(t, StatusOK, cp.Status, "op %d", cp.Tag)
			}
			sp.run(func() bool { return sp.settled() }, time.Second)
			for tag := range 2 {
				o := 4096 * tag
				switch tc.kind {
				case OpPush:
					require.Equal(t, src[o:o+n], dst[o:o+n], "push %d's bytes", tag)
				case OpPull:
					require.Equal(t, dst[o:o+n], local[o:o+n], "pull %d's bytes", tag)
				default:
					require.Equal(t, src[o:o+n], wqes[o:o+n], "Send %d's WQE", tag)
				}
			}
			switch tc.kind {
			case OpPush:
				at := map[uint64]int{}
				for _, r := range sp.reqB {
					at[r.Region.Addr]++
				}
				require.Equal(t, map[uint64]int{0: 1, 4096: 1}, at, "B's ULP is handed each push once")
			case OpSend:
				require.Len(t, sp.cqB, 2, "each WQE completes once")
				for _, cp := range sp.cqB {
					require.Equal(t, StatusOK, cp.Status, "WQE %d", cp.Tag)
					require.Equal(t, n, cp.Bytes, "WQE %d", cp.Tag)
				}
			}
		})
	}
}

// forgeRegions registers A's source and local memory and B's remote
// memory (16 KiB each, the source and B's filled with patterns).
func forgeRegions(t *testing.T, sp *sendPair) (src, local, dst []byte, ra, rl, rb Region) {
	src, local, dst = pattern(9, 16384), make([]byte, 16384), pattern(10, 16384)
	var err error
	ra, err = sp.a.Register(src, 0)
	require.NoError(t, err)
	rl, err = sp.a.Register(local, 0)
	require.NoError(t, err)
	rb, err = sp.b.Register(dst, RemoteWrite|RemoteRead)
	require.NoError(t, err)
	return src, local, dst, ra, rl, rb
}
