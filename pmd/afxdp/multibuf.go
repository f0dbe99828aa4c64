package afxdp

import (
	"math"

	"golang.org/x/sys/unix"

	"github.com/peregrine-net/peregrine/core/mbuf"
)

// Multi-buffer (jumbo) frames. A pool whose FrameSize exceeds a page is
// registered with page-sized UMEM chunks, the socket is bound with
// XDP_USE_SG and the program loaded with BPF_F_XDP_HAS_FRAGS, so frames
// larger than a chunk cross the rings as several descriptors, every one but
// the last flagged XDP_PKT_CONTD:
//
//   - Transmit: a frame is contiguous in its pool frame, so it goes as one
//     descriptor per chunk it touches (the first from DataOff, the others
//     from their chunk's start). Each comes back on the completion ring; the
//     one of the first chunk frees the frame, the others are skipped (the
//     kernel completes a frame's descriptors together).
//   - Receive: only the first chunk of each pool frame is lent to the kernel,
//     which puts a frame's pieces into as many of them, each after the
//     chunk's headroom. The first piece fills its chunk to the end, so the
//     port copies the others right behind it, into the rest of the first
//     piece's pool frame, and frees their frames: the caller gets one
//     contiguous frame.

// burstSG is rxQueue.burst for multi-buffer frames: up to len(bufs) whole
// frames, each assembled from its descriptors.
func (q *rxQueue) burstSG(bufs []mbuf.Handle) int {
	avail := q.ring.Avail(math.MaxUint32)
	if avail == 0 {
		q.idle()
		return 0
	}
	idx := q.ring.ConsIndex()
	var used, out uint32
	var bytes uint64
	frame := uint64(1) << q.shift
	for used < avail && int(out) < len(bufs) {
		// A frame's descriptors are published together: if its last one is
		// not here yet, neither is the frame (leave it for the next burst).
		end := used
		for end < avail && q.ring.At(idx+end).Options&unix.XDP_PKT_CONTD != 0 {
			end++
		}
		if end == avail {
			break
		}
		d := q.ring.At(idx + used)
		h := mbuf.Handle(d.Addr >> q.shift)
		q.lent[h>>6] &^= 1 << (h & 63)
		off := d.Addr - uint64(h)<<q.shift
		total := uint64(d.Len)
		ok := true
		for k := used + 1; k <= end; k++ {
			dk := q.ring.At(idx + k)
			hk := mbuf.Handle(dk.Addr >> q.shift)
			q.lent[hk>>6] &^= 1 << (hk & 63)
			if ok && off+total+uint64(dk.Len) <= frame {
				dst := q.pool.Frame(h)[off+total : off+total+uint64(dk.Len)]
				offk := dk.Addr - uint64(hk)<<q.shift
				copy(dst, q.pool.Frame(hk)[offk:offk+uint64(dk.Len)])
				total += uint64(dk.Len)
			} else {
				ok = false
			}
			q.one[0] = hk
			q.cache.Free(q.one[:])
		}
		q.lentRx -= end - used + 1
		used = end + 1
		if !ok {
			q.one[0] = h
			q.cache.Free(q.one[:])
			q.stats.RxDropped.Add(1)
			continue
		}
		*q.pool.Meta(h) = mbuf.Meta{DataOff: uint16(off), DataLen: uint16(total), Queue: q.queue}
		bufs[out] = h
		out++
		bytes += total
	}
	if used > 0 {
		q.ring.Release(used)
	}
	q.refill()
	q.stats.AddRx(int(out), bytes)
	return int(out)
}

// descsFor returns how many TX descriptors a frame at off, l bytes long,
// takes: one per chunk it touches.
func (q *txQueue) descsFor(off, l uint32) uint32 {
	return (off+l-1)>>q.chunkShift - off>>q.chunkShift + 1
}

// putSG writes the descriptors of frame h (at off, l bytes) from ring index
// idx and returns how many.
func (q *txQueue) putSG(idx uint32, h mbuf.Handle, off, l uint32) uint32 {
	base := uint64(h) << q.shift
	n := uint32(0)
	for l > 0 {
		room := uint32(1)<<q.chunkShift - off&(uint32(1)<<q.chunkShift-1)
		piece := min(room, l)
		d := q.ring.At(idx + n)
		d.Addr = base + uint64(off)
		d.Len = piece
		d.Options = 0
		if piece < l {
			d.Options = unix.XDP_PKT_CONTD
		}
		off += piece
		l -= piece
		n++
	}
	return n
}
