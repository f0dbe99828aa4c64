package peregrine

import "github.com/peregrine-net/peregrine/core/lcore"

// SidecarIdlePolls is how many idle polls a waiter of an attached
// endpoint runs at most before it parks.
const SidecarIdlePolls = sidecarIdlePolls

// SetSidecarWaitHooks has an attached endpoint call poll on each poll of
// its completion ring by a waiter, and park as a waiter parks for want of
// completions, each with the waiter's op. Set them before any op starts.
func SetSidecarWaitHooks(ep *Endpoint, poll, park func(*Op)) {
	ep.sc.onWaitPoll, ep.sc.onIdlePark = poll, park
}

// SidecarAhead reports whether an attached connection has a Recv posted
// ahead (aheadOut), and the buffers of its endpoint's channel taken and
// the ops its client counts in flight.
func SidecarAhead(c *Conn) (out bool, taken int, busy int64) {
	sc := c.c.sc
	sc.amu.Lock()
	out = sc.aheadOut
	sc.amu.Unlock()
	return out, sc.s.cl.BuffersTaken(), sc.s.cl.Busy()
}

// LoopStats returns the counters of an in-process endpoint's poll loop.
func LoopStats(ep *Endpoint) lcore.Stats { return ep.e.loop.Stats() }

// SidecarBell reports whether an attached endpoint has its channel's
// bell, and whether the channel's header says the appliance's loop sleeps.
func SidecarBell(ep *Endpoint) (has, asleep bool) {
	cl := ep.sc.cl
	return cl.HasBell(), cl.Ch.Asleep()
}

// LoopAsleep reports whether an endpoint's loop sleeps, or has said it is
// about to (lcore.Loop.Asleep).
func LoopAsleep(ep *Endpoint) bool { return ep.e.loop.Asleep() }
