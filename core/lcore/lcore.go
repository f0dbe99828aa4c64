package lcore

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/peregrine-net/peregrine/core/clock"
)

// Stage is one step of a pipeline, polled by its Loop.
type Stage interface {
	// Name identifies the stage in errors and statistics.
	Name() string
	// Poll does a bounded amount of work (typically one burst) and reports
	// how much it did; 0 means it found nothing to do. now is the loop's
	// time for this iteration, the same for every stage. Poll must not block.
	Poll(now clock.Time) (work int)
}

// Stopper is implemented by stages that must do something when their loop
// exits: flush per-lcore caches, free or hand back the handles they hold.
// The loop calls Stop exactly once, from the loop goroutine, after its last
// Poll (also when the loop ends because a stage panicked or pinning failed).
type Stopper interface {
	Stop(now clock.Time)
}

// Waker is implemented by stages whose input arrives on file descriptors
// (a port's receive queue): a pinned loop asleep waits on them in poll(2),
// so a frame's arrival ends its sleep instead of the sleep's timer.
type Waker interface {
	// WakeFDs appends to fds the descriptors poll(2) reports readable
	// when the stage has input. The loop reads them once, when it starts;
	// they must stay open until the loop has stopped.
	WakeFDs(fds []int) []int
}

// BellTaker is implemented by stages whose input producers can ring the
// loop (a mem port's peer enqueues frames, and no descriptor says so): a
// Doorbell loop hands each its Ring when it starts, and nil once its
// stages have stopped (the stage forgets the ring: a port that outlives
// the loop no longer keeps it).
type BellTaker interface {
	TakeBell(ring func())
}

// Deadliner is implemented by stages with timed work (retransmission and
// ACK timers, pacing): a sleeping loop wakes by the earliest deadline its
// stages report, so a timer fires on time however long the loop has been
// idle. ok is false when nothing is timed.
type Deadliner interface {
	NextDeadline() (t clock.Time, ok bool)
}

// IdleMode says what a loop does once it has been idle for
// IdlePolicy.SpinPolls consecutive iterations. What each costs when the
// loop has nothing to do, and what it adds to the first packet after, is
// measured by `peregrine bench latency` (idle_cpu_* and the latency rows).
type IdleMode int

const (
	// IdleBusy keeps polling: lowest latency, one CPU fully used, idle or
	// not.
	IdleBusy IdleMode = iota
	// IdleYield yields the CPU to the OS scheduler (sched_yield) every idle
	// iteration, and to Go's (runtime.Gosched) every 16th while pinned
	// loops hold every P or every CPU of the process, so other processes,
	// the kernel's work and other goroutines can run; the thread spins when
	// nothing else wants the CPU, so an idle loop on an otherwise idle CPU
	// uses all of it.
	IdleYield
	// IdleSleep sleeps between idle iterations, doubling the sleep from
	// IdlePolicy.SleepMin up to SleepMax; any work resets it. A sleep
	// ends early at the stages' earliest timer (Deadliner). Almost free
	// when idle, but a packet that finds the loop asleep waits for the
	// sleep to end, and so does every reply in a request/response
	// exchange — unless it arrives on a descriptor the loop sleeps on: a
	// pinned loop's thread sleeps in the kernel with a microsecond of
	// timer slack, up to a millisecond at a time, in poll(2) on its
	// stages' receive queues (Waker) when they have descriptors (AF_XDP,
	// AF_PACKET) and on its Doorbell's; an unpinned loop with such
	// descriptors sleeps on them too; an unpinned loop without, and
	// longer sleeps, wait on a Go timer, which oversleeps short requests
	// by up to a millisecond on a quiet process.
	IdleSleep
	// IdleAdaptive spins for IdlePolicy.SpinFor after the last work
	// (yielding every few microseconds after the first ten, so a task
	// waiting for its CPU runs), then yields (as IdleYield) until YieldFor after it, then
	// sleeps (as IdleSleep, waking early for input and timers: see Waker
	// and Deadliner). Traffic that keeps coming within YieldFor — a
	// request/response exchange, a stream — finds the loop awake and
	// sees busy-polling latency; a loop idle for longer costs what a
	// sleeping one does, plus YieldFor of a CPU after each spell of work.
	// A loop whose yields show another task running on its CPU (one that
	// took SharedYield or longer) yields instead of spinning for
	// SharedFor: the spin would keep the CPU from the loop or process it
	// shares it with. The default of the peregrine binary (every --idle
	// flag, a config file's idle key).
	IdleAdaptive
)

var idleModeNames = [...]string{IdleBusy: "busy", IdleYield: "yield", IdleSleep: "sleep", IdleAdaptive: "adaptive"}

// String returns "busy", "yield", "sleep" or "adaptive".
func (m IdleMode) String() string {
	if m >= 0 && int(m) < len(idleModeNames) {
		return idleModeNames[m]
	}
	return fmt.Sprintf("IdleMode(%d)", int(m))
}

