package mbuf

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSharedAllocExhaustFree(t *testing.T) {
	const frames = 300
	p := newTestPool(t, Options{Frames: frames, CacheSize: 64})
	require.Equal(t, 0, p.InUse())
	require.Equal(t, frames, p.Available())

	all := make([]Handle, frames)
	require.Equal(t, frames, p.AllocBulk(all))
	seen := map[Handle]bool{}
	for _, h := range all {
		require.True(t, p.Valid(h))
		require.False(t, seen[h], "handle %d granted twice", h)
		seen[h] = true
	}
	require.Equal(t, frames, p.InUse())
	require.Equal(t, 0, p.Available())

	one := make([]Handle, 1)
	require.Equal(t, 0, p.AllocBulk(one))
	require.Equal(t, 0, p.AllocBurst(make([]Handle, 5)))
	st := p.Stats()
	require.Equal(t, uint64(frames), st.Allocs)
	require.Equal(t, uint64(1+5), st.AllocFails)

	p.Free(all[:10])
	require.Equal(t, frames-10, p.InUse())
	require.Equal(t, 0, p.AllocBulk(make([]Handle, 11)), "bulk is all or nothing")
	require.Equal(t, frames-10, p.InUse())
	burst := make([]Handle, 16)
	require.Equal(t, 10, p.AllocBurst(burst), "burst takes what there is")
	st = p.Stats()
	require.Equal(t, uint64(1+5+11+6), st.AllocFails)
	require.Equal(t, uint64(frames+10), st.Allocs)
	require.Equal(t, uint64(10), st.Frees)

	copy(all[:10], burst[:10])
	p.Free(all)
	require.Equal(t, 0, p.InUse())
	require.Equal(t, frames, p.AllocBulk(all), "everything can be allocated again")
	p.Free(all)
	require.Equal(t, 0, p.AllocBulk(nil))
	p.Free(nil)
}

func TestCacheAllocExhaustFree(t *testing.T) {
	const frames = 256
	p := newTestPool(t, Options{Frames: frames, CacheSize: 64})
	c := p.NewCache()
	var held []Handle
	batch := make([]Handle, 8)
	for c.AllocBulk(batch) == 8 {
		held = append(held, batch...)
	}
	require.Len(t, held, frames)
	require.Equal(t, frames, p.InUse())
	require.Equal(t, 0, c.Len())
	fails := p.Stats().AllocFails
	require.Equal(t, uint64(8), fails)
	require.Equal(t, 0, c.GetBulk(batch[:1]))
	require.Equal(t, fails+1, p.Stats().AllocFails)

	c.Free(held[:5])
	require.Equal(t, 0, c.AllocBulk(batch), "5 free frames cannot satisfy a bulk of 8")
	require.Equal(t, 5, c.AllocBurst(batch))
	require.Equal(t, fails+1+8+3, p.Stats().AllocFails)
	copy(held[:5], batch[:5])

	c.Free(held)
	require.Equal(t, 0, p.InUse())
	require.LessOrEqual(t, c.Len(), 64)
	c.Flush()
	require.Equal(t, 0, c.Len())
	require.Equal(t, frames, p.ring.Len())
	st := p.Stats()
	require.Equal(t, st.Allocs, st.Frees)
	require.Equal(t, uint64(frames+5), st.Allocs)
}

func TestMetaResetOnAllocOnly(t *testing.T) {
	p := newTestPool(t, Options{Frames: 64, Headroom: 100})
	c := p.NewCache()
	hs := make([]Handle, 1)
	require.Equal(t, 1, c.AllocBulk(hs))
	h := hs[0]
	require.Equal(t, Meta{DataOff: 100}, *p.Meta(h))
	m := p.Meta(h)
	m.Port, m.Queue, m.FlowHash, m.Flags, m.RxTime, m.User = 1, 2, 3, 4, 5, [4]uint64{6, 7, 8, 9}
	m.DataLen = 60
	c.PutBulk(hs)

	require.Equal(t, 1, c.GetBulk(hs), "LIFO: the same frame comes back")
	require.Equal(t, h, hs[0])
	require.Equal(t, uint64(9), p.Meta(h).User[3], "raw GetBulk keeps metadata")
	c.PutBulk(hs)

	for _, alloc := range []func([]Handle) int{c.AllocBulk, c.AllocBurst, p.AllocBulk, p.AllocBurst} {
		p.Meta(h).Flags = 42
		require.Equal(t, 1, alloc(hs))
		require.Equal(t, Meta{DataOff: 100}, *p.Meta(hs[0]))
		p.Meta(hs[0]).Flags = 42
		c.Free(hs)
	}
}

