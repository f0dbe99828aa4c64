package rt

import (
	"context"
	"fmt"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/peregrine-net/peregrine/core/wire"
)

// BenchmarkBulkSend: full-sized pushes from a to b over a mem pair, a burst
// at a time, each delivered and acknowledged; the profile of the bulk path
// without the ULP's placement. stable=true is how the transaction layer
// sends (the payload referenced, copied into each transmission). Each
// end's work carries the profile label end=initiator or end=target, so a
// CPU profile splits per endpoint (go tool pprof -tagfocus end=target).
func BenchmarkBulkSend(b *testing.B) {
	const size = 1400
	for _, stable := range []bool{false, true} {
		b.Run(fmt.Sprintf("stable=%v", stable), func(b *testing.B) {
			h := newHarness(b, func(a, bo *Options) { a.Burst, bo.Burst = 32, 32 })
			ca, _ := h.connect()
			h.check = false
			setDeliver(h.b, func(*Conn, *wire.Header, []byte) Verdict { return Accept })
			p := payload(1, size)
			initiator := pprof.WithLabels(context.Background(), pprof.Labels("end", "initiator"))
			target := pprof.WithLabels(context.Background(), pprof.Labels("end", "target"))
			defer pprof.SetGoroutineLabels(context.Background())
			b.SetBytes(size)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i += 32 {
				pprof.SetGoroutineLabels(initiator)
				for range 32 {
					sh := SendHeader{Type: wire.TypePushUnsolicitedData, PayloadStable: stable}
					if _, err := ca.Send(sh, p); err != nil {
						b.Fatal(err)
					}
				}
				for h.a.Outstanding() > 0 {
					h.clk.Advance(time.Microsecond)
					pprof.SetGoroutineLabels(initiator)
					h.a.Poll(h.clk.Now())
					pprof.SetGoroutineLabels(target)
					h.b.Poll(h.clk.Now())
				}
			}
		})
	}
}