// ParseIdleMode parses "busy", "yield", "sleep" or "adaptive".
func ParseIdleMode(s string) (IdleMode, error) {
	for m, name := range idleModeNames {
		if s == name {
			return IdleMode(m), nil
		}
	}
	return 0, fmt.Errorf("lcore: unknown idle mode %q (use busy, yield, sleep or adaptive)", s)
}

// Idle policy defaults, used for zero fields of IdlePolicy.
const (
	DefaultSpinPolls = 64
	// DefaultSleepMin is the first sleep of an idle loop: a nanosecond,
	// so the doubling back-off starts with wake-ups microseconds apart and
	// reaches SleepMax after about twenty sleeps (2 ms). A pinned loop
	// sleeps in the kernel and wakes when asked (a 10 µs sleep takes 26 µs
	// with its 1 µs slack). Go's timers, which an unpinned loop sleeps on,
	// are coarse: on an otherwise idle process the runtime's poller waits
	// in whole milliseconds, so a requested 50µs sleep often lasts about
	// 1ms (measured on the project machine: 1µs→0.14ms, 10µs→0.8ms,
	// 50µs→1.1ms). A 50µs first sleep left configs/transport-mechanisms.yaml
	// (idle: sleep, in memory) at p50 1.5 s per operation, and its run
	// failed.
	DefaultSleepMin = time.Nanosecond
	// DefaultSleepMax caps the back-off, and so the extra latency an idle
	// loop adds to the first packet after a quiet spell.
	DefaultSleepMax = time.Millisecond
	// DefaultSpinFor is how long an IdleAdaptive loop spins after work
	// before it starts yielding: longer than a round trip over a veth
	// pair (20–60 µs), so the reply to what the loop just sent finds it
	// spinning. With 5 µs a 64 B push round trip over AF_XDP took 65 µs
	// at p50 against 22.5 µs for a busy loop; with 100 µs, 22.5 µs (bench
	// latency). A loop with no work does not spin, so an idle loop costs
	// what a sleeping one does; the price is up to 100 µs of CPU kept
	// from another loop on the same CPU after each burst.
	DefaultSpinFor = 100 * time.Microsecond
	// DefaultYieldFor is when, after its last work, an IdleAdaptive loop
	// stops yielding and starts sleeping: past a few round trips, short
	// enough that a loop with nothing to do sleeps within a millisecond.
	DefaultYieldFor = 500 * time.Microsecond
)

// IdlePolicy says how a loop behaves when its stages find nothing to do.
type IdlePolicy struct {
	Mode IdleMode
	// SpinPolls is how many consecutive idle iterations the loop spins
	// before it starts yielding or sleeping. 0 selects DefaultSpinPolls;
	// use 1 to back off almost at once.
	SpinPolls int
	// SleepMin is the first sleep in IdleSleep mode (0 → DefaultSleepMin).
	// See DefaultSleepMin for how coarse Go's sleeps are.
	SleepMin time.Duration
	// SleepMax caps the doubling sleeps (0 → DefaultSleepMax). A sleeping
	// loop notices Stop at once; it notices new work within SleepMax (plus
	// the timer's lateness).
	SleepMax time.Duration
	// SpinFor and YieldFor are IdleAdaptive's phases, measured on the
	// loop's clock from the last iteration that did work: spin until
	// SpinFor, yield until YieldFor, then sleep (0 → DefaultSpinFor,
	// DefaultYieldFor).
	SpinFor, YieldFor time.Duration
}

// Options configures a Loop.
type Options struct {
	// Name identifies the loop in errors and statistics (default "lcore",
	// or "lcore<CPU>" when pinned).
	Name string
	// CPU is the CPU to pin the loop's thread to, or -1 to leave it
	// unpinned (and not locked to a thread). Note that the zero value pins
	// to CPU 0. It must be in the process's allowed CPU set.
	CPU int
	// Clock is read once per iteration; nil selects clock.NewReal().
	Clock clock.Clock
	// Idle is the idle policy; the zero value is busy polling.
	Idle IdlePolicy
	// Stages are polled in this order every iteration. At least one.
	Stages []Stage
	// Doorbell says that producers will call Ring: the loop's sleeps are
	// announced one idle iteration ahead, and the loop sleeps in poll(2)
	// on an eventfd, which Ring writes, beside its stages' descriptors
	// and those WakeOn adds. Without it Ring does nothing.
	Doorbell bool
	// Isolate keeps the process's other threads off CPU while the loop
	// runs, as DPDK's EAL keeps its control threads off the lcores: the Go
	// runtime's own threads and the program's other goroutines then run on
	// the remaining CPUs and never preempt the loop. Threads pinned to one
	// CPU (other loops) are left alone; CPU is given back to the others
	// when the loop ends. Ignored when the loop is unpinned (CPU -1) or
	// CPU is the only one the other threads may use.
	Isolate bool
}