func TestFramesDoNotOverlap(t *testing.T) {
	for _, frameSize := range []int{2048, 4096} {
		t.Run(strconv.Itoa(frameSize), func(t *testing.T) {
			const frames = 300
			p := newTestPool(t, Options{Frames: frames, FrameSize: frameSize, CacheSize: 64})
			c := p.NewCache()
			hs := make([]Handle, frames)
			require.Equal(t, frames, c.AllocBulk(hs))
			pattern := func(h Handle, i int) byte { return byte(int(h)*131 + i*7 + i>>8) }
			for _, h := range hs {
				f := p.Frame(h)
				require.Len(t, f, frameSize)
				for i := range f {
					f[i] = pattern(h, i)
				}
				// The packet area is part of the same frame.
				d := p.Append(h, 64)
				require.Len(t, d, 64)
				require.Equal(t, pattern(h, p.Headroom()), d[0])
			}
			arena := p.Arena()
			require.Len(t, arena, frames*frameSize)
			for _, h := range hs {
				f := p.Frame(h)
				off := p.Offset(h)
				require.Equal(t, uint64(h)*uint64(frameSize), off)
				require.True(t, bytes.Equal(f, arena[off:off+uint64(frameSize)]), "Frame(%d) is not arena[Offset(%d):]", h, h)
				for i := range f {
					if f[i] != pattern(h, i) {
						t.Fatalf("frame %d byte %d: got %#x, want %#x (overwritten by another frame)", h, i, f[i], pattern(h, i))
					}
				}
				require.Equal(t, f[p.Headroom():p.Headroom()+64], p.Data(h))
			}
			c.Free(hs)
		})
	}
}

func TestPacketEditLimits(t *testing.T) {
	const headroom = 128
	p := newTestPool(t, Options{Frames: 64, Headroom: headroom})
	hs := make([]Handle, 1)
	require.Equal(t, 1, p.AllocBulk(hs))
	h := hs[0]
	defer p.Free(hs)
	meta := p.Meta(h)
	tailroom := p.FrameSize() - headroom

	require.Empty(t, p.Data(h))
	require.Nil(t, p.Append(h, -1))
	require.Nil(t, p.Append(h, tailroom+1), "no room")
	require.Equal(t, uint16(0), meta.DataLen, "a refused Append changes nothing")
	tail := p.Append(h, 10)
	require.Len(t, tail, 10)
	require.Equal(t, 10, cap(tail), "the new bytes cannot be appended past")
	copy(tail, "0123456789")
	require.Equal(t, "0123456789", string(p.Data(h)))
	require.Len(t, p.Append(h, tailroom-10), tailroom-10, "exactly fills the frame")
	require.Nil(t, p.Append(h, 1))
	require.Equal(t, []byte{}, p.Append(h, 0))
	require.True(t, p.Trim(h, tailroom-10))
	require.Equal(t, "0123456789", string(p.Data(h)))

	require.Nil(t, p.Prepend(h, headroom+1))
	require.Nil(t, p.Prepend(h, -1))
	head := p.Prepend(h, 2)
	copy(head, "ab")
	require.Equal(t, "ab0123456789", string(p.Data(h)))
	require.Equal(t, uint16(headroom-2), meta.DataOff)
	require.Len(t, p.Prepend(h, headroom-2), headroom-2, "exactly uses the headroom")
	require.Nil(t, p.Prepend(h, 1))
	require.True(t, p.Adj(h, headroom-2))
	require.Equal(t, "ab0123456789", string(p.Data(h)))

	require.False(t, p.Adj(h, 13))
	require.False(t, p.Adj(h, -1))
	require.True(t, p.Adj(h, 2))
	require.Equal(t, "0123456789", string(p.Data(h)))
	require.False(t, p.Trim(h, 11))
	require.False(t, p.Trim(h, -1))
	require.True(t, p.Trim(h, 4))
	require.Equal(t, "012345", string(p.Data(h)))
	require.True(t, p.Adj(h, 6))
	require.Empty(t, p.Data(h))
	require.Equal(t, uint16(headroom+6), meta.DataOff)

	require.True(t, p.SetLen(h, 3))
	require.Equal(t, "678", string(p.Data(h)), "SetLen exposes the bytes already there")
	require.True(t, p.SetLen(h, p.FrameSize()-int(meta.DataOff)))
	require.False(t, p.SetLen(h, p.FrameSize()-int(meta.DataOff)+1))
	require.False(t, p.SetLen(h, -1))
	require.True(t, p.SetLen(h, 0))

	// A Meta edited beyond the frame panics instead of reaching a neighbour.
	meta.DataLen = uint16(p.FrameSize())
	require.Panics(t, func() { p.Data(h) })
	require.Nil(t, p.Append(h, 1))
	meta.DataLen = 0
}

func TestOffsetHandleAtRoundTrip(t *testing.T) {
	for _, frameSize := range []int{2048, 4096} {
		p := newTestPool(t, Options{Name: fmt.Sprint("rt", frameSize), Frames: 100, FrameSize: frameSize, CacheSize: 64})
		for h := Handle(0); h < 100; h++ {
			off := p.Offset(h)
			for _, delta := range []uint64{0, 1, uint64(frameSize) / 2, uint64(frameSize) - 1} {
				got, ok := p.HandleAt(off + delta)
				require.True(t, ok)
				require.Equal(t, h, got)
			}
		}
		for _, off := range []uint64{100 * uint64(frameSize), 100*uint64(frameSize) + 1, 1 << 40, ^uint64(0)} {
			h, ok := p.HandleAt(off)
			require.False(t, ok, "offset %d", off)
			require.Equal(t, NoHandle, h)
		}
		require.True(t, p.Valid(99))
		require.False(t, p.Valid(100))
		require.False(t, p.Valid(NoHandle))
	}
}

