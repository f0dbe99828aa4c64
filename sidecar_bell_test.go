package peregrine_test

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/peregrine-net/peregrine"
)

// An application's descriptor wakes the appliance's sleeping loop: the
// loop (pinned, PollLoop) mirrors its sleep into the channel's header,
// and the client, finding it set after it publishes a Recv, writes the
// channel's bell. No frame is sent while the Recv waits, so no mem port
// rings the loop: every sleep it counts as ended by input is the bell's.
func TestSidecarBellWakesTheAppliance(t *testing.T) {
	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err != nil {
		t.Fatal(err)
	}
	cpu := 0
	for !allowed.IsSet(cpu) {
		cpu++
	}
	mine, appliance, peer, _ := openSidecarAppliance(t, peregrine.Options{Pin: true, CPU: cpu})
	if has, _ := peregrine.SidecarBell(mine); !has {
		t.Fatal("an appliance on a pinned loop gave the application no bell")
	}
	ctx := doorCtx(t)
	c, _ := dialPeer(t, mine, peer, peregrine.ConnOptions{})
	buf := make([]byte, 64)
	for i := range 3 {
		for { // until the loop, idle, says it sleeps
			if _, asleep := peregrine.SidecarBell(mine); asleep {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("round %d: the channel's header never said the appliance's loop sleeps", i)
			}
			runtime.Gosched()
		}
		before := peregrine.LoopStats(appliance).InputWakes
		var op peregrine.Op
		if err := c.RecvAsync(&op, buf); err != nil {
			t.Fatal(err)
		}
		for peregrine.LoopStats(appliance).InputWakes == before {
			if ctx.Err() != nil {
				t.Fatalf("round %d: the Recv's descriptor, published while the loop slept, woke it not", i)
			}
			runtime.Gosched()
		}
		op.Cancel()
		if _, err := op.Wait(ctx); err == nil {
			t.Fatalf("round %d: a cancelled Recv with nothing sent completed", i)
		}
	}
}

// An appliance whose callers poll (PollCaller) has no bell to give; the
// application then only publishes, and still works.
func TestSidecarWithoutBell(t *testing.T) {
	mine, peer := openSidecar(t, peregrine.Options{Poll: peregrine.PollCaller})
	if has, _ := peregrine.SidecarBell(mine); has {
		t.Fatal("a bell from an appliance whose callers poll")
	}
	ctx := doorCtx(t)
	c, p := dialPeer(t, mine, peer, peregrine.ConnOptions{})
	if err := c.Send(ctx, []byte("no bell")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	if n, err := p.Recv(ctx, buf); err != nil || string(buf[:n]) != "no bell" {
		t.Fatalf("peer got %q, %v", buf[:n], err)
	}
}