// Stats are a loop's counters. They only grow. While the loop runs they are
// published every 256 iterations and before each sleep, so a reader may see
// values up to 256 iterations old; after Wait returns they are exact.
type Stats struct {
	Polls     uint64 // iterations: each polls every stage once
	IdlePolls uint64 // iterations in which no stage reported work
	Work      uint64 // sum of the work the stages reported
	Yields    uint64 // idle yields (IdleYield)
	GoYields  uint64 // of those, yields to Go's scheduler (see IdleYield)
	// SharedYields counts an IdleAdaptive loop's yields that took
	// SharedYield or longer: another task ran on the loop's CPU.
	SharedYields uint64
	Sleeps       uint64 // sleeps (IdleSleep)
	// InputWakes counts the sleeps a stage's descriptor ended (see
	// Waker): input arrived while the loop slept.
	InputWakes uint64
}

func (s *Stats) add(o Stats) {
	s.Polls += o.Polls
	s.IdlePolls += o.IdlePolls
	s.Work += o.Work
	s.Yields += o.Yields
	s.GoYields += o.GoYields
	s.SharedYields += o.SharedYields
	s.Sleeps += o.Sleeps
	s.InputWakes += o.InputWakes
}

var (
	// ErrAlreadyStarted is returned by Start on a loop that was started
	// before; a loop runs once.
	ErrAlreadyStarted = errors.New("lcore: loop already started")
	// ErrNotStarted is returned by Wait on a loop that was never started.
	ErrNotStarted = errors.New("lcore: loop not started")
)

// StagePanic is the error Wait returns when a stage (or a Stopper, or the
// clock) panicked; the loop stops at the panic.
type StagePanic struct {
	Loop  string
	Stage string // the stage's Name, or "clock"
	Value any    // what was passed to panic
	Stack []byte // the panicking goroutine's stack
}

func (e *StagePanic) Error() string {
	return fmt.Sprintf("lcore %q: stage %q panicked: %v", e.Loop, e.Stage, e.Value)
}

// Unwrap returns the panic value when it is an error.
func (e *StagePanic) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// publishMask: counters are published when the low 8 bits of the iteration
// count wrap, i.e. every 256 iterations.
const publishMask = 255

// Loop is a poll loop. Create it with New, run it with Start, end it with Stop
// and Wait.
type Loop struct {
	name    string
	cpu     int
	isolate bool
	clock   clock.Clock
	idle    IdlePolicy // defaults filled in
	stages  []Stage

	started  atomic.Bool
	stopping atomic.Bool
	tid      atomic.Int32 // the pinned loop's thread, 0 before it runs
	stopOnce sync.Once
	stopCh   chan struct{} // closed by Stop: wakes a sleeping loop
	done     chan struct{} // closed when the loop goroutine is about to exit
	err      error         // written before done is closed

	// Owned by the loop goroutine.
	count    Stats
	idleRun  int        // consecutive idle iterations
	lastWork clock.Time // IdleAdaptive: the last iteration with work
	// sharedUntil: an IdleAdaptive loop yields instead of spinning until
	// then; longYields: its yields in a row that took SharedYield or
	// longer (see SharedRun).
	sharedUntil clock.Time
	longYields  int
	sleepFor    time.Duration // next sleep in IdleSleep mode
	sleepTimer  *time.Timer
	deadliners  []Deadliner   // stages that have timers
	wakeFDs     []unix.PollFd // a pinned loop's sleep ends when one is readable
	// armed: the loop told Ring it may sleep (asleep set) and sleeps at
	// its next idle iteration unless that one finds work (Doorbell).
	doorbell bool
	armed    bool

	// Ring's side (see Ring): asleep is set from one idle iteration
	// before a sleep to its end; bell (the eventfd of a Doorbell loop, -1
	// without) or, for a sleep on a Go timer, ringCh ends the sleep.
	asleep atomic.Bool
	bell   atomic.Int32
	ringCh chan struct{}
	// wakeSet (a Doorbell loop's epoll set, -1 without) holds the
	// descriptors WakeOn adds while the loop runs; the loop sleeps on it.
	// counter receives the bell's count when the loop resets it.
	wakeSet atomic.Int32
	counter [8]byte
	events  [8]unix.EpollEvent

	polling int // stage being polled, -1 for the clock: names a panic

	published struct {
		polls, idlePolls, work, yields, goYields, sharedYields, sleeps, inputWakes atomic.Uint64
	}
}

