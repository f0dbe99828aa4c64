package lcore_test

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/lcore"
)

// scriptStage reports one unit of work for its first `work` polls, then none.
// When it has seen `signalAfter` idle polls it closes reached (once). Its
// fields are written by the loop goroutine and read by the test after Wait.
type scriptStage struct {
	name        string
	work        int
	signalAfter int
	reached     chan struct{}
	onPoll      func(now clock.Time)

	polls, idlePolls int
	lastNow          clock.Time
}

func newScript(name string, work, signalAfter int) *scriptStage {
	return &scriptStage{name: name, work: work, signalAfter: signalAfter, reached: make(chan struct{})}
}

func (s *scriptStage) Name() string { return s.name }

func (s *scriptStage) Poll(now clock.Time) int {
	s.polls++
	s.lastNow = now
	if s.onPoll != nil {
		s.onPoll(now)
	}
	if s.polls <= s.work {
		return 1
	}
	s.idlePolls++
	if s.idlePolls == s.signalAfter {
		close(s.reached)
	}
	return 0
}

// stopperStage is a scriptStage with a Stop hook.
type stopperStage struct {
	*scriptStage
	stops  atomic.Int32
	stopAt clock.Time
}

func (s *stopperStage) Stop(now clock.Time) {
	s.stops.Add(1)
	s.stopAt = now
}

type idleStage struct{ polls int }

func (s *idleStage) Name() string        { return "idle" }
func (s *idleStage) Poll(clock.Time) int { s.polls++; return 0 }

func mustNew(t testing.TB, opts lcore.Options) *lcore.Loop {
	t.Helper()
	l, err := lcore.New(opts)
	require.NoError(t, err)
	return l
}

func allowedCPUs(t testing.TB) unix.CPUSet {
	t.Helper()
	var set unix.CPUSet
	require.NoError(t, unix.SchedGetaffinity(0, &set))
	return set
}

// TestStatsAddUpInEveryIdleMode runs a stage that works N times then idles,
// in each idle mode, stops the loop once the stage has idled enough, and
// checks the loop's counters against what the stages saw.
func TestStatsAddUpInEveryIdleMode(t *testing.T) {
	const work, spin, idleBeyondSpin = 1000, 5, 20
	for _, mode := range []lcore.IdleMode{lcore.IdleBusy, lcore.IdleYield, lcore.IdleSleep} {
		t.Run(mode.String(), func(t *testing.T) {
			script := newScript("script", work, spin+idleBeyondSpin)
			idle := &idleStage{}
			l := mustNew(t, lcore.Options{
				Name:   "stats",
				CPU:    -1,
				Idle:   lcore.IdlePolicy{Mode: mode, SpinPolls: spin, SleepMin: time.Microsecond, SleepMax: 4 * time.Microsecond},
				Stages: []lcore.Stage{script, idle},
			})
			require.NoError(t, l.Start())
			<-script.reached
			l.Stop()
			require.NoError(t, l.Wait())

			st := l.Stats()
			require.Equal(t, uint64(script.polls), st.Polls, "one Poll per stage per iteration")
			require.Equal(t, script.polls, idle.polls)
			require.Equal(t, uint64(work), st.Work)
			require.Equal(t, uint64(script.polls-work), st.IdlePolls)
			require.GreaterOrEqual(t, st.IdlePolls, uint64(spin+idleBeyondSpin))
			backOffs := st.IdlePolls - spin // idle iterations after the spin phase
			switch mode {
			case lcore.IdleBusy:
				require.Zero(t, st.Yields)
				require.Zero(t, st.Sleeps)
			case lcore.IdleYield:
				require.Equal(t, backOffs, st.Yields)
				require.Equal(t, backOffs/16, st.GoYields, "an unpinned loop yields to Go every 16th idle yield")
				require.Zero(t, st.Sleeps)
			case lcore.IdleSleep:
				require.Zero(t, st.Yields)
				require.Equal(t, backOffs, st.Sleeps)
			}
		})
	}
}

// gatedStage works until open is set, then idles; it closes reached after
// idle idle polls, and counts its first poll in started.
type gatedStage struct {
	open    *atomic.Bool
	started *atomic.Int32
	polls   int
	idle    int
	reached chan struct{}
}

func (s *gatedStage) Name() string { return "gated" }

func (s *gatedStage) Poll(clock.Time) int {
	if s.polls++; s.polls == 1 {
		s.started.Add(1)
	}
	if !s.open.Load() {
		return 1
	}
	if s.idle--; s.idle == 0 {
		close(s.reached)
	}
	return 0
}

// TestPinnedYieldGoesToGoOnlyWhenLoopsHoldEveryPOrCPU: a pinned loop's
// idle yield goes to Go's scheduler (runtime.Gosched, costly on a locked
// thread) every 16th time only while pinned loops hold every P or every
// CPU of the process; with a P and a CPU to spare, the OS's yield alone.
func TestPinnedYieldGoesToGoOnlyWhenLoopsHoldEveryPOrCPU(t *testing.T) {
	allowed := allowedCPUs(t)
	var cpus []int
	for c := range 1024 {
		if allowed.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	require.NotEmpty(t, cpus, "this process may run on no CPU")
	for _, c := range []struct {
		name  string
		loops int // pinned loops, on the first allowed CPUs
		procs int // GOMAXPROCS
		goes  bool
	}{
		{"a spare P and CPU", 1, runtime.NumCPU() + 1, false},
		{"every P pinned", 1, 1, true},
		{"every CPU pinned", runtime.NumCPU(), runtime.NumCPU() + 1, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.loops > len(cpus) || !c.goes && runtime.NumCPU() < 2 || c.loops > 16 {
				t.Skipf("needs %d pinned loops (at most 16) on CPUs this process may use, and a CPU to spare without a Go yield; it may use %d", c.loops, len(cpus))
			}
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(c.procs))
			const idle = 200
			var open atomic.Bool
			var started atomic.Int32
			var g lcore.Group
			var stages []*gatedStage
			for i := range c.loops {
				s := &gatedStage{open: &open, started: &started, idle: idle, reached: make(chan struct{})}
				stages = append(stages, s)
				g.Add(mustNew(t, lcore.Options{Name: fmt.Sprintf("pinned%d", i), CPU: cpus[i], Idle: lcore.IdlePolicy{Mode: lcore.IdleYield, SpinPolls: 1}, Stages: []lcore.Stage{s}}))
			}
			require.NoError(t, g.StartAll())
			for started.Load() < int32(c.loops) { // every loop pinned and counted before any idles
				runtime.Gosched()
			}
			open.Store(true)
			for _, s := range stages {
				<-s.reached
			}
			g.StopAll()
			require.NoError(t, g.WaitAll())
			for _, l := range g.Loops() {
				st := l.Stats()
				require.GreaterOrEqual(t, st.Yields, uint64(idle-1))
				if c.goes {
					require.Equal(t, st.Yields/16, st.GoYields, "every 16th idle yield is Go's")
				} else {
					require.Zero(t, st.GoYields, "the OS's yield alone")
				}
			}
		})
	}
}