func TestCloseWithFramesInUse(t *testing.T) {
	p, err := New(Options{Name: "closing", Frames: 128, CacheSize: 64})
	require.NoError(t, err)
	c := p.NewCache()
	hs := make([]Handle, 3)
	require.Equal(t, 3, c.AllocBulk(hs))
	copy(p.Append(hs[0], 4), "live")

	err = p.Close()
	require.ErrorIs(t, err, ErrInUse)
	require.Contains(t, err.Error(), "3 of 128")
	require.Contains(t, err.Error(), `"closing"`)
	require.Equal(t, "live", string(p.Data(hs[0])), "a refused Close leaves the memory mapped")

	c.Free(hs)
	require.Positive(t, c.Len(), "frames still cached do not block Close")
	require.NoError(t, p.Close())
	require.NoError(t, p.Close(), "Close is idempotent")
	require.Nil(t, p.Arena())
	require.Panics(t, func() { p.Data(hs[0]) }, "a closed pool's memory is unreachable")
}

func TestCheckLeaks(t *testing.T) {
	for _, debug := range []bool{false, true} {
		t.Run(fmt.Sprint("debug=", debug), func(t *testing.T) {
			p := newTestPool(t, Options{Name: "leaky", Frames: 128, CacheSize: 64, Debug: debug})
			require.NoError(t, p.CheckLeaks())
			c := p.NewCache()
			hs := make([]Handle, 20)
			require.Equal(t, 20, c.AllocBulk(hs))
			c.Free(hs[3:])
			err := p.CheckLeaks()
			require.ErrorIs(t, err, ErrLeak)
			require.Contains(t, err.Error(), "3 of 128 frames leaked")
			require.Contains(t, err.Error(), `"leaky"`)
			if debug {
				names := make([]string, 3)
				for i, h := range hs[:3] {
					names[i] = fmt.Sprint(h)
				}
				slicesSortNumeric(names)
				require.Contains(t, err.Error(), "handles "+strings.Join(names, ", "))
			}
			c.Free(hs[:3])
			require.NoError(t, p.CheckLeaks())

			// More than 16 leaks: 16 named, then an ellipsis.
			many := make([]Handle, 40)
			require.Equal(t, 40, p.AllocBulk(many))
			err = p.CheckLeaks()
			require.ErrorIs(t, err, ErrLeak)
			require.Contains(t, err.Error(), "40 of 128")
			if debug {
				require.Contains(t, err.Error(), ", ...)")
				require.Equal(t, 15, strings.Count(err.Error(), ", ")-1)
			}
			p.Free(many)
		})
	}
}

func slicesSortNumeric(s []string) {
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			a, _ := strconv.Atoi(s[i])
			b, _ := strconv.Atoi(s[j])
			if b < a {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
}

// freeHugePages reads how many bytes of reserved hugepages are free.
func freeHugePages(t *testing.T) int {
	f, err := os.Open("/proc/meminfo")
	require.NoError(t, err)
	defer f.Close()
	var free, size int
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		switch {
		case len(fields) >= 2 && fields[0] == "HugePages_Free:":
			free, _ = strconv.Atoi(fields[1])
		case len(fields) >= 2 && fields[0] == "Hugepagesize:":
			size, _ = strconv.Atoi(fields[1])
			size *= 1024
		}
	}
	return free * size
}

func TestHugePagesFallBackWithWarning(t *testing.T) {
	var logged bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logged, nil))
	p := newTestPool(t, Options{Frames: 512, HugePages: true, Logger: logger})
	if freeHugePages(t) >= hugePageSize {
		t.Logf("this machine has hugepages reserved; checking they are used")
		require.True(t, p.Stats().HugePages)
		require.Empty(t, logged.String())
	} else {
		require.False(t, p.Stats().HugePages)
		require.Contains(t, logged.String(), "level=WARN")
		require.Contains(t, logged.String(), "hugepages unavailable")
		require.Contains(t, logged.String(), "pool="+t.Name())
	}
	// Either way the pool works.
	hs := make([]Handle, 512)
	require.Equal(t, 512, p.AllocBulk(hs))
	for _, h := range hs {
		copy(p.Append(h, 4), "abcd")
	}
	require.Equal(t, "abcd", string(p.Data(hs[511])))
	p.Free(hs)

	plain := newTestPool(t, Options{Name: "plain", Frames: 64, Logger: logger})
	require.False(t, plain.Stats().HugePages)
}

func TestErrorsAreDistinct(t *testing.T) {
	require.False(t, errors.Is(ErrInUse, ErrLeak))
	require.False(t, errors.Is(ErrLeak, ErrInvalidOptions))
}