// New validates opts and returns a loop ready to Start.
func New(opts Options) (*Loop, error) {
	if len(opts.Stages) == 0 {
		return nil, errors.New("lcore: Options.Stages is empty (give the loop at least one Stage)")
	}
	for i, s := range opts.Stages {
		if s == nil {
			return nil, fmt.Errorf("lcore: Options.Stages[%d] is nil (remove it or pass a Stage)", i)
		}
	}
	if opts.CPU < -1 {
		return nil, fmt.Errorf("lcore: Options.CPU %d is invalid (use a CPU number, or -1 to leave the loop unpinned)", opts.CPU)
	}
	if opts.CPU >= 0 {
		if err := checkCPUAllowed(opts.CPU); err != nil {
			return nil, err
		}
	}
	idle, err := opts.Idle.withDefaults()
	if err != nil {
		return nil, err
	}
	name := opts.Name
	if name == "" {
		name = "lcore"
		if opts.CPU >= 0 {
			name = fmt.Sprintf("lcore%d", opts.CPU)
		}
	}
	clk := opts.Clock
	if clk == nil {
		clk = clock.NewReal()
	}
	l := &Loop{
		name:     name,
		cpu:      opts.CPU,
		isolate:  opts.Isolate,
		clock:    clk,
		idle:     idle,
		stages:   slices.Clone(opts.Stages),
		stopCh:   make(chan struct{}),
		ringCh:   make(chan struct{}, 1),
		doorbell: opts.Doorbell,
		done:     make(chan struct{}),
		sleepFor: idle.SleepMin,
	}
	l.bell.Store(-1)
	l.wakeSet.Store(-1)
	if idle.Mode == IdleSleep || idle.Mode == IdleAdaptive {
		l.sleepTimer = time.NewTimer(time.Hour)
		l.sleepTimer.Stop()
		if l.doorbell {
			l.openBell()
		}
		for _, s := range l.stages {
			if d, ok := s.(Deadliner); ok {
				l.deadliners = append(l.deadliners, d)
			}
		}
	}
	return l, nil
}

// checkCPUAllowed refuses a CPU outside the calling thread's affinity mask.
// The caller is an ordinary goroutine, and threads pinned by loops never run
// other goroutines (they exit locked), so that mask is the process's.
func checkCPUAllowed(cpu int) error {
	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err != nil {
		return fmt.Errorf("lcore: read the allowed CPU set to check Options.CPU %d: %w", cpu, err)
	}
	var list []int
	for c := range MaxCPU + 1 {
		if allowed.IsSet(c) {
			list = append(list, c)
		}
	}
	if cpu > MaxCPU || !allowed.IsSet(cpu) {
		return fmt.Errorf("lcore: Options.CPU %d is not in this process's allowed CPU set %s (use one of those, or -1 to leave the loop unpinned)",
			cpu, FormatCPUList(list))
	}
	return nil
}

func (p IdlePolicy) withDefaults() (IdlePolicy, error) {
	if p.Mode < IdleBusy || p.Mode > IdleAdaptive {
		return p, fmt.Errorf("lcore: Options.Idle.Mode %d is unknown (use IdleBusy, IdleYield, IdleSleep or IdleAdaptive)", int(p.Mode))
	}
	if p.SpinFor < 0 || p.YieldFor < 0 {
		return p, fmt.Errorf("lcore: Options.Idle SpinFor %v and YieldFor %v include a negative duration (use 0 for the defaults %v, %v)", p.SpinFor, p.YieldFor, DefaultSpinFor, DefaultYieldFor)
	}
	if p.SpinFor == 0 {
		p.SpinFor = DefaultSpinFor
		if p.YieldFor > 0 {
			p.SpinFor = min(DefaultSpinFor, p.YieldFor)
		}
	}
	if p.YieldFor == 0 {
		p.YieldFor = max(DefaultYieldFor, p.SpinFor)
	}
	if p.SpinFor > p.YieldFor {
		return p, fmt.Errorf("lcore: Options.Idle.SpinFor %v exceeds YieldFor %v (raise YieldFor or lower SpinFor)", p.SpinFor, p.YieldFor)
	}
	if p.SpinPolls < 0 {
		return p, fmt.Errorf("lcore: Options.Idle.SpinPolls %d is negative (use 0 for the default %d, or a positive count)", p.SpinPolls, DefaultSpinPolls)
	}
	if p.SleepMin < 0 || p.SleepMax < 0 {
		return p, fmt.Errorf("lcore: Options.Idle sleeps %v..%v include a negative duration (use 0 for the defaults %v..%v)", p.SleepMin, p.SleepMax, DefaultSleepMin, DefaultSleepMax)
	}
	if p.SpinPolls == 0 {
		p.SpinPolls = DefaultSpinPolls
	}
	if p.SleepMin == 0 {
		// The default, or a shorter SleepMax given alone.
		p.SleepMin = DefaultSleepMin
		if p.SleepMax > 0 {
			p.SleepMin = min(DefaultSleepMin, p.SleepMax)
		}
	}
	if p.SleepMax == 0 {
		p.SleepMax = max(DefaultSleepMax, p.SleepMin)
	}
	if p.SleepMin > p.SleepMax {
		return p, fmt.Errorf("lcore: Options.Idle.SleepMin %v exceeds SleepMax %v (raise SleepMax or lower SleepMin)", p.SleepMin, p.SleepMax)
	}
	return p, nil
}

// Name returns the loop's name.
func (l *Loop) Name() string { return l.name }

// CPU returns the CPU the loop is pinned to, or -1.
func (l *Loop) CPU() int { return l.cpu }

// Start starts the loop goroutine. A loop runs once: a second Start returns
// an error wrapping ErrAlreadyStarted. If Stop was called before Start, the
// loop runs no iteration (its Stoppers still run).
func (l *Loop) Start() error {
	if !l.started.CompareAndSwap(false, true) {
		return fmt.Errorf("lcore %q: %w (create a new Loop to run again)", l.name, ErrAlreadyStarted)
	}
	go l.run()
	return nil
}

