package roce_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/qpx"
	"github.com/peregrine-net/peregrine/core/roce"
	"github.com/peregrine-net/peregrine/core/wire"
)

// psnsOut sends one SEND per PSN from in and returns the PSNs that came
// out of out, in order.
func (r *rig) psnsOut(toHost bool, qp uint32, psns ...uint32) []uint32 {
	r.t.Helper()
	in, out := r.netPeer, r.hostPeer
	if !toHost {
		in, out = r.hostPeer, r.netPeer
	}
	var frames [][]byte
	for _, p := range psns {
		frames = append(frames, build(r.t, roce.FrameSpec{Addrs: addrs4(),
			BTH: wire.BTH{Opcode: 0x04, PKey: 0xffff, DestQP: qp, PSN: p}, Payload: make([]byte, 8)}))
	}
	r.send(in, frames...)
	got := []uint32{}
	for _, g := range r.recv(out) {
		f, err := wire.DecodeRoCEFrame(g)
		require.NoError(r.t, err)
		got = append(got, f.BTH.PSN)
	}
	return got
}

// TestStrictPSNRecoversFromLoss: under StrictPSN a requester that lost
// one packet upstream goes back to it (go-back-N) and the stage lets the
// resend and everything after it through; a requester whose
// acknowledgement was lost resends packets the responder already has, and
// those reach it too, so it can acknowledge again. Either way the queue
// pair keeps moving, in both directions.
func TestStrictPSNRecoversFromLoss(t *testing.T) {
	r := newRig(t, roce.Options{StrictPSN: true})
	q, local, err := r.tb.Open(qpx.Context{ExpectedPSN: 10, NextPSN: 10, Access: qpx.AccessAll})
	require.NoError(t, err)

	// PSN 10 lost upstream: 11..13 are out of sequence and dropped.
	require.Empty(t, r.psnsOut(true, q, 11, 12, 13))
	require.Equal(t, uint32(10), r.tb.Context(local).ExpectedPSN)
	// Go-back-N from 10.
	require.Equal(t, []uint32{10, 11, 12, 13}, r.psnsOut(true, q, 10, 11, 12, 13))
	// The acknowledgement of 10..13 lost: the resends reach the responder.
	require.Equal(t, []uint32{10, 11, 12, 13, 14}, r.psnsOut(true, q, 10, 11, 12, 13, 14))
	require.Equal(t, uint32(15), r.tb.Context(local).ExpectedPSN)
	s := r.stage.Stats().ToHost
	require.Equal(t, uint64(3), s.DropStrictPSN)
	require.Equal(t, uint64(3), s.OutOfSequence)
	require.Equal(t, uint64(4), s.Duplicate)

	// The host's own resends toward the network (behind NextPSN) go out.
	require.Equal(t, []uint32{10, 11, 12}, r.psnsOut(false, uint32(local), 10, 11, 12))
	require.Equal(t, []uint32{10, 11, 12}, r.psnsOut(false, uint32(local), 10, 11, 12))
	require.Equal(t, uint32(13), r.tb.Context(local).NextPSN)
}

// TestStrictPSNForgedFarAheadMovesNothing: one packet with a valid QPN and
// a PSN far ahead (forged, or a corrupted one whose ICRC was recomputed)
// is dropped and leaves the expectation, so the real traffic goes on.
func TestStrictPSNForgedFarAheadMovesNothing(t *testing.T) {
	r := newRig(t, roce.Options{StrictPSN: true})
	q, local, err := r.tb.Open(qpx.Context{ExpectedPSN: 100, Access: qpx.AccessAll})
	require.NoError(t, err)
	for _, far := range []uint32{101, 100 + 1<<22, 100 + 1<<23 - 1} {
		require.Empty(t, r.psnsOut(true, q, far))
		require.Equal(t, uint32(100), r.tb.Context(local).ExpectedPSN)
	}
	require.Equal(t, []uint32{100, 101, 102}, r.psnsOut(true, q, 100, 101, 102))
	require.Equal(t, uint64(3), r.stage.Stats().ToHost.DropStrictPSN)
}
