package sidecar

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/peregrine-net/peregrine/host/shm"
)

// newReapClient is a client over a fresh channel with no socket: the test
// produces the completions itself, as the appliance would.
func newReapClient(t *testing.T, ring int) (*Client, *shm.Producer[shm.Comp]) {
	ch, err := shm.Create("reap-test", shm.Layout{RingSize: ring, Buffers: 1, BufSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ch.Close() })
	c := &Client{Ch: ch, deadCh: make(chan struct{}), kick: make(chan struct{}, 1),
		tokenFree: make(chan struct{}, 1), cc: ch.CompleteConsumer(), comps: make([]shm.Comp, 64)}
	return c, ch.CompleteProducer()
}

// Waiters reaping beside the completion goroutine, on a ring that wraps
// many times: every completion is handed over once. After death nothing
// is handed over, however hard the waiters try.
func TestReapersDeliverEachCompletionOnce(t *testing.T) {
	c, prod := newReapClient(t, 8)
	const total = 20000
	counts := make([]atomic.Int32, total+2)
	var delivered, late atomic.Int64
	var swept atomic.Bool
	sweptCh := make(chan struct{})
	c.startCompletions(func(m shm.Comp) {
		if swept.Load() {
			late.Add(1)
		}
		counts[m.Cookie].Add(1)
		delivered.Add(1)
		c.End()
	}, func() {
		swept.Store(true)
		close(sweptCh)
	})
	// A completion lost (or a ring's indexes broken by two consumers)
	// would leave the test waiting: the guard ends it.
	guard := time.Now().Add(time.Minute)
	var gaveUp atomic.Bool
	stuck := func(what string, args ...any) {
		if time.Now().After(guard) {
			gaveUp.Store(true)
			t.Fatalf(what, args...)
		}
	}
	produce := func(from, to int) {
		one := make([]shm.Comp, 1)
		for i := from; i < to; i++ {
			c.Begin()
			one[0] = shm.Comp{Cookie: uint64(i)}
			for {
				if n, _ := prod.Enqueue(one); n == 1 {
					break
				}
				stuck("no room in the completion ring for completion %d", i)
				runtime.Gosched()
			}
		}
	}
	waitDelivered := func(n int64) {
		for delivered.Load() < n {
			stuck("%d of %d completions handed over", delivered.Load(), n)
			runtime.Gosched()
		}
	}
	// Nobody watches: the completion goroutine alone reaps.
	produce(1, 101)
	waitDelivered(100)
	// Waiters watch and reap by turns, leaving gaps with none watching.
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for delivered.Load() < total && !gaveUp.Load() && time.Now().Before(guard) {
				c.Watch()
				for range 64 {
					c.TryReap()
				}
				c.Unwatch()
				runtime.Gosched()
			}
		}()
	}
	produce(101, total+1)
	wg.Wait()
	waitDelivered(total)
	for i := 1; i <= total; i++ {
		if n := counts[i].Load(); n != 1 {
			t.Fatalf("completion %d handed over %d times", i, n)
		}
	}
	// Death while a completion waits in the ring and waiters reap.
	stop := make(chan struct{})
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Watch()
			defer c.Unwatch()
			for {
				select {
				case <-stop:
					return
				default:
					c.TryReap()
				}
			}
		}()
	}
	c.die()
	<-sweptCh
	produce(total+1, total+2)
	for range 1000 {
		if _, ok := c.TryReap(); ok {
			t.Fatal("a reap after death's sweep")
		}
	}
	close(stop)
	wg.Wait()
	c.wg.Wait()
	if n := late.Load(); n != 0 {
		t.Fatalf("%d completions handed over after death's sweep", n)
	}
	if n := counts[total+1].Load(); n != 0 {
		t.Fatalf("the completion produced after death was handed over %d times", n)
	}
}

// The appliance takes no more descriptors than the completion ring can
// answer. A caller that watches the ring (so the completion goroutine
// leaves it alone) and waits for room in a full submit ring, while the
// completion ring is full too, must reap while it waits, or both wait for
// ever.
func TestSubmitReapsWhileTheRingsAreFull(t *testing.T) {
	c, prod := newReapClient(t, 2)
	c.sub = c.Ch.SubmitProducer()
	cons := c.Ch.SubmitConsumer()
	var delivered atomic.Int64
	c.startCompletions(func(shm.Comp) { delivered.Add(1); c.End() }, func() {})
	c.Watch() // this goroutine waits for an op, as a cancelling waiter does
	for i := range 2 {
		c.Begin()
		if n, _ := prod.Enqueue([]shm.Comp{{Cookie: uint64(i)}}); n != 1 {
			t.Fatal("the completion ring refused a completion")
		}
		if !c.Submit(&shm.Desc{Op: shm.OpCancel, Cookie: uint64(i)}) {
			t.Fatal("a submission refused")
		}
	}
	// The appliance: a descriptor taken for each completion it can make.
	stop := make(chan struct{})
	appliance := make(chan struct{})
	go func() {
		defer close(appliance)
		one := make([]shm.Desc, 1)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if prod.Free() > 0 {
				if n, _ := cons.Dequeue(one); n == 1 {
					prod.Enqueue([]shm.Comp{{Cookie: one[0].Cookie}})
				}
			}
			runtime.Gosched()
		}
	}()
	submitted := make(chan bool, 1)
	go func() { submitted <- c.Submit(&shm.Desc{Op: shm.OpCancel, Cookie: 2}) }()
	select {
	case ok := <-submitted:
		if !ok {
			t.Fatal("the submission was refused")
		}
	case <-time.After(30 * time.Second): // a hang guard
		t.Fatal("Submit waits for room that only its own reaping can make")
	}
	if delivered.Load() == 0 {
		t.Fatal("no completion was reaped")
	}
	c.Unwatch()
	close(stop)
	<-appliance
	c.die()
	c.wg.Wait()
}
