package app_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/app"
	"github.com/peregrine-net/peregrine/app/traffic"
	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/fwd"
	"github.com/peregrine-net/peregrine/core/lcore"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/pmd/mem"    // also registers mem:
	_ "github.com/peregrine-net/peregrine/pmd/null" // registers null:
)

// bound is how long a test waits for an event on loops that share a busy
// machine: generous, because a starved loop is slow, not stuck.
const bound = 60 * time.Second

func unpinned(n int) []app.Lcore {
	lcs := make([]app.Lcore, n)
	for i := range lcs {
		lcs[i] = app.Lcore{CPU: -1}
	}
	return lcs
}

// TestGenFwdSinkOverMemPairs runs demo's forward pipeline on two loops:
// a generator and a sink on loop 0, a forwarder on loop 1, joined by two
// mem pairs opened by spec. Every frame sent arrives in order, and after
// Stop every frame is back in the pool and the pool is closed.
func TestGenFwdSinkOverMemPairs(t *testing.T) {
	const count = 20000
	p, err := app.New(app.Options{
		Pool:   mbuf.Options{Name: t.Name(), Frames: 4096},
		Ports:  []string{"mem:gen-fwd/0", "mem:gen-fwd/1", "mem:fwd-sink/0", "mem:fwd-sink/1"},
		Lcores: unpinned(2),
		Idle:   lcore.IdlePolicy{Mode: lcore.IdleSleep},
	})
	require.NoError(t, err)
	genOut, fwdIn, fwdOut, sinkIn := p.Port(0), p.Port(1), p.Port(2), p.Port(3)
	gen, err := traffic.NewGenerator(traffic.GeneratorOptions{Port: genOut, Pool: p.Pool(), Sizes: traffic.FixedSize(64), Count: count, Cache: p.Cache(0)})
	require.NoError(t, err)
	sink, err := traffic.NewSink(traffic.SinkOptions{Port: sinkIn, Pool: p.Pool(), Cache: p.Cache(0)})
	require.NoError(t, err)
	f, err := fwd.New(fwd.Options{Mode: fwd.ModeIO, In: fwdIn, Out: fwdOut, Pool: p.Pool(), OnFull: fwd.FullRetry, Cache: p.Cache(1)})
	require.NoError(t, err)
	require.NoError(t, p.Add(app.Stage{Stage: gen, Loop: 0, Tx: []app.Queue{{genOut, 0}}}))
	require.NoError(t, p.Add(app.Stage{Stage: sink, Loop: 0, Rx: []app.Queue{{sinkIn, 0}}}))
	require.NoError(t, p.Add(app.Stage{Stage: f, Loop: 1, Rx: []app.Queue{{fwdIn, 0}}, Tx: []app.Queue{{fwdOut, 0}}}))
	require.NoError(t, p.Start())

	var ticks int
	_, interrupted, err := p.Run(context.Background(), app.RunOptions{
		Duration: bound, Period: time.Millisecond, Tick: func(time.Duration) { ticks++ },
		Done: func() bool { return gen.Done() && sink.Frames() == count },
	})
	require.NoError(t, err)
	require.False(t, interrupted)
	require.NoError(t, p.Stop())

	require.Equal(t, uint64(count), gen.Stats().Sent)
	st := sink.Stats()
	require.Equal(t, uint64(count), st.Received, "every frame sent reached the sink")
	require.Equal(t, uint64(count), st.InOrder)
	require.Zero(t, st.Gaps+st.Late+st.Foreign)
	require.Equal(t, uint64(count), f.Stats().Tx)
	require.Zero(t, p.Pool().InUse(), "every frame is back in the pool")
	require.Greater(t, ticks, 0, "Tick ran while the loops worked")
	require.NoError(t, p.Stop(), "a second Stop has nothing left to do")
}

// TestStopWithNullPortReturnsPromptly: a null port never runs dry, so a
// stop that reads a port until it is empty never ends. Stop closes the
// port instead, which returns what it holds.
func TestStopWithNullPortReturnsPromptly(t *testing.T) {
	p, err := app.New(app.Options{Pool: mbuf.Options{Name: t.Name(), Frames: 1024}, Ports: []string{"null:", "null:"}, Lcores: unpinned(1)})
	require.NoError(t, err)
	in, out := p.Port(0), p.Port(1)
	f, err := fwd.New(fwd.Options{Mode: fwd.ModeIO, In: in, Out: out, Pool: p.Pool(), Cache: p.Cache(0)})
	require.NoError(t, err)
	require.NoError(t, p.Add(app.Stage{Stage: f, Rx: []app.Queue{{in, 0}}, Tx: []app.Queue{{out, 0}}}))
	require.NoError(t, p.Start())
	require.True(t, app.WaitFor(func() bool { return f.Stats().Tx > 0 }, bound), "the forwarder moved frames")

	stopped := make(chan error, 1)
	go func() { stopped <- p.Stop() }()
	select {
	case err := <-stopped:
		require.NoError(t, err)
	case <-time.After(bound):
		t.Fatalf("Stop did not return within %v with a null port", bound)
	}
	require.Zero(t, p.Pool().InUse())
	require.Greater(t, in.Stats().RxPackets, uint64(0))
}