func TestStatsArePublishedWhileRunning(t *testing.T) {
	busy := newScript("busy", 1<<62, 0)
	l := mustNew(t, lcore.Options{CPU: -1, Stages: []lcore.Stage{busy}})
	require.NoError(t, l.Start())
	for l.Stats().Polls < 1024 { // readable from here, under -race, while the loop runs
		runtime.Gosched()
	}
	l.Stop()
	require.NoError(t, l.Wait())
	st := l.Stats()
	require.Equal(t, uint64(busy.polls), st.Polls, "exact after Wait")
	require.Equal(t, st.Polls, st.Work)
}

func TestStopWakesASleepingLoop(t *testing.T) {
	script := newScript("sleeper", 0, 2) // its 2nd idle poll is followed by a sleep
	l := mustNew(t, lcore.Options{
		CPU:    -1,
		Idle:   lcore.IdlePolicy{Mode: lcore.IdleSleep, SpinPolls: 1, SleepMin: time.Hour, SleepMax: time.Hour},
		Stages: []lcore.Stage{script},
	})
	require.NoError(t, l.Start())
	<-script.reached
	l.Stop() // if Stop did not wake it, Wait would block for an hour
	require.NoError(t, l.Wait())
	require.Equal(t, uint64(1), l.Stats().Sleeps)
	require.Equal(t, 2, script.polls)
}

func TestStopFromInsideAStage(t *testing.T) {
	var l *lcore.Loop
	script := newScript("self-stopper", 10, 1)
	script.onPoll = func(clock.Time) {
		if script.polls == 5 {
			l.Stop()
			l.Stop() // idempotent
		}
	}
	l = mustNew(t, lcore.Options{CPU: -1, Stages: []lcore.Stage{script}})
	require.NoError(t, l.Start())
	require.NoError(t, l.Wait())
	require.Equal(t, 5, script.polls, "the loop stops after the iteration that called Stop")
	l.Stop()
}

func TestPinToCPU0(t *testing.T) {
	before := allowedCPUs(t)
	if !before.IsSet(0) {
		t.Skip("cpu 0 is not in this process's allowed set")
	}
	var inside unix.CPUSet
	var insideErr error
	script := newScript("affinity", 0, 1)
	script.onPoll = func(clock.Time) {
		if script.polls == 1 {
			insideErr = unix.SchedGetaffinity(0, &inside) // this thread's mask
		}
	}
	l := mustNew(t, lcore.Options{Name: "pinned", CPU: 0, Stages: []lcore.Stage{script}})
	require.Equal(t, 0, l.CPU())
	require.NoError(t, l.Start())
	<-script.reached
	l.Stop()
	require.NoError(t, l.Wait())
	require.NoError(t, insideErr)
	require.Equal(t, 1, inside.Count(), "pinned to exactly one cpu")
	require.True(t, inside.IsSet(0), "pinned to cpu 0")

	require.Equal(t, before, allowedCPUs(t), "the pinned thread exited with its goroutine; ours is untouched")
}

func TestUnpinnedLoopKeepsTheProcessMask(t *testing.T) {
	before := allowedCPUs(t)
	var inside unix.CPUSet
	script := newScript("unpinned", 0, 1)
	script.onPoll = func(clock.Time) {
		if script.polls == 1 {
			_ = unix.SchedGetaffinity(0, &inside)
		}
	}
	l := mustNew(t, lcore.Options{CPU: -1, Stages: []lcore.Stage{script}})
	require.Equal(t, "lcore", l.Name())
	require.NoError(t, l.Start())
	<-script.reached
	l.Stop()
	require.NoError(t, l.Wait())
	require.Equal(t, before, inside)
}

