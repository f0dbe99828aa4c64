package mcsq

import "github.com/peregrine-net/peregrine/core/rt/txn"

// SetGenerations sets every slot's generation of q, as after that many
// posts to each (a wrap is 2^32 posts away).
func SetGenerations(q *Queue, g uint32) {
	for i := range q.slots {
		q.slots[i].gen = g
	}
}

// SetForeign sets Options.Foreign of an engine made elsewhere (before its
// loop runs).
func SetForeign(e *Engine, f func(*txn.Completion)) { e.opts.Foreign = f }
