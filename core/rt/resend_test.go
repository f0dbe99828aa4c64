package rt

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/wire"
)

// TestResendIsTheFirstTransmission: a resend carries the first
// transmission's addresses, payload and header byte for byte, but for the
// fields each transmission refreshes (flags, retry, piggybacked BSNs,
// timestamps); a payload the caller did not promise stable is the one it
// passed even though the caller rewrote its buffer after Send; and every
// frame is back in the pool once both ends stop.
func TestResendIsTheFirstTransmission(t *testing.T) {
	for _, stable := range []bool{false, true} {
		t.Run(fmt.Sprintf("stable=%v", stable), func(t *testing.T) {
			h := newHarness(t, nil)
			ca, _ := h.connect()
			type tx struct {
				d       wire.Datagram
				hd      wire.Header
				payload []byte
			}
			sends := map[uint32][]tx{}
			h.pa.tap = func(f *wire.Frame) int {
				if f.Header.Type != wire.TypePushUnsolicitedData {
					return 1
				}
				d := f.Datagram
				d.Data = nil
				sends[f.Header.PSN] = append(sends[f.Header.PSN], tx{d, f.Header, append([]byte(nil), f.Payload...)})
				if f.Header.PSN%2 == 0 && len(sends[f.Header.PSN]) == 1 {
					return 0
				}
				return 1
			}
			sizes := []int{1, 17, 64, 333, 1400}
			want := map[string]bool{}
			const count = 20
			for i := range count {
				n := sizes[i%len(sizes)]
				p := payload(uint64(i), n)[:n]
				want[string(p)] = true
				_, err := ca.Send(SendHeader{Type: wire.TypePushUnsolicitedData, RSN: uint32(i), PayloadStable: stable}, p)
				require.NoError(t, err)
				if !stable {
					clear(p) // the transport kept its own copy
				}
			}
			h.run(func() bool { return len(h.gotB) == count && h.quiet() }, time.Second)
			resent := 0
			for psn, txs := range sends {
				first := txs[0]
				require.True(t, want[string(first.payload)], "PSN %d: a payload that was never sent", psn)
				for _, r := range txs[1:] {
					resent++
					require.Equal(t, first.d, r.d, "PSN %d: addresses and lengths", psn)
					require.True(t, bytes.Equal(first.payload, r.payload), "PSN %d: the payload changed", psn)
					require.True(t, r.hd.Flags.Has(wire.FlagRetransmission), "PSN %d", psn)
					hd := r.hd
					hd.Flags, hd.Retry = first.hd.Flags, first.hd.Retry
					hd.ReqEBSN, hd.DataEBSN = first.hd.ReqEBSN, first.hd.DataEBSN
					hd.TxTime, hd.TxEcho = first.hd.TxTime, first.hd.TxEcho
					require.Equal(t, first.hd, hd, "PSN %d: the header but for the refreshed fields", psn)
				}
			}
			require.NotZero(t, resent)
			require.Zero(t, h.b.Stats().RxBadChecksum)
			h.a.Stop(h.clk.Now())
			h.b.Stop(h.clk.Now())
			require.Equal(t, 0, h.pool.InUse(), "every frame back in the pool")
		})
	}
}