func TestNewRejectsBadOptions(t *testing.T) {
	stage := []lcore.Stage{&idleStage{}}
	allowed := allowedCPUs(t)
	var list []int
	for c := range lcore.MaxCPU + 1 {
		if allowed.IsSet(c) {
			list = append(list, c)
		}
	}
	for _, tc := range []struct {
		name string
		opts lcore.Options
		want []string
	}{
		{"cpu 4096", lcore.Options{CPU: 4096, Stages: stage}, []string{"Options.CPU 4096", "allowed CPU set " + lcore.FormatCPUList(list), "-1"}},
		{"cpu beyond machine", lcore.Options{CPU: lcore.MaxCPU, Stages: stage}, []string{fmt.Sprintf("Options.CPU %d", lcore.MaxCPU)}},
		{"cpu -2", lcore.Options{CPU: -2, Stages: stage}, []string{"Options.CPU -2 is invalid"}},
		{"no stages", lcore.Options{CPU: -1}, []string{"Options.Stages is empty"}},
		{"nil stage", lcore.Options{CPU: -1, Stages: []lcore.Stage{&idleStage{}, nil}}, []string{"Options.Stages[1] is nil"}},
		{"idle mode", lcore.Options{CPU: -1, Stages: stage, Idle: lcore.IdlePolicy{Mode: 7}}, []string{"Options.Idle.Mode 7"}},
		{"spin", lcore.Options{CPU: -1, Stages: stage, Idle: lcore.IdlePolicy{SpinPolls: -1}}, []string{"SpinPolls -1"}},
		{"negative sleep", lcore.Options{CPU: -1, Stages: stage, Idle: lcore.IdlePolicy{SleepMin: -time.Second}}, []string{"negative"}},
		{"min > max", lcore.Options{CPU: -1, Stages: stage, Idle: lcore.IdlePolicy{SleepMin: time.Second, SleepMax: time.Millisecond}}, []string{"SleepMin 1s exceeds SleepMax 1ms"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := lcore.New(tc.opts)
			require.Error(t, err)
			for _, w := range tc.want {
				require.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestStartTwiceAndWaitBeforeStart(t *testing.T) {
	script := newScript("once", 0, 1)
	l := mustNew(t, lcore.Options{CPU: -1, Stages: []lcore.Stage{script}})
	require.ErrorIs(t, l.Wait(), lcore.ErrNotStarted)
	require.NoError(t, l.Start())
	err := l.Start()
	require.ErrorIs(t, err, lcore.ErrAlreadyStarted)
	require.Contains(t, err.Error(), `"lcore"`)
	<-script.reached
	l.Stop()
	require.NoError(t, l.Wait())
	require.NoError(t, l.Wait(), "Wait may be called again")
}

var errStageBroke = errors.New("stage broke")

type panicStage struct{ polls int }

func (s *panicStage) Name() string { return "fragile" }
func (s *panicStage) Poll(clock.Time) int {
	s.polls++
	if s.polls == 3 {
		panic(fmt.Errorf("poll %d: %w", s.polls, errStageBroke))
	}
	return 1
}

func TestStagePanicIsReturnedByWait(t *testing.T) {
	before := &stopperStage{scriptStage: newScript("before", 1<<30, 0)}
	fragile := &panicStage{}
	l := mustNew(t, lcore.Options{Name: "rx0", CPU: -1, Stages: []lcore.Stage{before, fragile}})
	require.NoError(t, l.Start())
	err := l.Wait() // no Stop: the panic ends the loop
	require.Error(t, err)
	require.Contains(t, err.Error(), `stage "fragile" panicked`)
	require.Contains(t, err.Error(), `lcore "rx0"`)
	var sp *lcore.StagePanic
	require.ErrorAs(t, err, &sp)
	require.Equal(t, "fragile", sp.Stage)
	require.Equal(t, "rx0", sp.Loop)
	require.NotEmpty(t, sp.Stack)
	require.ErrorIs(t, err, errStageBroke, "an error panic value is unwrapped")
	require.Equal(t, int32(1), before.stops.Load(), "the other stages are still stopped")
	require.Equal(t, uint64(2), l.Stats().Polls, "two full iterations completed before the panic")
}

type panickyStopper struct{ idleStage }

func (s *panickyStopper) Name() string    { return "bad-stop" }
func (s *panickyStopper) Stop(clock.Time) { panic("cannot drain") }

func TestStopHookCalledOnceWithLoopTime(t *testing.T) {
	virt := clock.NewVirtual(1000)
	a := &stopperStage{scriptStage: newScript("a", 0, 3)}
	bad := &panickyStopper{}
	c := &stopperStage{scriptStage: newScript("c", 0, 0)}
	a.onPoll = func(clock.Time) { virt.Advance(10) }
	l := mustNew(t, lcore.Options{CPU: -1, Clock: virt, Stages: []lcore.Stage{a, bad, c}})
	require.NoError(t, l.Start())
	<-a.reached
	l.Stop()
	err := l.Wait()
	var sp *lcore.StagePanic
	require.ErrorAs(t, err, &sp, "a panicking Stop hook is reported")
	require.Equal(t, "bad-stop", sp.Stage)
	require.Equal(t, int32(1), a.stops.Load())
	require.Equal(t, int32(1), c.stops.Load(), "a panicking hook does not keep later hooks from running")
	require.Equal(t, virt.Now(), a.stopAt, "Stop gets the loop clock's time")
	require.Equal(t, a.lastNow, c.lastNow, "every stage sees the same time in an iteration")
	require.Equal(t, clock.Time(1000+10*(a.polls-1)), a.lastNow)
}

func TestStopBeforeStartRunsNoIteration(t *testing.T) {
	s := &stopperStage{scriptStage: newScript("s", 0, 0)}
	l := mustNew(t, lcore.Options{CPU: -1, Stages: []lcore.Stage{s}})
	l.Stop()
	require.NoError(t, l.Start())
	require.NoError(t, l.Wait())
	require.Zero(t, s.polls)
	require.Equal(t, int32(1), s.stops.Load())
}

func TestGroup(t *testing.T) {
	var g lcore.Group
	var scripts []*stopperStage
	cpus := []int{-1, -1}
	if allowed := allowedCPUs(t); allowed.IsSet(0) {
		cpus = append(cpus, 0)
	}
	for i, cpu := range cpus {
		s := &stopperStage{scriptStage: newScript(fmt.Sprintf("s%d", i), 100, 10)}
		scripts = append(scripts, s)
		g.Add(mustNew(t, lcore.Options{Name: fmt.Sprintf("g%d", i), CPU: cpu, Idle: lcore.IdlePolicy{Mode: lcore.IdleYield}, Stages: []lcore.Stage{s}}))
	}
	require.Len(t, g.Loops(), len(cpus))
	require.NoError(t, g.StartAll())
	for _, s := range scripts {
		<-s.reached
	}
	g.StopAll()
	require.NoError(t, g.WaitAll())
	var polls uint64
	for _, s := range scripts {
		require.Equal(t, int32(1), s.stops.Load())
		polls += uint64(s.polls)
	}
	sum := g.Stats()
	require.Equal(t, polls, sum.Polls)
	require.Equal(t, uint64(100*len(cpus)), sum.Work)

	require.ErrorIs(t, g.StartAll(), lcore.ErrAlreadyStarted, "loops run once")
}

func TestGroupStartAllFailureStopsTheStarted(t *testing.T) {
	first := &stopperStage{scriptStage: newScript("first", 1<<30, 0)}
	l1 := mustNew(t, lcore.Options{CPU: -1, Stages: []lcore.Stage{first}})
	l2 := mustNew(t, lcore.Options{CPU: -1, Stages: []lcore.Stage{&idleStage{}}})
	require.NoError(t, l2.Start()) // makes the group's second Start fail
	var g lcore.Group
	g.Add(l1)
	g.Add(l2)
	err := g.StartAll()
	require.ErrorIs(t, err, lcore.ErrAlreadyStarted)
	require.Equal(t, int32(1), first.stops.Load(), "StartAll stopped and waited for the loop it had started")
	l2.Stop()
	require.NoError(t, l2.Wait())
}

func TestGroupWaitAllJoinsErrors(t *testing.T) {
	var g lcore.Group
	g.Add(mustNew(t, lcore.Options{Name: "ok", CPU: -1, Stages: []lcore.Stage{&idleStage{}}}))
	g.Add(mustNew(t, lcore.Options{Name: "broken", CPU: -1, Stages: []lcore.Stage{&panicStage{}}}))
	require.NoError(t, g.StartAll())
	require.Error(t, g.Loops()[1].Wait(), "the broken loop ends by itself")
	g.StopAll()
	err := g.WaitAll()
	require.ErrorIs(t, err, errStageBroke)
	require.Contains(t, err.Error(), `lcore "broken"`)
}

func TestIdleModeNames(t *testing.T) {
	for _, m := range []lcore.IdleMode{lcore.IdleBusy, lcore.IdleYield, lcore.IdleSleep, lcore.IdleAdaptive} {
		got, err := lcore.ParseIdleMode(m.String())
		require.NoError(t, err)
		require.Equal(t, m, got)
	}
	require.Equal(t, "busy", lcore.IdleBusy.String())
	require.Equal(t, "IdleMode(9)", lcore.IdleMode(9).String())
	_, err := lcore.ParseIdleMode("spin")
	require.ErrorContains(t, err, `unknown idle mode "spin" (use busy, yield, sleep or adaptive)`)
}

// switchStage reports work units of work on each poll.
type switchStage struct{ work int }

func (s *switchStage) Name() string        { return "switch" }
func (s *switchStage) Poll(clock.Time) int { return s.work }

// TestAdaptiveSpinsThenYieldsThenSleeps walks an adaptive loop through a
// quiet spell on a virtual clock: it spins until SpinFor after the last
// work, yields until YieldFor, sleeps after, and work starts it over.
func TestAdaptiveSpinsThenYieldsThenSleeps(t *testing.T) {
	vc := clock.NewVirtual(clock.Time(time.Second))
	s := &switchStage{work: 1}
	l := mustNew(t, lcore.Options{CPU: -1, Clock: vc, Stages: []lcore.Stage{s}, Idle: lcore.IdlePolicy{
		Mode: lcore.IdleAdaptive, SpinFor: 10 * time.Microsecond, YieldFor: 100 * time.Microsecond,
		SleepMin: time.Nanosecond, SleepMax: time.Nanosecond,
	}})
	at := func(d time.Duration) lcore.Stats {
		vc.Set(clock.Time(time.Second + d))
		l.Iterate()
		return l.Counts()
	}
	at(0)
	s.work = 0
	for _, step := range []struct {
		at             time.Duration
		yields, sleeps uint64
	}{
		{5 * time.Microsecond, 0, 0},   // spinning
		{9 * time.Microsecond, 0, 0},   // still
		{10 * time.Microsecond, 1, 0},  // yielding
		{99 * time.Microsecond, 2, 0},  // still
		{100 * time.Microsecond, 2, 1}, // sleeping
		{5 * time.Millisecond, 2, 2},   // for good
	} {
		st := at(step.at)
		require.Equal(t, step.yields, st.Yields, "yields at %v", step.at)
		require.Equal(t, step.sleeps, st.Sleeps, "sleeps at %v", step.at)
	}
	s.work = 1
	at(6 * time.Millisecond)
	s.work = 0
	st := at(6*time.Millisecond + 5*time.Microsecond)
	require.Equal(t, uint64(2), st.Yields, "work starts the spin over")
	st = at(6*time.Millisecond + 50*time.Microsecond)
	require.Equal(t, uint64(3), st.Yields)
	require.Equal(t, uint64(2), st.Sleeps)
}

// TestAdaptiveDefaults: zero phases take the documented defaults, and
// phases out of order are refused.
func TestAdaptiveDefaults(t *testing.T) {
	vc := clock.NewVirtual(clock.Time(time.Second))
	s := &switchStage{}
	l := mustNew(t, lcore.Options{CPU: -1, Clock: vc, Stages: []lcore.Stage{s}, Idle: lcore.IdlePolicy{Mode: lcore.IdleAdaptive, SleepMin: time.Nanosecond, SleepMax: time.Nanosecond}})
	// Iterate outside a running loop counts the quiet spell from the
	// clock's zero, so one poll with work starts it.
	s.work = 1
	l.Iterate()
	s.work = 0
	vc.Advance(lcore.DefaultSpinFor - 1)
	l.Iterate()
	require.Zero(t, l.Counts().Yields)
	vc.Advance(1)
	l.Iterate()
	require.Equal(t, uint64(1), l.Counts().Yields)
	vc.Advance(lcore.DefaultYieldFor - lcore.DefaultSpinFor)
	l.Iterate()
	require.Equal(t, uint64(1), l.Counts().Sleeps)

	_, err := lcore.New(lcore.Options{CPU: -1, Stages: []lcore.Stage{s}, Idle: lcore.IdlePolicy{Mode: lcore.IdleAdaptive, SpinFor: time.Millisecond, YieldFor: time.Microsecond}})
	require.ErrorContains(t, err, "SpinFor 1ms exceeds YieldFor 1µs")
	_, err = lcore.New(lcore.Options{CPU: -1, Stages: []lcore.Stage{s}, Idle: lcore.IdlePolicy{Mode: lcore.IdleAdaptive, SpinFor: -1}})
	require.ErrorContains(t, err, "negative")
}

func TestParseCPUList(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []int
		wantErr string
	}{
		{"0", []int{0}, ""},
		{"0,1", []int{0, 1}, ""},
		{"0-3", []int{0, 1, 2, 3}, ""},
		{"0-1,3", []int{0, 1, 3}, ""},
		{" 5 , 2-3 ", []int{2, 3, 5}, ""},
		{"7-7", []int{7}, ""},
		{"1023", []int{1023}, ""},
		{"", nil, "empty cpu list"},
		{"0,,1", nil, `bad item ""`},
		{"0-", nil, `bad item "0-"`},
		{"x", nil, `bad item "x": "x" is not a cpu number`},
		{"1,a-3", nil, `bad item "a-3"`},
		{"-1", nil, `bad item "-1"`},
		{"+1", nil, `bad item "+1"`},
		{"3-1", nil, `bad item "3-1": range runs backwards (write 1-3)`},
		{"0-2,2", nil, `item "2" repeats cpu 2`},
		{"1024", nil, "cpu 1024 is beyond 1023"},
		{"0-1-2", nil, `bad item "0-1-2"`},
	} {
		got, err := lcore.ParseCPUList(tc.in)
		if tc.wantErr != "" {
			require.ErrorContains(t, err, tc.wantErr, "input %q", tc.in)
			continue
		}
		require.NoError(t, err, "input %q", tc.in)
		require.Equal(t, tc.want, got, "input %q", tc.in)
	}
}

func TestFormatCPUList(t *testing.T) {
	require.Equal(t, "", lcore.FormatCPUList(nil))
	require.Equal(t, "0", lcore.FormatCPUList([]int{0}))
	require.Equal(t, "0-3,6,8-9", lcore.FormatCPUList([]int{9, 8, 6, 3, 2, 1, 0, 2}))
	for _, s := range []string{"0", "0-1,3", "2,4,6-10,1000"} {
		cpus, err := lcore.ParseCPUList(s)
		require.NoError(t, err)
		require.Equal(t, s, lcore.FormatCPUList(cpus))
	}
}

func TestIterateDoesNotAllocate(t *testing.T) {
	for _, tc := range []struct {
		idle lcore.IdlePolicy
		runs int
	}{
		{lcore.IdlePolicy{Mode: lcore.IdleBusy}, 1000},
		{lcore.IdlePolicy{Mode: lcore.IdleYield, SpinPolls: 1}, 1000},
		{lcore.IdlePolicy{Mode: lcore.IdleSleep, SpinPolls: 1, SleepMin: time.Nanosecond, SleepMax: time.Nanosecond}, 20},
		// SpinFor and YieldFor of 1 ns: every idle iteration sleeps.
		{lcore.IdlePolicy{Mode: lcore.IdleAdaptive, SpinFor: time.Nanosecond, YieldFor: time.Nanosecond, SleepMin: time.Nanosecond, SleepMax: time.Nanosecond}, 20},
	} {
		t.Run(tc.idle.Mode.String(), func(t *testing.T) {
			s := &idleStage{}
			l := mustNew(t, lcore.Options{CPU: -1, Idle: tc.idle, Stages: []lcore.Stage{s, &idleStage{}}})
			require.Zero(t, testing.AllocsPerRun(tc.runs, func() { l.Iterate() }))
			require.Greater(t, s.polls, tc.runs)
		})
	}
}

type emptyStage struct{}

func (emptyStage) Name() string        { return "empty" }
func (emptyStage) Poll(clock.Time) int { return 0 }

// BenchmarkIterate measures one busy-mode loop iteration over n empty stages,
// clock read included: the fixed cost a pipeline pays per poll.
func BenchmarkIterate(b *testing.B) {
	for _, n := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("stages=%d", n), func(b *testing.B) {
			stages := make([]lcore.Stage, n)
			for i := range stages {
				stages[i] = emptyStage{}
			}
			l := mustNew(b, lcore.Options{CPU: -1, Stages: stages})
			b.ReportAllocs()
			for b.Loop() {
				l.Iterate()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/poll")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/stage")
		})
	}
}

// countdownStage stops its own loop after n polls.
type countdownStage struct {
	left int
	loop *lcore.Loop
}

func (s *countdownStage) Name() string { return "countdown" }
func (s *countdownStage) Poll(clock.Time) int {
	s.left--
	if s.left == 0 {
		s.loop.Stop()
	}
	return 0
}

// BenchmarkLoopBusy runs a real (unpinned) loop goroutine for b.N iterations
// of one empty stage, stop flag check included.
func BenchmarkLoopBusy(b *testing.B) {
	s := &countdownStage{left: b.N}
	l := mustNew(b, lcore.Options{CPU: -1, Stages: []lcore.Stage{s}})
	s.loop = l
	b.ReportAllocs()
	b.ResetTimer()
	require.NoError(b, l.Start())
	require.NoError(b, l.Wait())
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/poll")
	require.Equal(b, uint64(b.N), l.Stats().Polls)
}

// threadMasks returns the affinity of every thread of the process but the
// caller's.
func threadMasks(t *testing.T) map[int]unix.CPUSet {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/task")
	require.NoError(t, err)
	out := map[int]unix.CPUSet{}
	self := unix.Gettid()
	for _, e := range entries {
		tid, err := strconv.Atoi(e.Name())
		require.NoError(t, err)
		var set unix.CPUSet
		if tid == self || unix.SchedGetaffinity(tid, &set) != nil {
			continue
		}
		out[tid] = set
	}
	return out
}

func TestIsolateKeepsOtherThreadsOff(t *testing.T) {
	allowed := allowedCPUs(t)
	if allowed.Count() < 2 {
		t.Skip("needs two allowed CPUs: one for the loop, one for the rest")
	}
	cpu := -1
	for c := range lcore.MaxCPU + 1 {
		if allowed.IsSet(c) {
			cpu = c
		}
	}
	var during map[int]unix.CPUSet
	loopTid := 0
	script := newScript("isolated", 0, 1)
	script.onPoll = func(clock.Time) {
		if script.polls == 1 {
			loopTid = unix.Gettid()
			during = threadMasks(t)
		}
	}
	l := mustNew(t, lcore.Options{Name: "isolated", CPU: cpu, Isolate: true, Stages: []lcore.Stage{script}})
	require.NoError(t, l.Start())
	<-script.reached
	l.Stop()
	require.NoError(t, l.Wait())
	require.NotEmpty(t, during)
	for tid, set := range during {
		// A thread that may run only there keeps it (isolate's rule): an
		// earlier loop's thread, still exiting when a test runs again.
		require.False(t, set.IsSet(cpu) && set.Count() > 1, "thread %d may still run on the loop's cpu %d while it runs", tid, cpu)
	}
	for tid, set := range threadMasks(t) {
		if tid != loopTid && set.Count() > 1 {
			require.True(t, set.IsSet(cpu), "thread %d got cpu %d back when the loop ended", tid, cpu)
		}
	}
	require.Equal(t, allowed, allowedCPUs(t), "the caller's own mask is untouched")
}

// TestThreadCPUSeesASpinningLoop: a pinned busy loop's thread CPU time
// grows while it spins, and an unpinned loop has none to read.
func TestThreadCPUSeesASpinningLoop(t *testing.T) {
	allowed := allowedCPUs(t)
	cpu := 0
	for !allowed.IsSet(cpu) {
		cpu++
	}
	busy := newScript("busy", 1<<62, 0)
	l := mustNew(t, lcore.Options{CPU: cpu, Stages: []lcore.Stage{busy}})
	_, err := l.ThreadCPU()
	require.ErrorContains(t, err, "no thread of its own")
	require.NoError(t, l.Start())
	for l.Stats().Polls < 1<<16 {
		runtime.Gosched()
	}
	first, err := l.ThreadCPU()
	require.NoError(t, err)
	require.Positive(t, first)
	for l.Stats().Polls < 1<<20 {
		runtime.Gosched()
	}
	later, err := l.ThreadCPU()
	require.NoError(t, err)
	l.Stop()
	require.NoError(t, l.Wait())
	require.Greater(t, later, first, "a million polls take CPU time")

	unpinned := mustNew(t, lcore.Options{CPU: -1, Stages: []lcore.Stage{&idleStage{}}})
	_, err = unpinned.ThreadCPU()
	require.Error(t, err)
}

// The zero IdlePolicy, and each zero field, mean the documented
// defaults; a bound given alone moves the other only as far as it must.
func TestIdlePolicyZeroMeansTheDefaults(t *testing.T) {
	defaults := lcore.IdlePolicy{SpinPolls: lcore.DefaultSpinPolls, SleepMin: lcore.DefaultSleepMin, SleepMax: lcore.DefaultSleepMax,
		SpinFor: lcore.DefaultSpinFor, YieldFor: lcore.DefaultYieldFor}
	with := func(mode lcore.IdleMode, sleepMin, sleepMax time.Duration) lcore.IdlePolicy {
		p := defaults
		p.Mode, p.SleepMin, p.SleepMax = mode, sleepMin, sleepMax
		return p
	}
	for _, tc := range []struct {
		name      string
		give, get lcore.IdlePolicy
	}{
		{"zero", lcore.IdlePolicy{}, defaults},
		{"sleep", lcore.IdlePolicy{Mode: lcore.IdleSleep}, with(lcore.IdleSleep, lcore.DefaultSleepMin, lcore.DefaultSleepMax)},
		{"adaptive", lcore.IdlePolicy{Mode: lcore.IdleAdaptive}, with(lcore.IdleAdaptive, lcore.DefaultSleepMin, lcore.DefaultSleepMax)},
		{"short max alone", lcore.IdlePolicy{SleepMax: 20 * time.Microsecond}, with(lcore.IdleBusy, min(lcore.DefaultSleepMin, 20*time.Microsecond), 20*time.Microsecond)},
		{"long min alone", lcore.IdlePolicy{SleepMin: 2 * time.Millisecond}, with(lcore.IdleBusy, 2*time.Millisecond, 2*time.Millisecond)},
	} {
		l := mustNew(t, lcore.Options{CPU: -1, Stages: []lcore.Stage{&idleStage{}}, Idle: tc.give})
		require.Equal(t, tc.get, l.Policy(), tc.name)
	}
}

// steppingClock reads t, moved on by step at every reading: a yield
// between two readings looks step long.
type steppingClock struct {
	t    clock.Time
	step time.Duration
}

func (c *steppingClock) Now() clock.Time {
	c.t = c.t.Add(c.step)
	return c.t
}

// TestAdaptiveYieldsWhereItWouldSpinOnASharedCPU: a yield that took
// SharedYield or longer ran another task on the loop's CPU. One alone (a
// kernel worker that ran once) changes nothing; after SharedRun in a row
// the loop yields where it would spin, until SharedFor after the last,
// and then spins again. A short yield starts the count over.
func TestAdaptiveYieldsWhereItWouldSpinOnASharedCPU(t *testing.T) {
	c := &steppingClock{t: clock.Time(time.Second)}
	s := &switchStage{}
	l := mustNew(t, lcore.Options{CPU: -1, Clock: c, Stages: []lcore.Stage{s}, Idle: lcore.IdlePolicy{
		Mode: lcore.IdleAdaptive, SpinFor: 100 * time.Microsecond, YieldFor: time.Millisecond,
		SleepMin: time.Nanosecond, SleepMax: time.Nanosecond,
	}})
	require.Equal(t, 2, lcore.SharedRun, "the steps below")
	long, short := lcore.SharedYield, time.Duration(0)
	at := func(d time.Duration, work int, step time.Duration) lcore.Stats {
		c.t, c.step, s.work = clock.Time(time.Second+d), step, work
		l.Iterate()
		return l.Counts()
	}
	spins := func(d time.Duration, why string) { // work at d, then an idle poll within SpinFor
		at(d, 1, short)
		before := l.Counts().Yields
		require.Equal(t, before, at(d+50*time.Microsecond, 0, short).Yields, why)
	}
	at(0, 1, short)
	spins(0, "spinning after work")
	at(150*time.Microsecond, 0, long) // a long yield
	at(200*time.Microsecond, 0, short)
	at(250*time.Microsecond, 0, long) // and another, but a short one between
	st := l.Counts()
	require.Equal(t, uint64(3), st.Yields)
	require.Equal(t, uint64(2), st.SharedYields)
	spins(300*time.Microsecond, "long yields apart: the CPU is the loop's")
	at(450*time.Microsecond, 0, long)
	at(500*time.Microsecond, 0, long) // two in a row
	at(time.Millisecond, 1, short)
	st = at(time.Millisecond+50*time.Microsecond, 0, short)
	require.Equal(t, uint64(6), st.Yields, "yielding where it would spin, the CPU being shared")
	require.Equal(t, uint64(4), st.SharedYields)
	spins(12*time.Millisecond, "spinning again SharedFor after the last long yield")
}

// TestPinnedLoopSleepsInTheKernel: a pinned loop's thread has a
// microsecond of timer slack (its sleeps, in the kernel, end when asked
// rather than up to 50 µs later), and Stop ends a pinned loop asleep in
// the kernel once its sleep, a millisecond at most, is over.
func TestPinnedLoopSleepsInTheKernel(t *testing.T) {
	allowed := allowedCPUs(t)
	cpu := 0
	for !allowed.IsSet(cpu) {
		cpu++
	}
	script := newScript("sleeper", 0, 3)
	l := mustNew(t, lcore.Options{
		CPU:    cpu,
		Idle:   lcore.IdlePolicy{Mode: lcore.IdleSleep, SpinPolls: 1, SleepMin: time.Millisecond, SleepMax: time.Millisecond},
		Stages: []lcore.Stage{script},
	})
	require.NoError(t, l.Start())
	<-script.reached // after its second sleep
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/timerslack_ns", l.TID()))
	require.NoError(t, err)
	require.Equal(t, "1000", strings.TrimSpace(string(raw)), "the loop thread's timer slack, ns")
	l.Stop()
	require.NoError(t, l.Wait())
	require.GreaterOrEqual(t, l.Stats().Sleeps, uint64(2))
}

// TestAdaptiveSpinYieldsNowAndThen: an adaptive loop spins without a
// yield until SpinProbeAfter after its work, then yields at every
// SpinYieldEvery-th idle poll and at no other until SpinFor, so a task
// waiting for its CPU runs within microseconds.
func TestAdaptiveSpinYieldsNowAndThen(t *testing.T) {
	vc := clock.NewVirtual(clock.Time(time.Second))
	s := &switchStage{work: 1}
	l := mustNew(t, lcore.Options{CPU: -1, Clock: vc, Stages: []lcore.Stage{s}, Idle: lcore.IdlePolicy{
		Mode: lcore.IdleAdaptive, SpinFor: time.Hour, YieldFor: 2 * time.Hour,
	}})
	l.Iterate()
	s.work = 0
	for i := 1; i <= 3*lcore.SpinYieldEvery; i++ {
		l.Iterate()
	}
	require.Zero(t, l.Counts().Yields, "yields before SpinProbeAfter")
	vc.Advance(lcore.SpinProbeAfter)
	var yields uint64
	for i := 3*lcore.SpinYieldEvery + 1; i <= 6*lcore.SpinYieldEvery; i++ {
		l.Iterate()
		if i%lcore.SpinYieldEvery == 0 {
			yields++
		}
		require.Equal(t, yields, l.Counts().Yields, "yields after %d idle polls", i)
	}
	require.Equal(t, uint64(3), yields)
	require.Zero(t, l.Counts().Sleeps)
}

// deadlineStage reports a deadline (ok false: none).
type deadlineStage struct {
	idleStage
	at clock.Time
	ok bool
}

func (s *deadlineStage) NextDeadline() (clock.Time, bool) { return s.at, s.ok }

// TestSleepEndsByTheEarliestDeadline: a sleeping loop's sleep is cut to
// its stages' earliest deadline ahead of now; one at or before now (work
// the stage could not do yet) and none leave the back-off's length.
func TestSleepEndsByTheEarliestDeadline(t *testing.T) {
	now := clock.Time(time.Second)
	a, b := &deadlineStage{}, &deadlineStage{}
	l := mustNew(t, lcore.Options{CPU: -1, Stages: []lcore.Stage{a, &idleStage{}, b}, Idle: lcore.IdlePolicy{
		Mode: lcore.IdleSleep, SleepMin: time.Millisecond, SleepMax: time.Millisecond,
	}})
	for _, tc := range []struct {
		name   string
		a, b   time.Duration // deadline - now
		aOK    bool
		bOK    bool
		expect time.Duration
	}{
		{"no deadline", 0, 0, false, false, time.Millisecond},
		{"one ahead", 300 * time.Microsecond, 0, true, false, 300 * time.Microsecond},
		{"the earlier of two", 300 * time.Microsecond, 40 * time.Microsecond, true, true, 40 * time.Microsecond},
		{"beyond the sleep", 5 * time.Millisecond, 0, true, false, time.Millisecond},
		{"due already", 0, -time.Microsecond, true, true, time.Millisecond},
		{"due and ahead", -time.Microsecond, 70 * time.Microsecond, true, true, 70 * time.Microsecond},
	} {
		a.at, a.ok = now.Add(tc.a), tc.aOK
		b.at, b.ok = now.Add(tc.b), tc.bOK
		require.Equal(t, tc.expect, l.SleepLength(now), tc.name)
	}
}

// wakeStage offers a pipe's read end as its wake descriptor.
type wakeStage struct {
	idleStage
	fd int
}

func (s *wakeStage) WakeFDs(fds []int) []int { return append(fds, s.fd, -1) }

// TestPinnedSleepWakesOnInput: a pinned loop sleeps in poll(2) on its
// stages' descriptors. While the pipe holds a byte (never read: the
// stage finds no work) the sleeps end on it; an empty pipe ends none.
func TestPinnedSleepWakesOnInput(t *testing.T) {
	allowed := allowedCPUs(t)
	cpu := 0
	for !allowed.IsSet(cpu) {
		cpu++
	}
	var p [2]int
	require.NoError(t, unix.Pipe2(p[:], unix.O_CLOEXEC))
	t.Cleanup(func() { unix.Close(p[0]); unix.Close(p[1]) })
	run := func() lcore.Stats {
		script := newScript("sleeper", 0, 20)
		l := mustNew(t, lcore.Options{
			CPU:    cpu,
			Idle:   lcore.IdlePolicy{Mode: lcore.IdleSleep, SpinPolls: 1, SleepMin: 20 * time.Microsecond, SleepMax: 20 * time.Microsecond},
			Stages: []lcore.Stage{&wakeStage{fd: p[0]}, script},
		})
		require.NoError(t, l.Start())
		<-script.reached
		l.Stop()
		require.NoError(t, l.Wait())
		return l.Stats()
	}
	st := run()
	require.GreaterOrEqual(t, st.Sleeps, uint64(10))
	require.Zero(t, st.InputWakes, "an empty pipe ends no sleep")
	_, err := unix.Write(p[1], []byte{1})
	require.NoError(t, err)
	st = run()
	require.GreaterOrEqual(t, st.Sleeps, uint64(10))
	// A signal (the Go runtime's) may end one first.
	require.GreaterOrEqual(t, 10*st.InputWakes, 9*st.Sleeps, "the readable pipe ends the sleeps (%d of %d)", st.InputWakes, st.Sleeps)
}

// TestDoorbellAnnouncesTheSleep: with Doorbell a loop's first idle
// iteration past its spin only says it will sleep, and the next sleeps;
// work found by that next iteration (enqueued by a producer that read
// the loop awake and did not ring) cancels the sleep.
func TestDoorbellAnnouncesTheSleep(t *testing.T) {
	s := &switchStage{}
	l := mustNew(t, lcore.Options{CPU: -1, Doorbell: true, Stages: []lcore.Stage{s}, Idle: lcore.IdlePolicy{
		Mode: lcore.IdleSleep, SpinPolls: 1, SleepMin: time.Nanosecond, SleepMax: time.Nanosecond,
	}})
	l.Iterate() // spinning
	require.False(t, l.Asleep())
	l.Iterate()
	require.True(t, l.Asleep(), "announced")
	require.Zero(t, l.Counts().Sleeps)
	s.work = 1
	l.Iterate()
	require.False(t, l.Asleep(), "work cancels the sleep")
	require.Zero(t, l.Counts().Sleeps)
	s.work = 0
	l.Iterate()
	l.Iterate()
	require.True(t, l.Asleep())
	l.Iterate()
	require.Equal(t, uint64(1), l.Counts().Sleeps)
	require.False(t, l.Asleep(), "awake after the sleep")
}

// TestRingWakesASleepingLoop: Ring ends a sleep — a pinned loop's on its
// eventfd, an unpinned one's on its channel — and is counted as input;
// a loop nobody rings wakes on its timer only.
func TestRingWakesASleepingLoop(t *testing.T) {
	allowed := allowedCPUs(t)
	cpu := 0
	for !allowed.IsSet(cpu) {
		cpu++
	}
	for _, tc := range []struct {
		name string
		cpu  int
	}{{"pinned", cpu}, {"unpinned", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			run := func(rings int) lcore.Stats {
				script := newScript("sleeper", 0, 1)
				l := mustNew(t, lcore.Options{
					CPU: tc.cpu, Doorbell: true, Stages: []lcore.Stage{script},
					Idle: lcore.IdlePolicy{Mode: lcore.IdleSleep, SpinPolls: 1, SleepMin: time.Millisecond, SleepMax: time.Millisecond},
				})
				require.NoError(t, l.Start())
				<-script.reached
				for rung := 0; rung < rings; {
					if l.Asleep() {
						l.Ring()
						rung++
						for l.Asleep() { // until that sleep has ended
							runtime.Gosched()
						}
					}
					runtime.Gosched()
				}
				l.Stop()
				require.NoError(t, l.Wait())
				return l.Stats()
			}
			require.Zero(t, run(0).InputWakes, "nobody rang")
			// Each ring ends one sleep (a signal may end the last first).
			require.GreaterOrEqual(t, run(5).InputWakes, uint64(4), "rung five times while asleep")
		})
	}
}

// TestWakeOnEndsASleep: a write to an eventfd given to WakeOn ends a
// pinned loop's sleep, once per write (it is watched edge-triggered and
// never read). A loop without Doorbell has no set to wake on.
func TestWakeOnEndsASleep(t *testing.T) {
	allowed := allowedCPUs(t)
	cpu := 0
	for !allowed.IsSet(cpu) {
		cpu++
	}
	noBell := mustNew(t, lcore.Options{CPU: -1, Stages: []lcore.Stage{&idleStage{}}, Idle: lcore.IdlePolicy{Mode: lcore.IdleSleep}})
	_, err := noBell.WakeOn(0)
	require.ErrorIs(t, err, lcore.ErrNoWakeSet)

	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	require.NoError(t, err)
	t.Cleanup(func() { unix.Close(efd) })
	script := newScript("sleeper", 0, 1)
	l := mustNew(t, lcore.Options{
		CPU: cpu, Doorbell: true, Stages: []lcore.Stage{script},
		Idle: lcore.IdlePolicy{Mode: lcore.IdleSleep, SpinPolls: 1, SleepMin: time.Millisecond, SleepMax: time.Millisecond},
	})
	remove, err := l.WakeOn(efd)
	require.NoError(t, err)
	require.NoError(t, l.Start())
	<-script.reached
	one := []byte{1, 0, 0, 0, 0, 0, 0, 0}
	for written := 0; written < 5; {
		if l.Asleep() {
			_, err := unix.Write(efd, one)
			require.NoError(t, err)
			written++
			for l.Asleep() {
				runtime.Gosched()
			}
		}
		runtime.Gosched()
	}
	remove()
	l.Stop()
	require.NoError(t, l.Wait())
	// Each write ends one sleep (a signal may end the last first).
	require.GreaterOrEqual(t, l.Stats().InputWakes, uint64(4))
}

// bellStage takes its loop's ring (lcore.BellTaker) and records what it
// was given: the ring, then nil once the loop stopped.
type bellStage struct {
	idleStage
	rings []func()
}

func (s *bellStage) TakeBell(ring func()) { s.rings = append(s.rings, ring) }

// TestDoorbellLoopHandsItsRing: a Doorbell loop gives each BellTaker its
// Ring when it starts — called while the loop sleeps, it ends the sleep —
// and takes it back (nil) once its stages have stopped; a loop without
// Doorbell, whose sleeps no Ring ends, gives none.
func TestDoorbellLoopHandsItsRing(t *testing.T) {
	s := &bellStage{}
	l := mustNew(t, lcore.Options{CPU: -1, Doorbell: true, Stages: []lcore.Stage{s}, Idle: lcore.IdlePolicy{
		Mode: lcore.IdleSleep, SpinPolls: 1, SleepMin: 50 * time.Millisecond, SleepMax: 50 * time.Millisecond,
	}})
	require.NoError(t, l.Start())
	for !l.Asleep() {
		runtime.Gosched()
	}
	// The stage's slice is read after Start's hand-over and before Stop's:
	// the loop wrote it before its first poll, which announced the sleep.
	require.Len(t, s.rings, 1)
	require.NotNil(t, s.rings[0])
	deadline := time.Now().Add(time.Minute) // a hang guard
	for l.Stats().InputWakes == 0 {
		if l.Asleep() {
			s.rings[0]()
		}
		require.True(t, time.Now().Before(deadline), "the stage's ring never ended a sleep")
		runtime.Gosched()
	}
	l.Stop()
	require.NoError(t, l.Wait())
	require.Len(t, s.rings, 2)
	require.Nil(t, s.rings[1], "the ring was not taken back")

	plain := &bellStage{}
	l = mustNew(t, lcore.Options{CPU: -1, Stages: []lcore.Stage{plain}, Idle: lcore.IdlePolicy{Mode: lcore.IdleSleep}})
	require.NoError(t, l.Start())
	l.Stop()
	require.NoError(t, l.Wait())
	require.Empty(t, plain.rings)
}
