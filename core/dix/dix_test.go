package dix

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestEncodeDecodeEveryKindAcrossWrap(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, kind := range []Kind{Absolute, Relative, FreeRunning} {
		for _, width := range []int{8, 16, 24, 32} {
			c := Config{Kind: kind, Width: width, Depth: 256}
			if kind == Relative {
				c.Where = InExtension
			}
			c, err := c.WithDefaults()
			require.NoError(t, err, "%v/%d", kind, width)
			w := uint32(c.Outstanding)
			for range 20000 {
				base := r.Uint32()
				if r.IntN(4) == 0 {
					base = ^uint32(0) - uint32(r.IntN(600)) // near the 32-bit wrap
				}
				k := base + uint32(r.IntN(int(w)))           // the sender's window
				head := base + uint32(r.IntN(int(k-base)+1)) // the receiver's head: at or past the base, at or before k
				idx, tag := c.Encode(k, base)
				got, ok := Decode(kind, width, 256, idx, tag, head)
				require.True(t, ok)
				require.Equal(t, k, got, "%v/%d k=%d base=%d head=%d idx=%d", kind, width, k, base, head, idx)
			}
		}
	}
}

func TestConfigErrorsTeach(t *testing.T) {
	for _, c := range []Config{
		{Kind: 9},
		{Kind: FreeRunning, Width: 12},
		{Kind: Relative, Width: 32},
		{Kind: Absolute, Width: 8, Depth: 1000},
		{Kind: None, Carry: CarryUntilAcked},
		{Kind: FreeRunning, Width: 8, Outstanding: 200},
	} {
		require.ErrorIs(t, c.Validate(), ErrConfig, "%+v", c)
	}
	require.NoError(t, Config{}.Validate())
}

func TestDescRoundTrip(t *testing.T) {
	for _, kind := range []Kind{Absolute, Relative, FreeRunning} {
		for _, width := range []int{8, 16, 24, 32} {
			for _, where := range []Where{InHeader, InExtension} {
				c := Config{Kind: kind, Width: width, Where: where}
				for _, om := range []bool{false, true} {
					d := c.Desc(om)
					require.True(t, d.Valid())
					require.Equal(t, kind, d.Kind())
					require.Equal(t, width, d.Width())
					require.Equal(t, where == InExtension, d.InExt())
					require.Equal(t, om, d.Omitted())
				}
			}
		}
	}
	require.Equal(t, Desc(0), (&Config{}).Desc(false))
	require.False(t, Desc(0x40).Valid())
	require.False(t, Desc(0x04).Valid(), "kind None with a width")
}

// The out-of-order case in full: WQEs 1.. posted, A (index 1) arrives and is placed
// directly, C (3) arrives before B and gets an element, the consumer
// pointer jumps to 4; B (2) arrives late and still finds WQE 2, and the
// pointer stays at 4.
func TestQueueFigure5(t *testing.T) {
	q, err := NewQueue(8, 4, 1)
	require.NoError(t, err)
	for range 6 {
		_, _, ok := q.Post()
		require.True(t, ok)
	}
	require.Equal(t, BoundDirect, q.Arrive(1, false))
	require.Equal(t, uint32(2), q.Consumer())
	require.True(t, q.Complete(1))
	require.Equal(t, BoundElement, q.Arrive(3, false))
	require.Equal(t, uint32(4), q.Consumer())
	require.Equal(t, Placed, q.Arrive(3, false), "later packets of C")
	require.True(t, q.Complete(3))
	require.Equal(t, 0, q.Elements(), "C's element removed at completion")
	require.Equal(t, BoundElement, q.Arrive(2, false), "B arrives late and finds WQE 2")
	require.Equal(t, uint32(4), q.Consumer())
	require.Equal(t, uint32(2), q.Head())
	require.True(t, q.Complete(2))
	require.Equal(t, uint32(4), q.Head(), "the head passes B and C")
	require.Equal(t, Stale, q.Arrive(3, false), "WQE 3 is consumed")
	require.Equal(t, NotPosted, q.Arrive(7, false))
	require.Equal(t, Beyond, q.Arrive(4+8, false))
	require.Equal(t, 1, q.PeakElements())
}