// cachePort is a mem port that records the caches UseCaches hands it, as
// afxdp and afpacket ports take them.
type cachePort struct {
	port.Port
	rx, tx map[int]*mbuf.Cache
}

func (c *cachePort) UseCaches(queue int, rx, tx *mbuf.Cache) error {
	c.rx[queue], c.tx[queue] = rx, tx
	return nil
}

func newCachePorts(t *testing.T, p *app.Pipeline, queues int) (a, b *cachePort) {
	pa, pb, err := mem.NewPair(p.Pool(), mem.PairOptions{Name: t.Name(), Queues: queues})
	require.NoError(t, err)
	a = &cachePort{Port: pa, rx: map[int]*mbuf.Cache{}, tx: map[int]*mbuf.Cache{}}
	b = &cachePort{Port: pb, rx: map[int]*mbuf.Cache{}, tx: map[int]*mbuf.Cache{}}
	p.AddPort(a)
	p.AddPort(b)
	return a, b
}

// TestEachQueueHalfGetsItsLoopsCache: io forwarding A→B on loop 0 and B→A
// on loop 1: the receive half of A and the transmit half of B use loop
// 0's cache, the other two halves loop 1's, so frames return to the cache
// of the loop that received them.
func TestEachQueueHalfGetsItsLoopsCache(t *testing.T) {
	p, err := app.New(app.Options{Pool: mbuf.Options{Name: t.Name(), Frames: 1024}, Lcores: unpinned(2)})
	require.NoError(t, err)
	a, b := newCachePorts(t, p, 1)
	for loop, dir := range [][2]*cachePort{{a, b}, {b, a}} {
		in, out := dir[0], dir[1]
		f, err := fwd.New(fwd.Options{Mode: fwd.ModeIO, In: in, Out: out, Pool: p.Pool(), Cache: p.Cache(loop)})
		require.NoError(t, err)
		require.NoError(t, p.Add(app.Stage{Stage: f, Loop: loop, Rx: []app.Queue{{in, 0}}, Tx: []app.Queue{{out, 0}}}))
	}
	require.NoError(t, p.Start())
	loop0, loop1 := p.Cache(0), p.Cache(1)
	require.NotSame(t, loop0, loop1)
	require.Same(t, loop0, a.rx[0], "A→B receives on A")
	require.Same(t, loop0, b.tx[0], "A→B sends on B")
	require.Same(t, loop1, b.rx[0], "B→A receives on B")
	require.Same(t, loop1, a.tx[0], "B→A sends on A")
	require.NoError(t, p.Stop())
}

// TestPortOwnCachesWiresNothing: the A/B switch leaves the ports alone.
func TestPortOwnCachesWiresNothing(t *testing.T) {
	p, err := app.New(app.Options{Pool: mbuf.Options{Name: t.Name(), Frames: 1024}, Lcores: unpinned(1), PortOwnCaches: true})
	require.NoError(t, err)
	a, b := newCachePorts(t, p, 1)
	f, err := fwd.New(fwd.Options{Mode: fwd.ModeIO, In: a, Out: b, Pool: p.Pool(), Cache: p.Cache(0)})
	require.NoError(t, err)
	require.NoError(t, p.Add(app.Stage{Stage: f, Rx: []app.Queue{{a, 0}}, Tx: []app.Queue{{b, 0}}}))
	require.NoError(t, p.Start())
	require.Empty(t, a.rx)
	require.Empty(t, b.tx)
	require.NoError(t, p.Stop())
}

