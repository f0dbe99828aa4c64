// Package inloop lets the appliance's sidecar server run its poll on an
// endpoint's own poll loop without the public package exporting a way to
// put arbitrary work on a loop: the module root sets Attach, host calls it.
// Work on a loop must never block: a poll that waits stalls the transport.
package inloop

// Attach runs poll on the poll loop of ep (a *peregrine.Endpoint) after
// each of the loop's own polls, until detach is called; detach returns once
// the loop no longer runs poll (or has ended). poll's return counts as work
// for the loop's idle policy. An error means ep has no loop to run it (a
// sidecar endpoint, or a closed one): the caller polls on its own.
var Attach func(ep any, poll func() int) (detach func(), err error)

// Bell gives what lets another process wake the poll loop of ep when it
// sleeps: asleep reports whether the loop sleeps or is about to (for the
// poll to mirror where that process reads it, before it looks at its
// rings), wakeOn makes a descriptor (an eventfd the process writes) end
// the loop's sleeps until remove. An error means the loop has none: its
// callers poll (PollCaller).
var Bell func(ep any) (asleep func() bool, wakeOn func(fd int) (remove func(), err error), err error)
