package host

import (
	"testing"
	"time"

	"github.com/peregrine-net/peregrine"
	"github.com/peregrine-net/peregrine/host/shm"
)

// The appliance allocates nothing per descriptor in steady state: taking a
// Send and a Recv from the ring (an echo round trip, as an application's
// RPC), a Push and a Pull of a region, starting them, reaping them and
// posting their completions.
func TestPollAllocsNothingPerDescriptor(t *testing.T) {
	r := newConsumerRig(t, true)
	a, err := newApp(r.s, nil, 1, 0, 0, r.s.opts.Default)
	if err != nil {
		t.Fatal(err)
	}
	defer a.ch.Close()
	a.conns[0] = r.conn
	sm, err := shm.CreateRegion("allocs", 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer sm.Close()
	reg, err := r.s.ep.Register(sm.Bytes(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.s.ep.Deregister(reg)
	a.regions[0] = &appRegion{mem: sm, reg: reg}
	remote, err := r.peer.Register(make([]byte, 4096), peregrine.RemoteWrite|peregrine.RemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	key := remote.Remote(0).Key
	prod := a.ch.SubmitProducer()
	comps := a.ch.CompleteConsumer()
	descs := []shm.Desc{{Op: shm.OpSend, Conn: 1, Buf: 0, Len: 1000}, {Op: shm.OpRecv, Conn: 1, Buf: 1, Len: 4096},
		{Op: shm.OpPush, Conn: 1, Buf: 1, Len: 1024, Key: key}, {Op: shm.OpPull, Conn: 1, Buf: 1, Off: 1024, Len: 1024, Key: key}}
	got := make([]shm.Comp, len(descs))
	cookie := uint64(0)
	cycle := func() {
		for i := range descs {
			cookie++
			descs[i].Cookie = cookie
		}
		if n, _ := prod.Enqueue(descs); n != len(descs) {
			t.Fatal("submit ring full")
		}
		deadline := time.Now().Add(10 * time.Second)
		for k := 0; k < len(descs); {
			a.poll(false, k%2 == 0) // the loop's sleep mirrored into the header, both ways
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
			if c.Status != 0 || c.Cookie+uint64(len(descs)) <= cookie || c.Cookie > cookie {
				t.Fatalf("completion %+v for cookies up to %d", c, cookie)
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
