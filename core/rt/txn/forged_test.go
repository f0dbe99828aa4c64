package txn

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
			sp, m := newTamperPair(t, nil, 8, func(a, b *Options) { a.SolicitThreshold = 1024 })
			forged := 0
			m.tamper = func(fromA bool, h wire.HeaderView, frame []byte) bool {
				if forged == 0 && tc.forge(fromA, h, frame) {
					forged++
				}
				return false
			}
			c := sp.openWith(ConnOptions{Ordered: true})
			src := pattern(9, 16384)
			ra, err := sp.a.Register(src, 0)
			require.NoError(t, err)
			local := make([]byte, 16384)
			rl, err := sp.a.Register(local, 0)
			require.NoError(t, err)
			dst := make([]byte, 16384)
			copy(dst, pattern(10, 16384))
			rb, err := sp.b.Register(dst, RemoteWrite|RemoteRead)
			require.NoError(t, err)
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
