package roce_test

import (
	"encoding/binary"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/qpx"
	"github.com/peregrine-net/peregrine/core/roce"
	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/internal/testenv"
)

// TestPropertyStaleFramesNeverReachANewQP churns QPs in the stage's table
// while RoCEv2 frames for them are in flight and arrive late, in random
// order: every frame that comes out to the host goes to the QP incarnation
// it was sent to (its payload names it), no frame for a closed QP comes
// out, and the counters are exactly the model's. PEREGRINE_SEEDS sets
// the number of seeds (default 300, 50 under -short or -race).
func TestPropertyStaleFramesNeverReachANewQP(t *testing.T) {
	if seed, ok := testenv.Replay(t); ok {
		stageChurn(t, seed)
		return
	}
	n := testenv.Seeds{Full: 300, Short: 50, Race: 50}.N(t)
	for seed := range n {
		// A subtest per seed: its rig (pool, ports) is released at its end.
		if !t.Run(strconv.Itoa(seed), func(t *testing.T) { stageChurn(t, uint64(seed)) }) {
			t.Fatalf("seed %d failed (go test ./core/roce -run TestPropertyStaleFramesNeverReachANewQP -seed=%d replays it)", seed, seed)
		}
	}
}

func stageChurn(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 0xc0ffee))
	slots := 1 + r.IntN(8)
	tb, err := qpx.New(qpx.Options{Slots: slots, Seed: seed + 1})
	require.NoError(t, err)
	rg := newRig(t, roce.Options{Table: tb})
	a := addrs4()
	type flight struct {
		frame []byte
		qpn   uint32
		owner uint64
	}
	owners := map[uint32]uint64{} // live qpn -> incarnation
	var inFlight []flight
	next := uint64(1)
	var wantFwd, wantRetired uint64
	for range 60 + r.IntN(60) {
		switch op := r.IntN(10); {
		case op < 3:
			q, _, err := tb.Open(qpx.Context{Ref: next, Access: qpx.AccessAll})
			if len(owners) == slots {
				require.ErrorIs(t, err, qpx.ErrFull)
				continue
			}
			require.NoError(t, err)
			owners[q] = next
			next++
		case op < 5:
			for q := range owners {
				require.NoError(t, tb.Close(q))
				delete(owners, q)
				break
			}
		case op < 8:
			for q, o := range owners {
				payload := make([]byte, 8)
				binary.BigEndian.PutUint64(payload, o)
				f := build(t, roce.FrameSpec{Addrs: a, BTH: wire.BTH{Opcode: 0x04, PKey: 0xffff, DestQP: q, PSN: uint32(r.IntN(1 << 24))}, Payload: payload})
				inFlight = append(inFlight, flight{f, q, o})
				break
			}
		default: // a few frames in flight arrive, in random order
			k := min(len(inFlight), 1+r.IntN(4))
			var batch [][]byte
			for range k {
				i := r.IntN(len(inFlight))
				fl := inFlight[i]
				inFlight[i] = inFlight[len(inFlight)-1]
				inFlight = inFlight[:len(inFlight)-1]
				batch = append(batch, fl.frame)
				if owners[fl.qpn] == fl.owner {
					wantFwd++
				} else {
					wantRetired++
				}
			}
			if len(batch) == 0 {
				continue
			}
			rg.send(rg.netPeer, batch...)
			for _, g := range rg.recv(rg.hostPeer) {
				f, err := wire.DecodeRoCEFrame(g)
				require.NoError(t, err)
				owner := binary.BigEndian.Uint64(f.Payload)
				local := int(f.BTH.DestQP)
				require.True(t, tb.Live(local), "seed %d: frame delivered to a free context", seed)
				require.Equal(t, owner, tb.Context(local).Ref, "seed %d: a stale frame reached a new QP", seed)
			}
		}
	}
	s := rg.stage.Stats().ToHost
	require.Equal(t, wantFwd, s.Forwarded, "seed %d", seed)
	require.Equal(t, wantRetired, s.DropRetired, "seed %d", seed)
	require.Equal(t, wantFwd+wantRetired, s.Received, "seed %d", seed)
	require.Zero(t, s.DropUnknown+s.DropICRC+s.DropMalformed+s.DropAccess, "seed %d", seed)
}