func TestQueueElementsBounded(t *testing.T) {
	q, _ := NewQueue(16, 2, 0)
	for range 10 {
		q.Post()
	}
	require.Equal(t, BoundElement, q.Arrive(3, false))
	require.Equal(t, BoundElement, q.Arrive(5, false))
	require.Equal(t, Full, q.Arrive(7, false), "a full element table refuses, never overwrites")
	require.Equal(t, uint32(6), q.Consumer(), "the consumer pointer jumped past 5")
	require.Equal(t, BoundDirect, q.Arrive(6, false))
	require.Equal(t, Hold, q.Arrive(8, true), "in order: a later WQE waits")
	require.True(t, q.Complete(3))
	require.Equal(t, BoundElement, q.Arrive(9, false))
	require.Equal(t, Full, q.Arrive(0, false), "the late one waits for an element")
}

func TestQueueAbortBeforePost(t *testing.T) {
	q, _ := NewQueue(8, 8, 10)
	q.Post() // 10
	require.Equal(t, NotPosted, q.Abort(12))
	require.Equal(t, BoundDirect, q.Abort(10), "posted, unbound: the caller completes it")
	require.True(t, q.Complete(10))
	require.Equal(t, uint32(11), q.Head())
	require.Equal(t, NotPosted, q.Abort(11))
	require.Equal(t, uint32(13), q.Head(), "past both aborted numbers")
	k, aborted, ok := q.Post()
	require.True(t, ok)
	require.True(t, aborted)
	require.Equal(t, uint32(11), k)
	k, aborted, _ = q.Post()
	require.Equal(t, uint32(12), k)
	require.True(t, aborted)
	k, aborted, _ = q.Post()
	require.Equal(t, uint32(13), k)
	require.False(t, aborted)
	require.Equal(t, BoundDirect, q.Arrive(13, false))
}

func TestWindow(t *testing.T) {
	w, err := NewWindow(3, ^uint32(0))
	require.NoError(t, err)
	a, _ := w.Take()
	b, _ := w.Take()
	c, _ := w.Take()
	_, ok := w.Take()
	require.False(t, ok)
	w.Done(b)
	require.Equal(t, a, w.Base())
	w.Done(a)
	require.Equal(t, c, w.Base(), "the base passes every done number, across the wrap")
	require.True(t, w.Room())
}

func BenchmarkDecodeRelative8(b *testing.B) {
	c := Config{Kind: Relative, Width: 8}
	c, _ = c.WithDefaults()
	var sink uint32
	for i := range b.N {
		idx, tag := c.Encode(uint32(i), uint32(i)-5)
		k, _ := Decode(Relative, 8, 256, idx, tag, uint32(i)-3)
		sink += k
	}
	_ = sink
}

// An absolute index travels with log2 of the depth it counts modulo; a
// receiver of another depth sees the mismatch and Decode refuses it.
func TestAbsoluteDepthTag(t *testing.T) {
	c, err := Config{Kind: Absolute, Width: 16, Depth: 64}.WithDefaults()
	require.NoError(t, err)
	idx, tag := c.Encode(1000, 990)
	require.Equal(t, uint32(1000%64), idx)
	require.Equal(t, uint8(6), tag)
	_, bad := DepthMismatch(tag, 64)
	require.False(t, bad)
	sent, bad := DepthMismatch(tag, 128)
	require.True(t, bad)
	require.Equal(t, uint32(64), sent)
	_, ok := Decode(Absolute, 16, 128, idx, tag, 990)
	require.False(t, ok, "counted modulo 64, decoded modulo 128")
	k, ok := Decode(Absolute, 16, 64, idx, tag, 990)
	require.True(t, ok)
	require.Equal(t, uint32(1000), k)
	sent, bad = DepthMismatch(0, 64)
	require.True(t, bad)
	require.Zero(t, sent, "tag 0 names no depth")
	require.ErrorIs(t, Config{Kind: Absolute, Width: 32, Depth: 1 << 25}.Validate(), ErrConfig, "beyond MaxDepth")
}
