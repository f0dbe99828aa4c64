package host

import (
	"testing"
	"time"

	"github.com/peregrine-net/peregrine/host/shm"
)

// The appliance allocates nothing per descriptor in steady state: taking a
// Send from the ring, starting it, reaping it and posting its completion.
func TestPollAllocsNothingPerDescriptor(t *testing.T) {
	r := newConsumerRig(t)
	a, err := newApp(r.s, nil, 1, 0, 0, r.s.opts.Default)
	if err != nil {
		t.Fatal(err)
	}
	defer a.ch.Close()
	a.conns[0] = r.conn
	prod := a.ch.SubmitProducer()
	comps := a.ch.CompleteConsumer()
	one := []shm.Desc{{Op: shm.OpSend, Conn: 1, Buf: 0, Len: 1000}}
	got := make([]shm.Comp, 1)
	cycle := func() {
		one[0].Cookie++
		if n, _ := prod.Enqueue(one); n != 1 {
			t.Fatal("submit ring full")
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			a.poll()
			if n, _ := comps.Dequeue(got); n == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("no completion")
			}
		}
		if got[0].Status != 0 || got[0].Cookie != one[0].Cookie {
			t.Fatalf("completion %+v for cookie %d", got[0], one[0].Cookie)
		}
	}
	for range 10 {
		cycle()
	}
	// One-way Sends here take tens of milliseconds each to complete (the
	// echo round trip of the client's test does not): few runs keep the
	// test short.
	if n := testing.AllocsPerRun(20, cycle); n != 0 {
		t.Fatalf("%.2f allocations per descriptor, want 0", n)
	}
}