func TestNewRefusesBadOptions(t *testing.T) {
	ok := app.Options{Pool: mbuf.Options{Name: "bad", Frames: 64}, Lcores: unpinned(1)}
	for _, tc := range []struct {
		name   string
		change func(o *app.Options)
		field  string
		want   string
	}{
		{"no lcores", func(o *app.Options) { o.Lcores = nil }, "Lcores", "none given"},
		{"cpu not allowed", func(o *app.Options) { o.Lcores = []app.Lcore{{CPU: -1}, {CPU: lcore.MaxCPU}} }, "Lcores[1]", "allowed CPU set"},
		{"cpu below -1", func(o *app.Options) { o.Lcores = []app.Lcore{{CPU: -2}} }, "Lcores[0]", "-1 to leave the loop unpinned"},
		{"idle mode", func(o *app.Options) { o.Idle.Mode = 9 }, "Idle", "unknown"},
		{"pool", func(o *app.Options) { o.Pool.Frames = 0 }, "Pool", "Frames 0 out of range"},
		{"empty spec", func(o *app.Options) { o.Ports = []string{"null:", ""} }, "Ports[1]", "empty spec"},
		{"unknown driver", func(o *app.Options) { o.Ports = []string{"null:", "nosuch:x"} }, "Ports[1]", "nosuch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := ok
			tc.change(&o)
			p, err := app.New(o)
			require.Nil(t, p)
			var fe *app.FieldError
			require.ErrorAs(t, err, &fe)
			require.Equal(t, tc.field, fe.Field())
			require.ErrorContains(t, err, tc.want)
			require.ErrorContains(t, err, "app: Options."+tc.field+": ")
		})
	}
}

func TestAddRefusesMisplacedStages(t *testing.T) {
	p, err := app.New(app.Options{Pool: mbuf.Options{Name: t.Name(), Frames: 256}, Ports: []string{"null:"}, Lcores: unpinned(2)})
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Stop()) }()
	in := p.Port(0)
	// A stage for loop (its cache is that loop's: a cache belongs to one
	// goroutine).
	stage := func(loop int) lcore.Stage {
		f, err := fwd.New(fwd.Options{Mode: fwd.ModeRxOnly, In: in, Pool: p.Pool(), Cache: p.Cache(loop)})
		require.NoError(t, err)
		return f
	}
	require.ErrorContains(t, p.Add(app.Stage{}), "Stage.Stage is nil")
	require.ErrorContains(t, p.Add(app.Stage{Stage: stage(0), Loop: 2}), "Loop 2 is not an lcore")
	other, _, err := mem.NewPair(p.Pool(), mem.PairOptions{Name: t.Name()})
	require.NoError(t, err)
	p.Own(other)
	require.ErrorContains(t, p.Add(app.Stage{Stage: stage(0), Rx: []app.Queue{{other, 0}}}), "not the pipeline's")
	require.ErrorContains(t, p.Add(app.Stage{Stage: stage(0), Rx: []app.Queue{{in, 1}}}), "queue 1 of port null: is out of range")
	require.NoError(t, p.Add(app.Stage{Stage: stage(0), Loop: 0, Rx: []app.Queue{{in, 0}}}))
	require.ErrorContains(t, p.Add(app.Stage{Stage: stage(1), Loop: 1, Rx: []app.Queue{{in, 0}}}), "already driven by lcore 0")
	gen, err := traffic.NewGenerator(traffic.GeneratorOptions{Port: in, Pool: p.Pool(), Cache: p.Cache(1)})
	require.NoError(t, err)
	require.NoError(t, p.Add(app.Stage{Stage: gen, Loop: 1, Tx: []app.Queue{{in, 0}}}), "the other half may run on another loop")
	require.NoError(t, p.Start())
	require.ErrorContains(t, p.Add(app.Stage{Stage: stage(0)}), "after Start")
	require.ErrorContains(t, p.Start(), "twice")
}

// holder is a stage that holds one frame from the start; stoppingHolder
// frees it in Stop.
type holder struct {
	pool  *mbuf.Pool
	h     [1]mbuf.Handle
	stops int
	log   *[]string
}

func newHolder(t *testing.T, pool *mbuf.Pool, log *[]string) *holder {
	s := &holder{pool: pool, log: log}
	require.Equal(t, 1, pool.AllocBulk(s.h[:]))
	return s
}

func (s *holder) Name() string        { return "holder" }
func (s *holder) Poll(clock.Time) int { return 0 }

type stoppingHolder struct{ *holder }

func (s stoppingHolder) Stop(clock.Time) {
	s.stops++
	s.pool.Free(s.h[:])
	*s.log = append(*s.log, "stage stopped")
}

type closer struct {
	name string
	log  *[]string
}

func (c closer) Close() error {
	*c.log = append(*c.log, c.name+" closed")
	return nil
}

