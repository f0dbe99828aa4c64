//go:build unix

package anchor

import (
	"os/exec"
	"syscall"
)

func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		// Negative pid: the whole group the child leads.
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
