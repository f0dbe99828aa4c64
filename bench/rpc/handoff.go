package rpc

import (
	"fmt"
	"io"
	"runtime"
	"time"
)

// handoffRounds is how many channel round trips handoffFloor times.
const handoffRounds = 20000

// handoffFloor prints what one hand-off between goroutines costs on this
// machine, the floor under every door that passes a request from an
// application goroutine to a poll loop and the answer back: a channel
// round trip between two plain goroutines (the runtime spins before it
// parks one, so no thread sleeps), and the same with the answering
// goroutine locked to its OS thread, as the endpoints' loops are — then
// every hand-off wakes that thread (a futex, a cross-CPU wake-up on a
// VM), which is what the api and sidecar rows pay, several times a round
// trip.
func handoffFloor(w io.Writer) {
	for _, locked := range []bool{false, true} {
		ns := handoffRoundTrip(locked)
		name := map[bool]string{false: "goroutines", true: "locked_thread"}[locked]
		fmt.Fprintf(w, "FIGURE rpc_handoff_%s_roundtrip_ns %.0f\n", name, ns)
	}
	fmt.Fprintf(w, "  # a channel round trip, %d timed: between two goroutines, and with the answering one locked to its OS thread as a poll loop is (each hand-off then wakes that thread)\n", handoffRounds)
}

func handoffRoundTrip(locked bool) float64 {
	ask, answer := make(chan int), make(chan int)
	go func() {
		if locked {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
		}
		for v := range ask {
			answer <- v
		}
	}()
	defer close(ask)
	for i := range 100 { // warm-up: the threads exist, the goroutine runs
		ask <- i
		<-answer
	}
	t := time.Now()
	for i := range handoffRounds {
		ask <- i
		<-answer
	}
	return float64(time.Since(t).Nanoseconds()) / handoffRounds
}
