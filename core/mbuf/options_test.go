package mbuf

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOptionsValidation(t *testing.T) {
	cases := []struct {
		name  string
		opts  Options
		field string // must appear in the error
		value string // the bad value, must appear too
	}{
		{"no frames", Options{}, "Frames", "0"},
		{"negative frames", Options{Frames: -1}, "Frames", "-1"},
		{"too many frames", Options{Frames: MaxFrames + 1}, "Frames", "16777217"},
		{"odd frame size", Options{Frames: 128, FrameSize: 3000}, "FrameSize", "3000"},
		{"small frame size", Options{Frames: 128, FrameSize: 1024}, "FrameSize", "1024"},
		{"negative headroom", Options{Frames: 128, Headroom: -1}, "Headroom", "-1"},
		{"headroom fills frame", Options{Frames: 128, Headroom: 2048}, "Headroom", "2048"},
		{"headroom fills big frame", Options{Frames: 128, FrameSize: 4096, Headroom: 5000}, "Headroom", "5000"},
		{"cache too small", Options{Frames: 1024, CacheSize: 63}, "CacheSize", "63"},
		{"negative cache", Options{Frames: 1024, CacheSize: -5}, "CacheSize", "-5"},
		{"cache above frames", Options{Frames: 100, CacheSize: 101}, "CacheSize", "101"},
		{"explicit cache on tiny pool", Options{Frames: 10, CacheSize: 64}, "CacheSize", "64"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Name = "opts"
			p, err := New(tc.opts)
			require.Nil(t, p)
			require.Error(t, err)
			require.ErrorIs(t, err, ErrInvalidOptions)
			require.Contains(t, err.Error(), tc.field)
			require.Contains(t, err.Error(), tc.value)
			require.Contains(t, err.Error(), `"opts"`)
			require.Contains(t, err.Error(), "use ", "the error should say how to fix it")
		})
	}
}

func TestOptionsDefaults(t *testing.T) {
	p := newTestPool(t, Options{Frames: 1000})
	require.Equal(t, 2048, p.FrameSize())
	require.Equal(t, 256, p.Headroom())
	require.Equal(t, 512, p.cacheSize)
	require.Equal(t, 1000, p.Frames())
	require.Len(t, p.Arena(), 1000*2048)

	small := newTestPool(t, Options{Frames: 10})
	require.Equal(t, 10, small.cacheSize, "the default cache shrinks to a small pool")

	big := newTestPool(t, Options{Frames: 64, FrameSize: 4096, Headroom: 4095, CacheSize: 64})
	require.Equal(t, 4096, big.FrameSize())
	require.Equal(t, 4095, big.Headroom())
	require.Len(t, big.Arena(), 64*4096)

	one, err := New(Options{Frames: 1})
	require.False(t, errors.Is(err, ErrInvalidOptions))
	require.NoError(t, err)
	require.NoError(t, one.Close())
}

// newTestPool makes a pool that must be empty again (no leaks) when the test
// ends, and closes it.
func newTestPool(t testing.TB, opts Options) *Pool {
	t.Helper()
	if opts.Name == "" {
		opts.Name = t.Name()
	}
	p, err := New(opts)
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, c := range *p.caches.Load() {
			c.Flush()
		}
		require.NoError(t, p.CheckLeaks())
		require.NoError(t, p.Close())
	})
	return p
}
