package host

import (
	"testing"
	"time"

	"github.com/peregrine-net/peregrine/host/shm"
)

// The appliance allocates nothing per descriptor in steady state: taking a
// Send and a Recv from the ring, starting them, reaping them and posting
// their completions (an echo round trip, as an application's RPC).
func TestPollAllocsNothingPerDescriptor(t *testing.T) {
	r := newConsumerRig(t, true)
	a, err := newApp(r.s, nil, 1, 0, 0, r.s.opts.Default)
	if err != nil {
		t.Fatal(err)
	}
	defer a.ch.Close()
	a.conns[0] = r.conn
	prod := a.ch.SubmitProducer()
	comps := a.ch.CompleteConsumer()
	two := []shm.Desc{{Op: shm.OpSend, Conn: 1, Buf: 0, Len: 1000}, {Op: shm.OpRecv, Conn: 1, Buf: 1, Len: 4096}}
	got := make([]shm.Comp, 2)
	cycle := func() {
		two[0].Cookie += 2
		two[1].Cookie = two[0].Cookie + 1
		if n, _ := prod.Enqueue(two); n != 2 {
			t.Fatal("submit ring full")
		}
		deadline := time.Now().Add(10 * time.Second)
		for k := 0; k < 2; {
			a.poll()
			n, _ := comps.Dequeue(got[k:])
			k += n
			if n == 0 {
				time.Sleep(0) // leave the CPU to the endpoints' loops
			}
			if time.Now().After(deadline) {
				t.Fatal("no completion")
			}
		}
		for _, c := range got {
			if c.Status != 0 || (c.Cookie != two[0].Cookie && c.Cookie != two[1].Cookie) {
				t.Fatalf("completion %+v for cookies %d, %d", c, two[0].Cookie, two[1].Cookie)
			}
		}
	}
	for range 10 {
		cycle()
	}
	// Few runs: each cycle here takes tens of milliseconds (the client's
	// round trips through Server.Run do not), which is unexplained.
	if n := testing.AllocsPerRun(30, cycle); n != 0 {
		t.Fatalf("%.2f allocations per descriptor, want 0", n)
	}
}
