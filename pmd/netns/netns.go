package netns

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/peregrine-net/peregrine/internal/tools"
)

// Dir is where iproute2 keeps the bind mounts that name namespaces.
const Dir = "/run/netns"

// ErrExists is wrapped by Create when a namespace of that name exists.
var ErrExists = errors.New("netns: namespace already exists")

// ErrNotExist is wrapped by Do and Exec when the namespace is gone.
var ErrNotExist = errors.New("netns: namespace does not exist")

// ErrPermission is wrapped when the kernel refuses an operation for lack of
// privilege.
var ErrPermission = errors.New("netns: permission denied (needs root: CAP_SYS_ADMIN and CAP_NET_ADMIN)")

// NS is a named network namespace, as listed by `ip netns`.
type NS struct {
	Name string
}

// Open returns the existing namespace name, without creating it.
func Open(name string) (*NS, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	ns := &NS{Name: name}
	if !ns.exists() {
		return nil, fmt.Errorf("%w: %q (no %s; create it with `ip netns add %s`)", ErrNotExist, name, ns.Path(), name)
	}
	return ns, nil
}

// Create adds the namespace name (`ip netns add`) and brings its loopback
// up. It fails with ErrExists if the name is taken.
func Create(name string) (*NS, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	ns := &NS{Name: name}
	if ns.exists() {
		return nil, fmt.Errorf("%w: %q (pick another name or delete it with `ip netns del %s`)", ErrExists, name, name)
	}
	if _, err := run("ip", "netns", "add", name); err != nil {
		return nil, err
	}
	if _, err := run("ip", "-n", name, "link", "set", "lo", "up"); err != nil {
		_ = ns.Delete()
		return nil, err
	}
	return ns, nil
}

// Path is the file that names the namespace; opening it yields a
// namespace fd for setns(2).
func (ns *NS) Path() string { return filepath.Join(Dir, ns.Name) }

func (ns *NS) exists() bool {
	_, err := os.Stat(ns.Path())
	return err == nil
}

// Delete removes the namespace (`ip netns del`). Deleting a namespace that
// is already gone is not an error.
func (ns *NS) Delete() error {
	if !ns.exists() {
		return nil
	}
	if _, err := run("ip", "netns", "del", ns.Name); err != nil {
		if !ns.exists() {
			return nil // raced with another Delete
		}
		return err
	}
	return nil
}

// String returns the namespace's name.
func (ns *NS) String() string { return ns.Name }

// Do runs fn on a goroutine locked to an OS thread that has been switched
// into the namespace, and returns fn's error. Sockets fn creates belong to
// the namespace for their whole life. Goroutines fn starts do not run in
// the namespace. If the thread cannot be switched back, it is left locked
// so that the runtime destroys it when the goroutine ends, and Do returns
// an error. A panic in fn is re-raised in the caller.
func (ns *NS) Do(fn func() error) error {
	target, err := unix.Open(ns.Path(), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("%w: %q (no %s)", ErrNotExist, ns.Name, ns.Path())
		}
		return fmt.Errorf("netns: open %s: %w", ns.Path(), err)
	}
	defer unix.Close(target)

	type outcome struct {
		err      error
		panicked bool
		panicVal any
	}
	done := make(chan outcome, 1)
	go func() {
		finished := false
		defer func() {
			if !finished {
				// fn called runtime.Goexit (t.FailNow does): the thread,
				// still locked and maybe still inside ns, dies with us.
				done <- outcome{err: fmt.Errorf("netns: fn ended its goroutine in %q with runtime.Goexit (do not call t.FailNow inside Do)", ns.Name)}
			}
		}()
		runtime.LockOSThread()
		origin, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			finished = true
			done <- outcome{err: fmt.Errorf("netns: open this thread's namespace: %w", err)}
			return
		}
		defer unix.Close(origin)
		if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			finished = true
			done <- outcome{err: setnsError(ns.Name, err)}
			return
		}
		var out outcome
		func() {
			defer func() {
				if r := recover(); r != nil {
					out.panicked, out.panicVal = true, r
				}
			}()
			out.err = fn()
		}()
		if err := unix.Setns(origin, unix.CLONE_NEWNET); err != nil {
			// The thread stays locked: when this goroutine returns the
			// runtime kills it rather than reuse a thread in the wrong
			// namespace.
			finished = true
			done <- outcome{err: fmt.Errorf("netns: switching back from %q failed (the thread is discarded): %w", ns.Name, err)}
			return
		}
		runtime.UnlockOSThread()
		finished = true
		done <- out
	}()
	out := <-done
	if out.panicked {
		panic(out.panicVal)
	}
	return out.err
}

func setnsError(name string, err error) error {
	if errors.Is(err, unix.EPERM) {
		return fmt.Errorf("netns: enter %q: %w: %w", name, ErrPermission, err)
	}
	return fmt.Errorf("netns: enter %q: %w", name, err)
}

// Exec runs argv inside the namespace (`ip netns exec NAME argv...`) and
// returns its combined output; on failure the error carries that output.
func (ns *NS) Exec(argv ...string) ([]byte, error) {
	if len(argv) == 0 {
		return nil, errors.New("netns: Exec: no command given (pass argv, e.g. \"ip\", \"link\")")
	}
	if !ns.exists() {
		return nil, fmt.Errorf("%w: %q (no %s)", ErrNotExist, ns.Name, ns.Path())
	}
	// ip would report only `exec of "ethtool" failed`; say what to install.
	if _, err := tools.Find(argv[0]); errors.Is(err, tools.ErrMissing) {
		return nil, fmt.Errorf("netns: Exec in %q: %w", ns.Name, err)
	}
	return run("ip", append([]string{"netns", "exec", ns.Name}, argv...)...)
}

// InterfaceNames lists the interfaces in ns (the caller's namespace when ns
// is nil), for error messages that name the choices.
func InterfaceNames(ns *NS) ([]string, error) {
	var names []string
	list := func() error {
		ifs, err := net.Interfaces()
		if err != nil {
			return fmt.Errorf("netns: list interfaces: %w", err)
		}
		for _, i := range ifs {
			names = append(names, i.Name)
		}
		return nil
	}
	if ns == nil {
		return names, list()
	}
	return names, ns.Do(list)
}

// List returns the names of every namespace in Dir.
func List() ([]string, error) {
	entries, err := os.ReadDir(Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("netns: list %s: %w", Dir, err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names, nil
}

// checkName accepts what is safe as a file name under Dir and as a shell
// word in the messages we print.
func checkName(name string) error {
	if name == "" || len(name) > 64 {
		return fmt.Errorf("netns: name %q must be 1..64 characters (e.g. \"pg-a\")", name)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') || name == "." || name == ".." {
			return fmt.Errorf("netns: name %q may hold only letters, digits, '-', '_' and '.' (e.g. \"pg-a\")", name)
		}
	}
	return nil
}

// run executes a control command and folds its output into the error.
func run(name string, args ...string) ([]byte, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		cmd := name + " " + strings.Join(args, " ")
		if errors.Is(err, exec.ErrNotFound) {
			return out, fmt.Errorf("netns: %s: %w (%s)", cmd, err, tools.Hint(name))
		}
		if strings.Contains(msg, "Operation not permitted") || strings.Contains(msg, "Permission denied") {
			return out, fmt.Errorf("netns: %s: %w: %s", cmd, ErrPermission, msg)
		}
		return out, fmt.Errorf("netns: %s: %w: %s", cmd, err, msg)
	}
	return out, nil
}
