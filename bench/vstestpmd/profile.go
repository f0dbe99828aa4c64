package vstestpmd

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"syscall"
)

// ProfileEnv names the environment variable that turns on profiling of the
// measurement windows: PEREGRINE_VS_PROFILE=DIR writes, for every
// measurement, DIR/ROW_SIZEB_rROUND_SIDE.perf.data (`perf record -g` of the
// device-under-test CPU, both sides, kernel included), DIR/...SIDE.stat
// (`perf stat` counts of the socket syscalls made on that CPU) and, for peregrine's
// side, DIR/ROW_SIZEB_rROUND_peregrine.pprof (a Go CPU profile of the
// process). Read them with `perf report -i FILE` and `go tool pprof FILE`.
// A knob for finding where time goes, not for measuring: perf's sampling
// costs a few percent of the CPU it watches, on both sides alike.
const ProfileEnv = "PEREGRINE_VS_PROFILE"

// profiler records one measurement window; the zero value (profiling off)
// does nothing.
type profiler struct {
	dir string
}

// window is one running recording.
type window struct {
	perf, stat *exec.Cmd
	pprof      *os.File
}

// start begins recording the window of one measurement, with a Go CPU
// profile too when goProfile is set. On error nothing is left running.
func (p profiler) start(name string, goProfile bool) (*window, error) {
	if p.dir == "" {
		return nil, nil
	}
	w := &window{}
	base := filepath.Join(p.dir, name)
	var errs []error
	if perf, err := exec.LookPath("perf"); err == nil {
		cpu := fmt.Sprint(dutCPU)
		record := exec.Command(perf, "record", "-q", "-g", "-C", cpu, "-o", base+".perf.data")
		// How often each side enters the kernel, per syscall: the driver's
		// kick and wake-up policies show here.
		stat := exec.Command(perf, "stat", "-x,", "-C", cpu, "-o", base+".stat",
			"-e", "syscalls:sys_enter_sendto,syscalls:sys_enter_recvfrom,syscalls:sys_enter_poll,syscalls:sys_enter_sendmsg,syscalls:sys_enter_recvmsg")
		for _, c := range []struct {
			cmd *exec.Cmd
			to  **exec.Cmd
		}{{record, &w.perf}, {stat, &w.stat}} {
			if err := c.cmd.Start(); err != nil {
				errs = append(errs, fmt.Errorf("vstestpmd: starting %v: %w", c.cmd.Args[:2], err))
			} else {
				*c.to = c.cmd
			}
		}
	} else {
		errs = append(errs, fmt.Errorf("vstestpmd: %s is set but perf is not installed: %w", ProfileEnv, err))
	}
	if goProfile {
		f, err := os.Create(base + ".pprof")
		if err != nil {
			errs = append(errs, fmt.Errorf("vstestpmd: %w", err))
		} else if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			errs = append(errs, fmt.Errorf("vstestpmd: starting the CPU profile: %w", err))
		} else {
			w.pprof = f
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, errors.Join(err, w.stop())
	}
	return w, nil
}

// stop ends the recording; nil is a no-op.
func (w *window) stop() error {
	if w == nil {
		return nil
	}
	var errs []error
	if w.pprof != nil {
		pprof.StopCPUProfile()
		errs = append(errs, w.pprof.Close())
	}
	for _, cmd := range []*exec.Cmd{w.perf, w.stat} {
		if cmd == nil {
			continue
		}
		// SIGINT makes perf write its file and exit 0 (or report the
		// signal as its exit status, which is no failure here).
		errs = append(errs, cmd.Process.Signal(syscall.SIGINT))
		_ = cmd.Wait()
	}
	return errors.Join(errs...)
}