// Stop asks the loop to stop after its current iteration and returns at
// once. A sleeping loop wakes immediately. Stop is idempotent and may be
// called from any goroutine, including from a stage of the loop itself.
func (l *Loop) Stop() {
	l.stopping.Store(true)
	l.stopOnce.Do(func() { close(l.stopCh) })
	if fd := l.bell.Load(); fd >= 0 {
		_, _ = unix.Write(int(fd), eventfdOne[:]) // a sleep in the kernel ends now
	}
}

// Wait blocks until the loop goroutine has exited and returns why it ended
// abnormally: the error of pinning, or a *StagePanic (joined with the panics
// of any Stopper). It returns nil after a clean Stop, and an error wrapping
// ErrNotStarted if the loop was never started.
func (l *Loop) Wait() error {
	if !l.started.Load() {
		return fmt.Errorf("lcore %q: Wait: %w", l.name, ErrNotStarted)
	}
	<-l.done
	return l.err
}

// Stats returns the loop's counters; see Stats for how fresh they are. Safe
// from any goroutine.
func (l *Loop) Stats() Stats {
	p := &l.published
	return Stats{
		Polls:        p.polls.Load(),
		IdlePolls:    p.idlePolls.Load(),
		Work:         p.work.Load(),
		Yields:       p.yields.Load(),
		GoYields:     p.goYields.Load(),
		SharedYields: p.sharedYields.Load(),
		Sleeps:       p.sleeps.Load(),
		InputWakes:   p.inputWakes.Load(),
	}
}

func (l *Loop) publish() {
	p := &l.published
	p.polls.Store(l.count.Polls)
	p.idlePolls.Store(l.count.IdlePolls)
	p.work.Store(l.count.Work)
	p.yields.Store(l.count.Yields)
	p.goYields.Store(l.count.GoYields)
	p.sharedYields.Store(l.count.SharedYields)
	p.sleeps.Store(l.count.Sleeps)
	p.inputWakes.Store(l.count.InputWakes)
}

func (l *Loop) run() {
	defer close(l.done)
	if l.cpu >= 0 {
		// Never unlocked: the thread's affinity is changed below, and a
		// goroutine exiting locked takes its thread with it.
		runtime.LockOSThread()
		pinnedLoops.Add(1)
		defer pinnedLoops.Add(-1)
		l.tid.Store(int32(unix.Gettid()))
		var set unix.CPUSet
		set.Set(l.cpu)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			l.err = fmt.Errorf("lcore %q: pin to cpu %d: %w", l.name, l.cpu, err)
		}
		// Best effort: the name is for ps, top and isolate.
		_ = nameLoopThread(l.cpu)
		// Best effort: the thread's sleeps (backOff's nanosleep) end when
		// asked, not up to 50 µs later, the kernel's default slack.
		_ = unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(sleepSlack), 0, 0, 0)
		if l.err == nil && l.isolate {
			undo, err := isolate(l.cpu)
			if err != nil {
				l.err = fmt.Errorf("lcore %q: isolate cpu %d: %w", l.name, l.cpu, err)
			} else {
				defer undo()
			}
		}
	}
	if l.doorbell {
		l.handBell(l.Ring)
	}
	if l.sleepTimer != nil {
		l.wakeFDs = l.collectWakeFDs()
		if fd := l.bell.Load(); fd >= 0 {
			l.wakeFDs = append(l.wakeFDs, unix.PollFd{Fd: fd, Events: unix.POLLIN}, unix.PollFd{Fd: l.wakeSet.Load(), Events: unix.POLLIN})
		}
	}
	if l.err == nil {
		l.err = l.poll()
		if l.sleepTimer != nil {
			l.sleepTimer.Stop()
		}
	}
	l.err = errors.Join(l.err, l.stopStages())
	if l.doorbell {
		l.handBell(nil) // taken back
	}
	l.publish()
}

// poll iterates until Stop, turning a panic into a *StagePanic.
func (l *Loop) poll() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = l.panicError(l.polling, r)
		}
	}()
	l.lastWork = l.clock.Now()
	for !l.stopping.Load() {
		l.iterate()
	}
	return nil
}

func (l *Loop) panicError(stage int, r any) error {
	name := "clock"
	if stage >= 0 {
		name = l.stages[stage].Name()
	}
	return &StagePanic{Loop: l.name, Stage: name, Value: r, Stack: debug.Stack()}
}

// stopStages calls every Stopper once, each guarded so one panicking hook
// does not keep the others from running.
func (l *Loop) stopStages() error {
	var errs []error
	var now clock.Time
	nowOK := false
	for i, s := range l.stages {
		stopper, ok := s.(Stopper)
		if !ok {
			continue
		}
		if !nowOK {
			var err error
			if now, err = l.readClock(); err != nil {
				errs = append(errs, err)
			}
			nowOK = true
		}
		if err := l.callStop(i, stopper, now); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (l *Loop) readClock() (now clock.Time, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = l.panicError(-1, r)
		}
	}()
	return l.clock.Now(), nil
}

