package mbuf

import (
	"errors"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// panicValue runs f and returns what it panicked with (nil if it did not).
func panicValue(f func()) (v any) {
	defer func() { v = recover() }()
	f()
	return nil
}

func requireDebugPanic(t *testing.T, what string, h Handle, f func()) {
	t.Helper()
	v := panicValue(f)
	require.NotNil(t, v, "expected a panic")
	err, ok := v.(error)
	require.True(t, ok, "panic value %v is not an error", v)
	var de *DebugError
	require.True(t, errors.As(err, &de), "panic value %T is not a *DebugError", v)
	require.Equal(t, what, de.What)
	require.Equal(t, h, de.Handle)
	require.Equal(t, "dbg", de.Pool)
}

func TestDebugDoubleFree(t *testing.T) {
	p := newTestPool(t, Options{Name: "dbg", Frames: 128, CacheSize: 64, Debug: true})
	c := p.NewCache()
	hs := make([]Handle, 3)

	require.Equal(t, 3, p.AllocBulk(hs))
	p.Free(hs)
	require.PanicsWithError(t, `mbuf: double free of handle `+itoa(hs[1])+` in pool "dbg"`, func() { p.Free(hs[1:2]) })

	require.Equal(t, 3, c.AllocBulk(hs))
	c.Free(hs)
	requireDebugPanic(t, "double free", hs[0], func() { c.Free(hs[:1]) })
	requireDebugPanic(t, "double free", hs[2], func() { c.PutBulk(hs[2:]) })

	// The same handle twice in one batch is a double free too, and a batch
	// with a bad handle frees nothing.
	require.Equal(t, 3, c.GetBulk(hs))
	inUse := p.InUse()
	requireDebugPanic(t, "double free", hs[0], func() { c.PutBulk([]Handle{hs[0], hs[1], hs[0]}) })
	requireDebugPanic(t, "double free", hs[1], func() { p.Free([]Handle{hs[1], hs[1]}) })
	require.Equal(t, inUse, p.InUse())
	c.PutBulk(hs) // all three were still allocated
	require.Equal(t, 0, p.InUse())
	require.Equal(t, "mbuf: double free of handle 17 in pool \"x\"", (&DebugError{Pool: "x", Handle: 17, What: "double free"}).Error())
}

func TestDebugForeignHandle(t *testing.T) {
	p := newTestPool(t, Options{Name: "dbg", Frames: 128, CacheSize: 64, Debug: true})
	c := p.NewCache()
	hs := make([]Handle, 2)
	require.Equal(t, 2, c.AllocBulk(hs))
	for _, foreign := range []Handle{128, 1000, NoHandle} {
		require.PanicsWithError(t, `mbuf: free of foreign handle `+itoa(foreign)+` in pool "dbg"`, func() { c.Free([]Handle{hs[0], foreign}) })
		requireDebugPanic(t, "free of foreign handle", foreign, func() { p.Free([]Handle{foreign}) })
		requireDebugPanic(t, "free of foreign handle", foreign, func() { c.PutBulk([]Handle{foreign, hs[1]}) })
	}
	require.Equal(t, 2, p.InUse(), "refused batches free nothing")
	c.Free(hs)
}

// Without Debug a foreign handle is not checked on free, but it can never
// reach memory outside the pool: touching it panics on a bounds check.
func TestForeignHandleWithoutDebugCannotCorrupt(t *testing.T) {
	p := newTestPool(t, Options{Frames: 64})
	foreign := Handle(64)
	require.Panics(t, func() { p.Data(foreign) })
	require.Panics(t, func() { p.Frame(foreign) })
	require.Panics(t, func() { p.Meta(foreign) })
	require.Panics(t, func() { p.Append(foreign, 1) })
	require.Panics(t, func() { p.Prepend(foreign, 1) })

	c := p.NewCache()
	c.PutBulk([]Handle{foreign}) // accepted unchecked: this is the documented cost of Debug off
	hs := make([]Handle, 1)
	require.Equal(t, 1, c.GetBulk(hs))
	require.Equal(t, foreign, hs[0])
	require.Panics(t, func() { p.Data(hs[0]) })
	c.PutBulk(hs)
	require.Panics(t, func() { c.AllocBulk(hs) }, "the metadata reset is bounds-checked")
	c.n = 0 // drop the foreign handle so the pool's books balance again
}

func TestDebugOffSharedOverflowPanics(t *testing.T) {
	p, err := New(Options{Name: "over", Frames: 64})
	require.NoError(t, err)
	defer func() {
		// The books are broken on purpose; only unmap.
		require.NoError(t, unmapArena(p.mapping))
	}()
	hs := make([]Handle, 1)
	require.Equal(t, 1, p.AllocBulk(hs))
	p.Free(hs)
	// Undetected without Debug, but the ring (capacity 64) is already full:
	// the double free surfaces as a panic instead of a silent corruption.
	v := panicValue(func() { p.Free(hs) })
	require.NotNil(t, v)
	require.Contains(t, v.(error).Error(), "shared store overflow")
}

func itoa(h Handle) string { return strconv.FormatUint(uint64(h), 10) }