type loggedPort struct {
	port.Port
	log *[]string
}

func (l loggedPort) Close() error {
	*l.log = append(*l.log, "port closed")
	return l.Port.Close()
}

// TestStopRunsInOrder: stages stop first (here by their loop), then what
// was given to Own, last first, then the ports; then the pool is checked.
func TestStopRunsInOrder(t *testing.T) {
	for _, start := range []bool{true, false} {
		t.Run(fmt.Sprintf("started=%v", start), func(t *testing.T) {
			var log []string
			p, err := app.New(app.Options{Pool: mbuf.Options{Name: t.Name(), Frames: 64}, Lcores: unpinned(1)})
			require.NoError(t, err)
			a, b, err := mem.NewPair(p.Pool(), mem.PairOptions{Name: t.Name()})
			require.NoError(t, err)
			p.AddPort(loggedPort{a, &log})
			p.AddPort(b)
			p.Own(closer{"first", &log})
			p.Own(closer{"second", &log})
			h := newHolder(t, p.Pool(), &log)
			require.NoError(t, p.Add(app.Stage{Stage: stoppingHolder{h}}))
			if start {
				require.NoError(t, p.Start())
			}
			require.Equal(t, 1, p.Pool().InUse())
			require.NoError(t, p.Stop(), "a stage whose loop never ran is stopped by StopLoops")
			require.Equal(t, []string{"stage stopped", "second closed", "first closed", "port closed"}, log)
			require.Equal(t, 1, h.stops)
			require.Zero(t, p.Pool().InUse())
		})
	}
}

// TestStopNamesTheLeak: a stage that keeps a frame makes Stop fail with
// the pool's leak error, and the pool stays open.
func TestStopNamesTheLeak(t *testing.T) {
	var log []string
	p, err := app.New(app.Options{Pool: mbuf.Options{Name: "leaky", Frames: 64, Debug: true}, Lcores: unpinned(1)})
	require.NoError(t, err)
	h := newHolder(t, p.Pool(), &log)
	require.NoError(t, p.Add(app.Stage{Stage: h}))
	require.NoError(t, p.Start())
	err = p.Stop()
	require.ErrorIs(t, err, mbuf.ErrLeak)
	require.ErrorContains(t, err, `pool "leaky": 1 of 64 frames leaked (handles `)
	p.Pool().Free(h.h[:])
	require.NoError(t, p.Pool().Close())
}

func TestRunEndsAndRefusesBadOptions(t *testing.T) {
	p, err := app.New(app.Options{Pool: mbuf.Options{Name: t.Name(), Frames: 256}, Ports: []string{"null:"}, Lcores: unpinned(1)})
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Stop()) }()
	ctx := context.Background()
	_, _, err = p.Run(ctx, app.RunOptions{Duration: time.Millisecond})
	require.ErrorContains(t, err, "Run before Start")
	f, err := fwd.New(fwd.Options{Mode: fwd.ModeRxOnly, In: p.Port(0), Pool: p.Pool(), Cache: p.Cache(0)})
	require.NoError(t, err)
	require.NoError(t, p.Add(app.Stage{Stage: f, Rx: []app.Queue{{p.Port(0), 0}}}))
	require.NoError(t, p.Start())

	_, _, err = p.Run(ctx, app.RunOptions{Duration: -time.Second})
	require.ErrorContains(t, err, "Duration -1s is negative")
	_, _, err = p.Run(ctx, app.RunOptions{Tick: func(time.Duration) {}})
	require.ErrorContains(t, err, "Period 0s must be positive")

	elapsed, interrupted, err := p.Run(ctx, app.RunOptions{Duration: 20 * time.Millisecond})
	require.NoError(t, err)
	require.False(t, interrupted)
	require.GreaterOrEqual(t, elapsed, 20*time.Millisecond)

	_, interrupted, err = p.Run(ctx, app.RunOptions{Duration: bound, Done: func() bool { return f.Stats().Rx > 0 }})
	require.NoError(t, err)
	require.False(t, interrupted, "Done ended the run")

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, interrupted, err = p.Run(cctx, app.RunOptions{})
	require.NoError(t, err)
	require.True(t, interrupted)
}

func TestWaitFor(t *testing.T) {
	require.True(t, app.WaitFor(func() bool { return true }, 0))
	require.False(t, app.WaitFor(func() bool { return false }, 5*time.Millisecond))
	n := 0
	require.True(t, app.WaitFor(func() bool { n++; return n == 3 }, bound))
}
