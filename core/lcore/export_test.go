package lcore

import (
	"time"

	"github.com/peregrine-net/peregrine/core/clock"
)

// Iterate exposes one loop iteration to the tests: it must not allocate.
func (l *Loop) Iterate() int { return l.iterate() }

// Counts returns the loop goroutine's own counters (exact after Iterate).
func (l *Loop) Counts() Stats { return l.count }

// Policy returns the loop's idle policy, its defaults filled in.
func (l *Loop) Policy() IdlePolicy { return l.idle }

// TID returns the pinned loop's thread id (0 before it runs).
func (l *Loop) TID() int32 { return l.tid.Load() }

// SleepLength is the loop's next sleep at now, its stages' deadlines
// applied.
func (l *Loop) SleepLength(now clock.Time) time.Duration { return l.sleepLength(now) }

// When and how often a spinning adaptive loop yields.
const (
	SpinProbeAfter = spinProbeAfter
	SpinYieldEvery = spinYieldEvery
)