func (l *Loop) callStop(i int, s Stopper, now clock.Time) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = l.panicError(i, r)
		}
	}()
	s.Stop(now)
	return nil
}

// iterate runs one iteration: poll every stage once with one reading of the
// clock, count, and idle according to the policy. It returns the work done.
func (l *Loop) iterate() int {
	l.polling = -1
	now := l.clock.Now()
	work := 0
	for i, s := range l.stages {
		l.polling = i
		if w := s.Poll(now); w > 0 {
			work += w
		}
	}
	l.count.Polls++
	if work > 0 {
		if l.armed {
			l.armed = false
			l.asleep.Store(false)
		}
		l.count.Work += uint64(work)
		l.idleRun = 0
		l.sleepFor = l.idle.SleepMin
		l.lastWork = now
	} else {
		l.count.IdlePolls++
		l.idleRun++
		if l.idle.Mode == IdleAdaptive {
			l.adapt(now)
		} else if l.idleRun > l.idle.SpinPolls {
			l.backOff(l.idle.Mode, now)
		}
	}
	if l.count.Polls&publishMask == 0 {
		l.publish()
	}
	return work
}

// goschedEvery is how often an IdleYield loop lets Go's scheduler run other
// goroutines instead of only yielding the CPU to the OS, when it must.
const goschedEvery = 16

// pinnedLoops counts this process's running loops that hold a locked
// thread. A pinned loop's idle yield is the OS's alone while these loops
// leave a P free (for goroutines waiting to run) and a CPU free (for the
// threads that run them): runtime.Gosched on a locked thread hands its P
// to another thread and takes it back, two futex wake-ups and as many
// context switches, which took a tenth of a bulk sender's CPU at every
// 16th yield. Once the loops hold every P or every CPU, that hand-off is
// what lets the rest of the process run: a goroutine a loop wakes waits
// in the loop's P, and the thread that would steal it shares a CPU with a
// spinning loop (the public API's loop door, a loop on each of two CPUs:
// 600 µs a round trip with the Go yield, 960 µs without).
var pinnedLoops atomic.Int32

// preciseSleepMax is the longest sleep a pinned loop takes in the kernel
// (nanosleep, Stop noticed when it ends); longer ones wait on a Go timer
// that Stop ends at once. sleepSlack is its thread's timer slack.
const (
	preciseSleepMax = time.Millisecond
	sleepSlack      = time.Microsecond
)

// SharedYield is how long an IdleAdaptive loop's yield takes when another
// task ran meanwhile on its CPU (a yield with nothing else to run returns
// within a microsecond or two); after SharedRun such yields in a row the
// loop yields where it would spin, until SharedFor after the last. A loop
// that spins after its work keeps the CPU from whatever shares it, and
// the shipped configs pin the fabric (or forwarder) and the target to one
// CPU of a two-CPU machine: through the fabric, 64 KiB bulk carried 0.78
// Gbit/s with the target adaptive against 3.77 with it yielding, and
// 0.68-0.70 with every loop adaptive. With the loop alone on its CPU its
// yields stay short and it spins as before. One long yield is not enough:
// a kernel worker that ran once made a lone ping-pong's loops yield where
// they spun (bench latency's 64 B p99 over AF_XDP 0.68-0.79 of the
// kernel's UDP ping-pong, against 0.11-0.13 before the rule).
const (
	SharedYield = 20 * time.Microsecond
	SharedRun   = 2
	SharedFor   = 10 * time.Millisecond
)

// An IdleAdaptive loop that has spun spinProbeAfter since its work yields
// at every spinYieldEvery-th idle poll (every few microseconds) until
// SpinFor. Alone on its CPU the yield returns at once; a task waiting for
// the CPU runs within microseconds instead of after the whole spin, and
// the yield's length tells the loop its CPU is shared (SharedYield). A
// loop whose peer on the CPU answers quickly never sees a long yield of
// its own: it spun SpinFor before each of the other's turns. Through the
// shipped trio's topology (the fabric and the target on one CPU, both
// adaptive) a 4 KiB push's round trip took 123 µs at p50 against 29.7
// with both loops yielding; with these yields 29.7-30.7. They start after
// spinProbeAfter because each one lets whatever else is runnable (the
// kernel's workers, the process's other threads) take the CPU: yielding
// from the first idle poll, bench latency's lone 64 B ping-pong over
// AF_XDP read p99 45-74 µs against 10-25 without.
const (
	spinProbeAfter = 10 * time.Microsecond
	spinYieldEvery = 32
)

