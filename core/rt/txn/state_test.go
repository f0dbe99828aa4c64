package txn

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Every legal move is accepted and leaves no count; every other move
// between two different states is caught: a panic under test, a count in
// production (and the move is still made, so the endpoint goes on).
func TestIllegalMoveIsCaught(t *testing.T) {
	legal := map[[2]xstate]bool{
		{initActive, initStopped}: true, {initActive, initDone}: true, {initActive, initCompleted}: true,
		{initStopped, initDone}: true, {initStopped, initCompleted}: true,
		{initDone, initCompleted}:        true,
		{targetAdmitted, targetReleased}: true, {targetAdmitted, targetFailed}: true,
		{targetReleased, targetFailed}: true,
	}
	e := &Endpoint{}
	defer func(v bool) { panicOnIllegalMove = v }(panicOnIllegalMove)
	for from := stateFree; from < numStates; from++ {
		for to := stateFree; to < numStates; to++ {
			x := &xact{state: from}
			if from == to || legal[[2]xstate{from, to}] {
				panicOnIllegalMove = true
				require.NotPanics(t, func() { e.setState(x, to) }, "%v → %v", from, to)
				require.Equal(t, to, x.state)
				continue
			}
			panicOnIllegalMove = true
			require.Panics(t, func() { e.setState(x, to) }, "%v → %v", from, to)
			panicOnIllegalMove = false
			x.state = from
			before := e.cnt.own[cIllegalMoves]
			e.setState(x, to)
			require.Equal(t, before+1, e.cnt.own[cIllegalMoves], "%v → %v", from, to)
			require.Equal(t, to, x.state)
		}
	}
}

// The free rule: a target context goes only when it holds nothing, and a
// pull it serves (not failed) has sent all its data.
func TestTargetFreeRule(t *testing.T) {
	base := func() xact {
		return xact{role: roleTarget, state: targetReleased, kind: OpPull, pkts: 2, sentPkts: 2}
	}
	x := base()
	require.True(t, x.freeable())
	holds := map[string]func(*xact){
		"rsnHeld":    func(x *xact) { x.rsnHeld = true },
		"ssnHeld":    func(x *xact) { x.ssnHeld = true },
		"grantQ":     func(x *xact) { x.grantQ = true },
		"inSched":    func(x *xact) { x.inSched = true },
		"unresolved": func(x *xact) { x.unresolved = 1 },
		"notice":     func(x *xact) { x.notice = noticeOut },
	}
	for name, hold := range holds {
		for _, st := range []xstate{targetAdmitted, targetReleased, targetFailed} {
			x := base()
			x.state = st
			hold(&x)
			require.False(t, x.freeable(), "%s in %v", name, st)
		}
	}
	x = base()
	x.sentPkts = 1
	require.False(t, x.freeable(), "a pull still serving its data")
	x.state = targetFailed
	require.True(t, x.freeable(), "a failed pull sends no more")
	x = base()
	x.kind, x.sentPkts = OpPush, 0
	require.True(t, x.freeable(), "a released push")
}
