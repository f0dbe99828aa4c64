package lcore

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// loopThreadPrefix starts the name (/proc/PID/task/TID/comm, as ps and top
// show it) of every thread a loop pins, as DPDK names its lcore threads:
// isolate tells loops from the runtime's other threads by it.
const loopThreadPrefix = "lcore-"

// nameLoopThread names the calling thread after the CPU its loop pins it to.
func nameLoopThread(cpu int) error {
	name := loopThreadPrefix + strconv.Itoa(cpu)
	return os.WriteFile(fmt.Sprintf("/proc/self/task/%d/comm", unix.Gettid()), []byte(name), 0)
}

// isolate takes cpu away from every thread of the process but the loops'
// (named by nameLoopThread), as DPDK's EAL keeps its control threads off
// the lcores: the Go runtime's other threads (sysmon, the GC's workers,
// the program's other goroutines) then never preempt the calling loop.
// Threads the runtime starts later inherit the mask of the thread that
// starts them, and a locked thread (a pinned loop) never starts one (the
// runtime hands that to its template thread), so they stay off cpu too.
// A thread that may only run on cpu keeps it. The returned func gives cpu
// back to every thread but the loops'.
func isolate(cpu int) (undo func(), err error) {
	err = eachOtherThread(func(set *unix.CPUSet) bool {
		if !set.IsSet(cpu) || set.Count() == 1 {
			return false
		}
		set.Clear(cpu)
		return true
	})
	undo = func() {
		_ = eachOtherThread(func(set *unix.CPUSet) bool {
			if set.IsSet(cpu) {
				return false
			}
			set.Set(cpu)
			return true
		})
	}
	if err != nil {
		undo()
		return nil, err
	}
	return undo, nil
}

// eachOtherThread calls change with the affinity of every thread of the
// process that is not a loop's, and applies the mask when change reports it
// changed it. Threads that exit meanwhile are skipped.
func eachOtherThread(change func(set *unix.CPUSet) bool) error {
	entries, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return fmt.Errorf("list the process's threads: %w", err)
	}
	for _, ent := range entries {
		tid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/comm", tid))
		if err != nil || strings.HasPrefix(string(comm), loopThreadPrefix) {
			continue // exited, or a loop's
		}
		var set unix.CPUSet
		if unix.SchedGetaffinity(tid, &set) != nil || !change(&set) {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil && err != unix.ESRCH {
			return fmt.Errorf("set the affinity of thread %d: %w", tid, err)
		}
	}
	return nil
}