// adapt is IdleAdaptive's back-off: nothing within SpinFor of the last
// work but a yield now and then after spinProbeAfter (a yield each time
// while the CPU is shared), a yield within YieldFor, a sleep after. A loop
// that never worked counts from its start.
func (l *Loop) adapt(now clock.Time) {
	switch quiet := now.Sub(l.lastWork); {
	case quiet < l.idle.SpinFor && now >= l.sharedUntil && (quiet < spinProbeAfter || l.idleRun%spinYieldEvery != 0):
	case quiet < l.idle.YieldFor:
		before := l.clock.Now()
		l.backOff(IdleYield, now)
		after := l.clock.Now()
		if after.Sub(before) < SharedYield {
			l.longYields = 0
			break
		}
		l.count.SharedYields++
		if l.longYields++; l.longYields >= SharedRun {
			l.sharedUntil = after.Add(SharedFor)
		}
	default:
		l.backOff(IdleSleep, now)
	}
}

// Ring wakes the loop if it sleeps, or is about to: a producer that hands
// a stage work through memory (a ring) from another goroutine rings after
// it enqueued, so the work waits for no sleep to end. While the loop is
// awake Ring is an atomic load; while it sleeps, a write to its eventfd
// (or, if none could be made, a channel send). Any goroutine may call it,
// at any time.
//
// A loop about to sleep first says so (asleep), then polls its stages
// once more (its next idle iteration), and sleeps only if that finds
// nothing: work enqueued before a Ring that read the loop awake is found
// by that poll.
func (l *Loop) Ring() {
	if !l.asleep.Load() {
		return
	}
	if fd := l.bell.Load(); fd >= 0 {
		_, _ = unix.Write(int(fd), eventfdOne[:]) // EAGAIN: the counter is full, the loop will wake
		return
	}
	select {
	case l.ringCh <- struct{}{}:
	default:
	}
}

// Asleep reports whether the loop sleeps, or has said it is about to (see
// Ring): a producer in another process, which cannot call Ring, reads
// what the loop's stage mirrors of it and writes to a descriptor given to
// WakeOn instead.
func (l *Loop) Asleep() bool { return l.asleep.Load() }

// ErrNoWakeSet is WakeOn's error on a loop that has no set to wake on: one
// without Options.Doorbell.
var ErrNoWakeSet = errors.New("lcore: the loop sleeps on no descriptor set (a loop with Options.Doorbell has one)")

// WakeOn makes fd — an eventfd, or any descriptor that polls readable
// when it has something — end the loop's sleeps from now on, until
// remove is called; the caller keeps fd open until then. Any goroutine
// may call both. Each write to an eventfd wakes the loop once (it is
// watched edge-triggered), and the loop reads nothing from it.
func (l *Loop) WakeOn(fd int) (remove func(), err error) {
	set := int(l.wakeSet.Load())
	if set < 0 {
		return nil, ErrNoWakeSet
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLET, Fd: int32(fd)}
	if err := unix.EpollCtl(set, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		return nil, fmt.Errorf("lcore: watch fd %d: %w", fd, err)
	}
	return func() { _ = unix.EpollCtl(set, unix.EPOLL_CTL_DEL, fd, nil) }, nil
}

// openBell gives a Doorbell loop its eventfd and its wake set.
// They are closed once the Loop is garbage: a Ring or WakeOn racing with
// the loop's end may still use them.
func (l *Loop) openBell() {
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return // best effort: its sleeps end on their timer
	}
	set, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		unix.Close(fd)
		return
	}
	l.bell.Store(int32(fd))
	l.wakeSet.Store(int32(set))
	runtime.AddCleanup(l, func(fds [2]int) { unix.Close(fds[0]); unix.Close(fds[1]) }, [2]int{fd, set})
}

// handBell gives ring to every stage that takes one (BellTaker).
func (l *Loop) handBell(ring func()) {
	for _, s := range l.stages {
		if b, ok := s.(BellTaker); ok {
			b.TakeBell(ring)
		}
	}
}

// eventfdOne is what Ring and Stop write to an eventfd: a package variable,
// because a local array passed to unix.Write moves to the heap under the
// race detector (which reads the buffer), one allocation a ring.
var eventfdOne = [8]byte{1}

