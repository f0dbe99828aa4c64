package mbuf

import (
	"errors"
	"fmt"
	"log/slog"
)

// Limits and defaults of Options.
const (
	MaxFrames        = 1 << 24
	DefaultFrameSize = 2048
	DefaultHeadroom  = 256
	DefaultCacheSize = 512
	MinCacheSize     = 64
)

// Options configure New. Zero values select the documented defaults.
type Options struct {
	Name   string // used in messages
	Frames int    // number of frames, 1..MaxFrames (required)
	// FrameSize is the bytes of each frame: 2048, 4096, 8192 or 16384 (0 →
	// 2048). Frames above a page carry jumbo frames; an AF_XDP port sends
	// and receives them as several UMEM chunks (multi-buffer).
	FrameSize int
	// Headroom is where the packet starts in its frame after an alloc, leaving
	// room to Prepend headers. 0 → 256; must be < FrameSize.
	Headroom int
	// HugePages maps the arena with MAP_HUGETLB (length rounded up to 2 MiB).
	// When that fails a warning is logged and normal pages are used;
	// Stats().HugePages tells which one happened.
	HugePages bool
	// CacheSize is the capacity of each Cache. 0 → 512, or Frames when the
	// pool is smaller; an explicit value must be in [64, Frames].
	CacheSize int
	// Debug tracks each frame's state to catch double and foreign frees.
	Debug  bool
	Logger *slog.Logger // nil → slog.Default()
}

// ErrInvalidOptions is wrapped by every error New returns for bad Options.
var ErrInvalidOptions = errors.New("mbuf: invalid options")

// ErrInUse is wrapped by Close when frames are still allocated.
var ErrInUse = errors.New("mbuf: frames in use")

// ErrLeak is wrapped by CheckLeaks when frames are still allocated.
var ErrLeak = errors.New("mbuf: frames leaked")

type optionsError struct{ msg string }

func (e *optionsError) Error() string { return e.msg }
func (e *optionsError) Unwrap() error { return ErrInvalidOptions }

// withDefaults validates opts and returns a copy with every default filled.
func (opts Options) withDefaults() (Options, error) {
	bad := func(format string, args ...any) (Options, error) {
		return Options{}, &optionsError{fmt.Sprintf("mbuf: pool %q: ", opts.Name) + fmt.Sprintf(format, args...)}
	}
	if opts.Frames < 1 || opts.Frames > MaxFrames {
		return bad("Frames %d out of range (use 1..%d)", opts.Frames, MaxFrames)
	}
	switch opts.FrameSize {
	case 0:
		opts.FrameSize = DefaultFrameSize
	case 2048, 4096, 8192, 16384:
	default:
		return bad("FrameSize %d not supported (use 2048, 4096, 8192 or 16384, or 0 for 2048)", opts.FrameSize)
	}
	switch {
	case opts.Headroom == 0:
		opts.Headroom = DefaultHeadroom
	case opts.Headroom < 0 || opts.Headroom >= opts.FrameSize:
		return bad("Headroom %d out of range (use 1..%d, below FrameSize %d, or 0 for %d)",
			opts.Headroom, opts.FrameSize-1, opts.FrameSize, DefaultHeadroom)
	}
	switch {
	case opts.CacheSize == 0:
		opts.CacheSize = min(DefaultCacheSize, opts.Frames)
	case opts.CacheSize < MinCacheSize || opts.CacheSize > opts.Frames:
		if opts.Frames < MinCacheSize {
			return bad("CacheSize %d out of range: Frames %d is below the minimum cache size %d (use 0 for a cache of %d)",
				opts.CacheSize, opts.Frames, MinCacheSize, opts.Frames)
		}
		return bad("CacheSize %d out of range (use %d..%d, at most Frames, or 0 for %d)",
			opts.CacheSize, MinCacheSize, opts.Frames, min(DefaultCacheSize, opts.Frames))
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return opts, nil
}
