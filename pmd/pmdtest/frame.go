package pmdtest

import (
	"encoding/binary"
	"fmt"
	"net"

	"github.com/peregrine-net/peregrine/core/mbuf"
)

// Frame layout, all big-endian:
//
//	0  dst MAC        6  src MAC      12 EtherType 0x88b5
//	14 "PMDT"         18 run id       22 sequence number
//	26 queue          28 frame length 30 payload pattern
const (
	etherType     = 0x88b5
	headerLen     = 30
	MinFrame      = 60 // smallest Ethernet frame without FCS
	magic         = "PMDT"
	offMagic      = 14
	offRun        = 18
	offSeq        = 22
	offQueue      = 26
	offLen        = 28
	offPayload    = headerLen
	broadcastByte = 0xff
)

// frameMaker writes and checks the suite's frames for one run.
type frameMaker struct {
	run      uint32
	dst, src net.HardwareAddr
}

// patternByte is the payload byte at offset i of frame seq: it differs
// between neighbouring frames and along each frame, so swaps, shifts and
// stale data all show.
func patternByte(seq uint32, i int) byte { return byte(uint32(i)*131 + seq*7 + 1) }

// build makes h a frame of size bytes carrying seq for queue.
func (f *frameMaker) build(pool *mbuf.Pool, h mbuf.Handle, seq uint32, queue, size int) {
	if !pool.SetLen(h, size) {
		panic(fmt.Sprintf("pmdtest: a %d-byte frame does not fit in the pool's frames", size))
	}
	b := pool.Data(h)
	if len(f.dst) == 6 {
		copy(b[0:6], f.dst)
	} else {
		copy(b[0:6], []byte{broadcastByte, broadcastByte, broadcastByte, broadcastByte, broadcastByte, broadcastByte})
	}
	if len(f.src) == 6 {
		copy(b[6:12], f.src)
	} else {
		copy(b[6:12], []byte{0x02, 0, 0, 0, 0, 1})
	}
	binary.BigEndian.PutUint16(b[12:14], etherType)
	copy(b[offMagic:], magic)
	binary.BigEndian.PutUint32(b[offRun:], f.run)
	binary.BigEndian.PutUint32(b[offSeq:], seq)
	binary.BigEndian.PutUint16(b[offQueue:], uint16(queue))
	binary.BigEndian.PutUint16(b[offLen:], uint16(size))
	for i := offPayload; i < size; i++ {
		b[i] = patternByte(seq, i)
	}
}

// received is what check learned from one frame of ours.
type received struct {
	seq   uint32
	queue int
	size  int
}

// check reports whether data is a frame of this run (ours) and, if so,
// whether it arrived intact.
func (f *frameMaker) check(data []byte) (r received, ours bool, err error) {
	if len(data) < headerLen || binary.BigEndian.Uint16(data[12:14]) != etherType ||
		string(data[offMagic:offMagic+4]) != magic || binary.BigEndian.Uint32(data[offRun:]) != f.run {
		return received{}, false, nil
	}
	r = received{
		seq:   binary.BigEndian.Uint32(data[offSeq:]),
		queue: int(binary.BigEndian.Uint16(data[offQueue:])),
		size:  int(binary.BigEndian.Uint16(data[offLen:])),
	}
	if r.size != len(data) {
		return r, true, fmt.Errorf("frame seq %d: %d bytes received, %d sent", r.seq, len(data), r.size)
	}
	for i := offPayload; i < len(data); i++ {
		if data[i] != patternByte(r.seq, i) {
			return r, true, fmt.Errorf("frame seq %d (%d bytes): byte %d is %#02x, sent %#02x", r.seq, len(data), i, data[i], patternByte(r.seq, i))
		}
	}
	return r, true, nil
}
