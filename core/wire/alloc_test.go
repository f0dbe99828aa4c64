package wire_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/wire"
)

// The codec sits on the packet path: none of it may allocate, on good
// packets or bad ones.
func TestZeroAllocs(t *testing.T) {
	h := sampleHeader()
	h.Ext = wire.Ext{Present: wire.ExtPlacement | wire.ExtQPN, Placement: wire.Placement{Mode: wire.PlacementAbsolute, Index: 9}, DstQPN: 1, SrcQPN: 2}
	payload := make([]byte, 1024)
	a4, a6 := addrs4(), addrs6()
	buf := make([]byte, 2048)
	frame4 := encodeFrame(t, &a4, &h, payload)
	frame6 := encodeFrame(t, &a6, &h, payload)
	pkt := frame4[42:]
	bad := append([]byte(nil), frame4...)
	bad[len(bad)-1]++
	bth := wire.BTH{Opcode: 4, DestQP: 7, PSN: 8}
	ra := addrs4()
	ra.DstPort = wire.RoCEv2Port
	roce := encodeRoCE(t, &ra, &bth, payload)
	eack := wire.Header{Version: 1, Type: wire.TypeExtendedAck}
	eack.Ack.DataBitmap.Set(5)
	eackPkt, err := encodePacket(&eack, nil)
	require.NoError(t, err)

	patch := append([]byte(nil), frame4...)
	tmpl, err := wire.NewFrameTemplate(&a4)
	require.NoError(t, err)
	send := wire.SendFields{Flags: wire.FlagRetransmission, Retry: 1, ReqEBSN: 2, DataEBSN: 3, TxTime: 4, TxEcho: 5}
	var sink int
	var frame wire.Frame
	cases := map[string]func(){
		"Header.Encode": func() {
			n, _ := h.Encode(buf)
			sink += n
		},
		"DecodeHeader": func() {
			got, n, _ := wire.DecodeHeader(pkt)
			sink += n + int(got.PSN)
		},
		"DecodeHeader/extended-ack": func() {
			got, n, _ := wire.DecodeHeader(eackPkt)
			sink += n + got.Ack.DataBitmap.Count()
		},
		"DecodeHeader/error": func() {
			_, n, _ := wire.DecodeHeader(pkt[:20])
			sink += n
		},
		"EncodeFrame/ipv4": func() {
			n, _ := wire.EncodeFrame(buf, &a4, &h, payload)
			sink += n
		},
		"EncodeFrame/ipv6": func() {
			n, _ := wire.EncodeFrame(buf, &a6, &h, payload)
			sink += n
		},
		"DecodeFrame/ipv4": func() {
			f, _ := wire.DecodeFrame(frame4)
			sink += len(f.Payload)
		},
		"DecodeFrame/ipv6": func() {
			f, _ := wire.DecodeFrame(frame6)
			sink += len(f.Payload)
		},
		"Frame.Decode": func() {
			_ = frame.Decode(frame4)
			sink += len(frame.Payload)
		},
		"DecodeFrame/bad-checksum": func() {
			_, err := wire.DecodeFrame(bad)
			if err != nil {
				sink++
			}
		},
		"PeekCID": func() {
			off, _ := wire.L4Offset(frame6)
			cid, _ := wire.PeekCID(frame6, off)
			sink += int(cid)
		},
		"HeaderView": func() {
			v, _ := wire.ViewHeader(patch[42:])
			v.SetRetry(v.Retry() + 1)
			v.SetTxTime(v.TxTime() + 1)
		},
		"FrameTemplate.Refresh": func() {
			send.TxTime++
			tmpl.Refresh(patch, &send)
		},
		"FrameTemplate.PutUDP": func() {
			tmpl.PutUDP(buf[:1000], 7)
		},
		"EncodeUDP": func() {
			n, _ := wire.EncodeUDP(buf, &a6, 100)
			sink += n
		},
		"UpdateUDPChecksum": func() {
			_ = frame.UpdateUDPChecksum(frame4)
		},
		"EncodeRoCEFrame": func() {
			n, _ := wire.EncodeRoCEFrame(buf, &ra, &bth, payload)
			sink += n
		},
		"DecodeRoCEFrame": func() {
			f, _ := wire.DecodeRoCEFrame(roce)
			sink += int(f.BTH.PSN)
		},
	}
	require.NoError(t, frame.Decode(frame4))
	for name, fn := range cases {
		require.Zero(t, testing.AllocsPerRun(200, fn), name)
	}
	require.NotZero(t, sink)
}
