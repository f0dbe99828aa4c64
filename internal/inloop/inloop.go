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