// collectWakeFDs asks the stages for the descriptors that end a sleep.
func (l *Loop) collectWakeFDs() []unix.PollFd {
	var fds []int
	for _, s := range l.stages {
		if w, ok := s.(Waker); ok {
			fds = w.WakeFDs(fds)
		}
	}
	slices.Sort(fds)
	fds = slices.Compact(fds)
	var out []unix.PollFd
	for _, fd := range fds {
		if fd >= 0 {
			out = append(out, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
		}
	}
	return out
}

// drainBell resets the eventfd if it was rung and takes the wake set's
// events (the two are the sleep's last descriptors), so that the next
// sleep waits again.
func (l *Loop) drainBell() {
	fd := l.bell.Load()
	if fd < 0 {
		return
	}
	n := len(l.wakeFDs)
	if l.wakeFDs[n-2].Revents != 0 {
		_, _ = unix.Read(int(fd), l.counter[:])
	}
	if l.wakeFDs[n-1].Revents != 0 {
		for {
			k, err := unix.EpollWait(int(l.wakeSet.Load()), l.events[:], 0)
			if err != unix.EINTR && k < len(l.events) {
				break
			}
		}
	}
}

// sleepLength is the next sleep, cut short by the stages' earliest
// deadline still ahead of now (one at or before now is work a Poll found
// it could not do yet, a refused transmit say: it does not stop the
// back-off).
func (l *Loop) sleepLength(now clock.Time) time.Duration {
	d := l.sleepFor
	for _, s := range l.deadliners {
		if t, ok := s.NextDeadline(); ok && t > now && t.Sub(now) < d {
			d = t.Sub(now)
		}
	}
	return d
}

func (l *Loop) backOff(mode IdleMode, now clock.Time) {
	switch mode {
	case IdleYield:
		l.count.Yields++
		// The OS-level yield lets other processes' poll loops and the
		// kernel's own work (veth, XDP) run on this CPU without giving up
		// the thread. runtime.Gosched on a locked thread hands the thread
		// off and wakes it again through futexes — most of an idle
		// AF_XDP middlebox's time went there. Every gosched-th idle
		// iteration still calls it when the process's other goroutines
		// need it (see pinnedLoops; an unpinned loop's goroutine is not
		// locked, so Go's yield is cheap).
		if l.count.Yields%goschedEvery == 0 && (l.cpu < 0 || int(pinnedLoops.Load()) >= min(runtime.GOMAXPROCS(0), runtime.NumCPU())) {
			l.count.GoYields++
			runtime.Gosched()
		} else {
			_, _, _ = unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
		}
	case IdleSleep:
		if l.doorbell && !l.armed {
			// Tell Ring first; the next idle iteration sleeps.
			l.armed = true
			l.asleep.Store(true)
			return
		}
		l.armed = false
		defer l.asleep.Store(false)
		l.count.Sleeps++
		l.publish() // a sleeping loop's counters should not look stuck
		d := l.sleepLength(now)
		// A Doorbell loop's sleeps of any length wait on its descriptors:
		// its bell is among them, which Ring and Stop write — on a Go
		// timer a Ring went unheard past preciseSleepMax.
		rung := len(l.wakeFDs) > 0 && l.bell.Load() >= 0
		if rung || (l.cpu >= 0 || len(l.wakeFDs) > 0) && d <= preciseSleepMax {
			// The pinned thread sleeps in the kernel: a Go timer ends a
			// short sleep at the runtime's next timer check, on a quiet
			// process about a millisecond later (10 µs asked, 1.08 ms
			// slept; nanosleep with a 1 µs slack 26 µs), and every loss
			// recovery that waits a timeout finds loops asleep. Waiting
			// in poll(2) on the ports' receive queues, it wakes when a
			// frame arrives: each idle hop of a path otherwise adds what
			// is left of its sleep. So does an unpinned loop that has
			// descriptors to sleep on (a blocking system call holds its
			// thread, not a processor). Stop rings the bell, if any;
			// otherwise it is noticed when the sleep ends.
			ts := unix.NsecToTimespec(int64(d))
			if len(l.wakeFDs) > 0 {
				if n, _ := unix.Ppoll(l.wakeFDs, &ts, nil); n > 0 { // EINTR as for nanosleep
					if !l.stopping.Load() { // Stop's ring is no input
						l.count.InputWakes++
					}
					l.drainBell()
				}
			} else {
				_ = unix.Nanosleep(&ts, nil) // EINTR: a signal ends it early, as a timer would
			}
		} else {
			l.sleepTimer.Reset(d)
			select {
			case <-l.sleepTimer.C:
			case <-l.stopCh:
			case <-l.ringCh:
				l.count.InputWakes++
				if !l.sleepTimer.Stop() {
					<-l.sleepTimer.C
				}
			}
		}
		l.sleepFor = min(2*l.sleepFor, l.idle.SleepMax)
	}
}

// ThreadCPU returns how much CPU time the pinned loop's thread has used
// so far, as the kernel's scheduler counts it (/proc's schedstat): what an
// idle policy costs is read as its growth over a window. A loop that is
// unpinned (its goroutine may change threads) or not running yet has no
// thread of its own to read.
func (l *Loop) ThreadCPU() (time.Duration, error) {
	tid := l.tid.Load()
	if tid == 0 {
		return 0, fmt.Errorf("lcore %q: ThreadCPU: the loop has no thread of its own (unpinned, or not started)", l.name)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/schedstat", tid))
	if err != nil {
		return 0, fmt.Errorf("lcore %q: ThreadCPU: %w", l.name, err)
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, fmt.Errorf("lcore %q: ThreadCPU: empty schedstat", l.name)
	}
	ns, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("lcore %q: ThreadCPU: schedstat %q: %w", l.name, f[0], err)
	}
	return time.Duration(ns), nil
}

// String describes the loop, e.g. `lcore "rx0" (cpu 0, sleep)`.
func (l *Loop) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "lcore %q (", l.name)
	if l.cpu >= 0 {
		fmt.Fprintf(&b, "cpu %d, ", l.cpu)
	} else {
		b.WriteString("unpinned, ")
	}
	b.WriteString(l.idle.Mode.String())
	b.WriteByte(')')
	return b.String()
}
