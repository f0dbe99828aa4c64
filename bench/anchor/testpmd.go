package anchor

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultTestpmdDuration is a forwarding time long enough that the ~1 ms
// uncertainty of when forwarding starts and stops is below 0.1 %.
const DefaultTestpmdDuration = 5 * time.Second

// MaxTestpmdDuration bounds TestpmdNullIOFwd's dur.
const MaxTestpmdDuration = 5 * time.Minute

const (
	// testpmd starts in ~2.5 s here (most of it creating 155456 mbufs).
	testpmdStartTimeout = 60 * time.Second
	testpmdStopTimeout  = 30 * time.Second
	testpmdPrompt       = "testpmd> "
)

// TestpmdNullIOFwd runs dpdk-testpmd in io forwarding mode between two
// net_null ports (each port's rx burst conjures 64-byte packets, its tx
// frees them) with lcore 0 as the main lcore and lcore 1 as the ONE
// forwarding core, which polls both streams (port 0 -> 1 and 1 -> 0).
//
// It drives testpmd's interactive prompt: after "start" it waits dur, then
// sends "stop" and reads "Accumulated forward statistics for all ports";
// the result is accumulated TX-packets (both directions together) divided
// by the time between sending "start" and "stop", in millions per second.
// Startup and shutdown add ~3 s to dur. When ctx ends, testpmd's process
// group is killed.
func TestpmdNullIOFwd(ctx context.Context, dur time.Duration) (mpps float64, err error) {
	if dur <= 0 || dur > MaxTestpmdDuration {
		return 0, fmt.Errorf("anchor: testpmd duration %v is outside (0, %v] (use e.g. %v)", dur, MaxTestpmdDuration, DefaultTestpmdDuration)
	}
	path, err := lookTool("dpdk-testpmd")
	if err != nil {
		return 0, err
	}
	args := append(ealBaseArgs(), "-m", "1024", "-l", "0,1", "--log-level=lib.eal:error",
		"--vdev", "net_null0", "--vdev", "net_null1",
		"--", "-i", "--forward-mode=io")

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := groupCommand(runCtx, path, args...)
	out := newPromptWatcher()
	cmd.Stdout = out
	cmd.Stderr = out
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return 0, fmt.Errorf("anchor: testpmd stdin: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("anchor: starting %s: %w", path, err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	defer func() {
		cancel() // kills the group unless testpmd already quit
		<-exited
	}()

	fail := func(step string, err error) (float64, error) {
		return 0, fmt.Errorf("anchor: testpmd %s: %w\n%s", step, err, tail(out.String(), 20))
	}
	send := func(command string) error {
		_, err := io.WriteString(stdin, command+"\n")
		return err
	}

	if err := out.waitPrompts(runCtx, exited, 1, testpmdStartTimeout); err != nil {
		return fail("startup", err)
	}
	if err := send("start"); err != nil {
		return fail("start", err)
	}
	started := time.Now()
	if err := out.waitPrompts(runCtx, exited, 2, testpmdStopTimeout); err != nil {
		return fail("start", err)
	}
	timer := time.NewTimer(dur - time.Since(started))
	select {
	case <-timer.C:
	case <-exited:
		return fail("forwarding", errors.New("exited before stop"))
	case <-runCtx.Done():
		timer.Stop()
		return fail("forwarding", runCtx.Err())
	}
	if err := send("stop"); err != nil {
		return fail("stop", err)
	}
	elapsed := time.Since(started)
	if err := out.waitPrompts(runCtx, exited, 3, testpmdStopTimeout); err != nil {
		return fail("stop", err)
	}
	if err := send("quit"); err != nil {
		return fail("quit", err)
	}
	_ = stdin.Close()
	select {
	case <-exited:
	case <-time.After(testpmdStopTimeout):
		return fail("quit", errors.New("did not exit"))
	case <-runCtx.Done():
		return fail("quit", runCtx.Err())
	}
	if waitErr != nil {
		return fail("exit", waitErr)
	}
	packets, err := parseAccumulatedTx(out.String())
	if err != nil {
		return 0, err
	}
	return float64(packets) / elapsed.Seconds() / 1e6, nil
}

// parseAccumulatedTx returns TX-packets from the "Accumulated forward
// statistics for all ports" block that testpmd prints on "stop".
func parseAccumulatedTx(out string) (uint64, error) {
	sc := bufio.NewScanner(strings.NewReader(out))
	inBlock := false
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.Contains(line, "Accumulated forward statistics for all ports") {
			inBlock = true
			continue
		}
		if !inBlock {
			continue
		}
		if rest, ok := strings.CutPrefix(line, "TX-packets:"); ok {
			fields := strings.Fields(rest)
			if len(fields) == 0 {
				break
			}
			n, err := strconv.ParseUint(fields[0], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("anchor: testpmd line %q: %w", line, ErrUnexpectedOutput)
			}
			return n, nil
		}
		if strings.HasPrefix(line, "++++") {
			break
		}
	}
	return 0, fmt.Errorf("anchor: testpmd printed no accumulated TX-packets: %w", ErrUnexpectedOutput)
}

// promptWatcher collects a tool's output and counts the prompts in it, so
// the caller can wait until the tool is ready for its next command.
// testpmd's prompt is written with write(2) straight away, while the rest
// of its output sits in stdio buffers until exit, so prompts are the only
// reliable sign of progress.
type promptWatcher struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	prompts int
	scanned int // where the next prompt search starts
	changed chan struct{}
}

func newPromptWatcher() *promptWatcher {
	return &promptWatcher{changed: make(chan struct{}, 1)}
}

func (w *promptWatcher) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	data := w.buf.Bytes()
	from := w.scanned
	for {
		i := bytes.Index(data[from:], []byte(testpmdPrompt))
		if i < 0 {
			break
		}
		w.prompts++
		from += i + len(testpmdPrompt)
	}
	// A prompt that straddles this write and the next starts in the last
	// len(prompt)-1 bytes; never rescan a prompt already counted.
	w.scanned = max(from, len(data)-len(testpmdPrompt)+1)
	select {
	case w.changed <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (w *promptWatcher) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func (w *promptWatcher) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.prompts
}

// waitPrompts returns once n prompts have been seen, or fails when the
// process exits, ctx ends, or timeout passes first.
func (w *promptWatcher) waitPrompts(ctx context.Context, exited <-chan struct{}, n int, timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for w.count() < n {
		select {
		case <-w.changed:
		case <-exited:
			if w.count() >= n {
				return nil
			}
			return errors.New("exited early")
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("no prompt within %v", timeout)
		}
	}
	return nil
}
