package mbuf

import "fmt"

// Frame states tracked in Debug mode. A frame on a cache's stack is free.
const (
	stateFree uint32 = iota
	stateAllocated
)

// What values of DebugError.
const (
	whatDoubleFree  = "double free"
	whatForeign     = "free of foreign handle"
	whatStoreBroken = "allocation of a non-free frame"
)

// DebugError is the panic value of a misuse caught in Debug mode.
type DebugError struct {
	Pool   string
	Handle Handle
	// What is "double free" (the frame is already free), "free of foreign
	// handle" (Handle >= Frames) or "allocation of a non-free frame" (the
	// free store is corrupt, e.g. after misuse without Debug).
	What string
}

func (e *DebugError) Error() string {
	if e.What == whatForeign {
		return fmt.Sprintf("mbuf: free of foreign handle %d in pool %q", e.Handle, e.Pool)
	}
	return fmt.Sprintf("mbuf: %s of handle %d in pool %q", e.What, e.Handle, e.Pool)
}

// markAllocated records that the frames of hs left the free store. The
// compare-and-swap (rather than a plain store) keeps concurrent misuse from
// two goroutines detectable and race-clean.
func (p *Pool) markAllocated(hs []Handle) {
	for _, h := range hs {
		if !p.state[h].CompareAndSwap(stateFree, stateAllocated) {
			panic(&DebugError{Pool: p.name, Handle: h, What: whatStoreBroken})
		}
	}
}

// markFree records that the frames of hs are being freed, or panics with a
// *DebugError leaving every frame of hs as it was: a batch with one bad
// handle frees nothing.
func (p *Pool) markFree(hs []Handle) {
	for i, h := range hs {
		what := ""
		switch {
		case uint64(h) >= uint64(p.frames):
			what = whatForeign
		case !p.state[h].CompareAndSwap(stateAllocated, stateFree):
			what = whatDoubleFree
		}
		if what != "" {
			for _, done := range hs[:i] {
				p.state[done].Store(stateAllocated)
			}
			panic(&DebugError{Pool: p.name, Handle: h, What: what})
		}
	}
}
