package vstestpmd

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// maxStolen is the share of a measurement window other work may take from
// the generator's or the device under test's pinned thread before the
// round is measured again: the machine is shared, and a compile job
// landing on CPU 1 for a second halves whichever side is running then.
const maxStolen = 0.05

// stolenRedos bounds how often one round is measured again.
const stolenRedos = 2

// thread is one pinned thread of a process.
type thread struct {
	pid, tid, cpu int
}

// taskTimes are a thread's scheduler counters (/proc/PID/task/TID/schedstat):
// nanoseconds on a CPU, and runnable but waiting for one.
type taskTimes struct {
	run, wait uint64
}

// stealMeter measures, over a window, how long the busiest thread pinned
// to each of the generator's and the device under test's CPUs waited for
// its CPU while runnable: time other work took from it.
type stealMeter struct {
	threads []thread
	start   []taskTimes
	began   time.Time
}

// startSteal finds the threads of pids pinned to genCPU or dutCPU alone
// and reads their counters. It never fails: a thread it cannot read is
// left out (the figures are advisory).
func startSteal(pids ...int) *stealMeter {
	m := &stealMeter{began: time.Now()}
	for _, pid := range pids {
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			continue
		}
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil {
				continue
			}
			cpu, ok := pinnedCPU(pid, tid)
			if !ok || cpu != genCPU && cpu != dutCPU {
				continue
			}
			times, err := readTaskTimes(pid, tid)
			if err != nil {
				continue
			}
			m.threads = append(m.threads, thread{pid, tid, cpu})
			m.start = append(m.start, times)
		}
	}
	return m
}

// stop returns the share of the window the busiest pinned thread of each
// CPU spent waiting for it (0 when none was found).
func (m *stealMeter) stop() (gen, dut float64) {
	elapsed := float64(time.Since(m.began).Nanoseconds())
	var busiest [2]uint64
	var share [2]float64
	for i, t := range m.threads {
		end, err := readTaskTimes(t.pid, t.tid)
		if err != nil {
			continue
		}
		k := 0
		if t.cpu == dutCPU {
			k = 1
		}
		if run := end.run - m.start[i].run; run >= busiest[k] {
			busiest[k] = run
			// At most the whole window: the kernel adds a wait to the
			// thread's counters when the wait ends, so one that began
			// before the window counts whole in it (1.06 of a window
			// was read).
			share[k] = min(float64(end.wait-m.start[i].wait)/elapsed, 1)
		}
	}
	return share[0], share[1]
}

// pinnedCPU reports the CPU a thread may run on when it may run on one
// only (Cpus_allowed_list in /proc/PID/task/TID/status).
func pinnedCPU(pid, tid int) (int, bool) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/status", pid, tid))
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			cpu, err := strconv.Atoi(strings.TrimSpace(v))
			return cpu, err == nil
		}
	}
	return 0, false
}

func readTaskTimes(pid, tid int) (taskTimes, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/schedstat", pid, tid))
	if err != nil {
		return taskTimes{}, err
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return taskTimes{}, fmt.Errorf("vstestpmd: schedstat of %d/%d: %q", pid, tid, b)
	}
	run, err1 := strconv.ParseUint(f[0], 10, 64)
	wait, err2 := strconv.ParseUint(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		return taskTimes{}, fmt.Errorf("vstestpmd: schedstat of %d/%d: %q", pid, tid, b)
	}
	return taskTimes{run, wait}, nil
}

// testpmdPids returns the processes named dpdk-testpmd.
func testpmdPids() []int {
	procs, _ := filepath.Glob("/proc/[0-9]*/comm")
	var pids []int
	for _, p := range procs {
		comm, err := os.ReadFile(p)
		if err != nil || strings.TrimSpace(string(comm)) != "dpdk-testpmd" {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}
