package anchor

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultTestpmdDuration is a forwarding time long enough that the ~1 ms
// uncertainty of when forwarding starts and stops is below 0.1 %.
const DefaultTestpmdDuration = 5 * time.Second

// MaxTestpmdDuration bounds TestpmdOptions.Duration.
const MaxTestpmdDuration = 5 * time.Minute

const (
	// testpmd starts in ~2.5 s here (most of it creating 155456 mbufs).
	testpmdStartTimeout = 60 * time.Second
	testpmdStopTimeout  = 30 * time.Second
	testpmdPrompt       = "testpmd> "
)

// TestpmdOptions configure Testpmd. Zero fields take their defaults.
type TestpmdOptions struct {
	// Netns, when set, runs testpmd inside that network namespace
	// (`ip netns exec NETNS dpdk-testpmd ...`), where its vdevs' interfaces
	// live.
	Netns string
	// Vdevs are the --vdev arguments, one port each (at least one), e.g.
	// "net_af_xdp0,iface=veth0,start_queue=0,queue_count=1",
	// "net_af_packet0,iface=veth0" or "net_null0".
	Vdevs []string
	// ForwardMode is testpmd's --forward-mode: io, rxonly, txonly, mac,
	// macswap... Default io.
	ForwardMode string
	// TxPktLen is --txpkts, the txonly frame length without FCS (0:
	// testpmd's default, 64).
	TxPktLen int
	// Lcores is EAL's -l list: the first is the main lcore (the prompt),
	// the others forward. Default "0,1": one forwarding lcore, CPU 1.
	Lcores string
	// Duration is the forwarding time, from sending "start" to sending
	// "stop": (0, MaxTestpmdDuration].
	Duration time.Duration
	// MemoryMB is EAL's -m. Default 1024.
	MemoryMB int
	// TotalMbufs is --total-num-mbufs; 0 keeps testpmd's default (155456
	// here, which takes ~2.5 s of the startup to create).
	TotalMbufs int
	// ExtraArgs are appended to testpmd's own arguments (after "--").
	ExtraArgs []string
	// BeforeStart is called just before "start" is sent and AfterStop once
	// "stop" has finished (forwarding has ended), so the caller can read
	// counters of its own (a sink's, say) around the forwarding window.
	BeforeStart, AfterStop func()
}

// TestpmdResult is what testpmd reported on "stop".
type TestpmdResult struct {
	// The "Accumulated forward statistics for all ports" totals: packets
	// the ports received and sent while forwarding, and what they dropped
	// (RX-dropped: missed for want of room or buffers; TX-dropped: refused
	// by the port).
	RxPackets, RxDropped uint64
	TxPackets, TxDropped uint64
	// Elapsed is the time from sending "start" to sending "stop".
	Elapsed time.Duration
	// Output is everything testpmd printed, for the record.
	Output string
}

// Testpmd runs dpdk-testpmd interactively with opts's ports and forwarding
// mode: it waits for the prompt, sends "start", waits Duration, sends
// "stop" and "quit", and returns the accumulated statistics with the time
// between "start" and "stop". Every run uses --no-huge --no-pci
// --no-shconf --no-telemetry. Startup (~2.5 s with the default mbuf count)
// and shutdown are outside the timed window. When ctx ends, testpmd's
// process group is killed.
func Testpmd(ctx context.Context, opts TestpmdOptions) (TestpmdResult, error) {
	if opts.Duration <= 0 || opts.Duration > MaxTestpmdDuration {
		return TestpmdResult{}, fmt.Errorf("anchor: testpmd duration %v is outside (0, %v] (use e.g. %v)", opts.Duration, MaxTestpmdDuration, DefaultTestpmdDuration)
	}
	if len(opts.Vdevs) == 0 {
		return TestpmdResult{}, errors.New("anchor: TestpmdOptions.Vdevs is empty (name at least one port, e.g. net_af_xdp0,iface=veth0)")
	}
	if opts.TxPktLen < 0 || opts.TotalMbufs < 0 || opts.MemoryMB < 0 {
		return TestpmdResult{}, fmt.Errorf("anchor: TestpmdOptions TxPktLen %d, TotalMbufs %d, MemoryMB %d: none may be negative (0 takes the default)", opts.TxPktLen, opts.TotalMbufs, opts.MemoryMB)
	}
	if opts.ForwardMode == "" {
		opts.ForwardMode = "io"
	}
	if opts.Lcores == "" {
		opts.Lcores = "0,1"
	}
	if opts.MemoryMB == 0 {
		opts.MemoryMB = 1024
	}
	path, err := lookTool("dpdk-testpmd")
	if err != nil {
		return TestpmdResult{}, err
	}
	args := append(ealBaseArgs(), "-m", strconv.Itoa(opts.MemoryMB), "-l", opts.Lcores, "--log-level=lib.eal:error")
	for _, v := range opts.Vdevs {
		args = append(args, "--vdev", v)
	}
	args = append(args, "--", "-i", "--forward-mode="+opts.ForwardMode)
	if opts.TxPktLen > 0 {
		args = append(args, "--txpkts="+strconv.Itoa(opts.TxPktLen))
	}
	if opts.TotalMbufs > 0 {
		args = append(args, "--total-num-mbufs="+strconv.Itoa(opts.TotalMbufs))
	}
	args = append(args, opts.ExtraArgs...)
	if opts.Netns != "" {
		ip, err := exec.LookPath("ip")
		if err != nil {
			return TestpmdResult{}, fmt.Errorf("anchor: running testpmd in netns %q needs iproute2's ip: %w", opts.Netns, err)
		}
		args = append([]string{"netns", "exec", opts.Netns, path}, args...)
		path = ip
	}
	return runTestpmd(ctx, path, args, opts)
}

// TestpmdNullIOFwd runs dpdk-testpmd in io forwarding mode between two
// net_null ports (each port's rx burst conjures 64-byte packets, its tx
// frees them) with lcore 0 as the main lcore and lcore 1 as the ONE
// forwarding core, which polls both streams (port 0 -> 1 and 1 -> 0).
//
// The result is accumulated TX-packets (both directions together) divided
// by the time between sending "start" and "stop", in millions per second
// (see Testpmd).
func TestpmdNullIOFwd(ctx context.Context, dur time.Duration) (mpps float64, err error) {
	res, err := Testpmd(ctx, TestpmdOptions{Vdevs: []string{"net_null0", "net_null1"}, ForwardMode: "io", Duration: dur})
	if err != nil {
		return 0, err
	}
	return float64(res.TxPackets) / res.Elapsed.Seconds() / 1e6, nil
}

// runTestpmd drives an interactive testpmd started as path args.
func runTestpmd(ctx context.Context, path string, args []string, opts TestpmdOptions) (TestpmdResult, error) {
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := groupCommand(runCtx, path, args...)
	out := newPromptWatcher()
	cmd.Stdout = out
	cmd.Stderr = out
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return TestpmdResult{}, fmt.Errorf("anchor: testpmd stdin: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return TestpmdResult{}, fmt.Errorf("anchor: starting %s: %w", path, err)
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

	fail := func(step string, err error) (TestpmdResult, error) {
		return TestpmdResult{}, fmt.Errorf("anchor: testpmd %s: %w\n%s", step, err, tail(out.String(), 20))
	}
	// command sends a line and waits for the prompt that follows it.
	command := func(line string, timeout time.Duration) error {
		seen := out.count()
		if _, err := io.WriteString(stdin, line+"\n"); err != nil {
			return err
		}
		return out.waitPrompts(runCtx, exited, seen+1, timeout)
	}

	if err := out.waitPrompts(runCtx, exited, 1, testpmdStartTimeout); err != nil {
		return fail("startup", err)
	}
	if opts.BeforeStart != nil {
		opts.BeforeStart()
	}
	started := time.Now()
	if err := command("start", testpmdStopTimeout); err != nil {
		return fail("start", err)
	}
	timer := time.NewTimer(opts.Duration - time.Since(started))
	select {
	case <-timer.C:
	case <-exited:
		return fail("forwarding", errors.New("exited before stop"))
	case <-runCtx.Done():
		timer.Stop()
		return fail("forwarding", runCtx.Err())
	}
	elapsed := time.Since(started)
	if err := command("stop", testpmdStopTimeout); err != nil {
		return fail("stop", err)
	}
	if opts.AfterStop != nil {
		opts.AfterStop()
	}
	if _, err := io.WriteString(stdin, "quit\n"); err != nil {
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
	res, err := parseAccumulated(out.String())
	if err != nil {
		return TestpmdResult{}, err
	}
	res.Elapsed = elapsed
	res.Output = out.String()
	return res, nil
}

// parseAccumulated reads the "Accumulated forward statistics for all
// ports" block that testpmd prints on "stop":
//
//	RX-packets: N   RX-dropped: N   RX-total: N
//	TX-packets: N   TX-dropped: N   TX-total: N
func parseAccumulated(out string) (TestpmdResult, error) {
	var res TestpmdResult
	sc := bufio.NewScanner(strings.NewReader(out))
	inBlock, haveRx, haveTx := false, false, false
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.Contains(line, "Accumulated forward statistics for all ports") {
			inBlock = true
			continue
		}
		if !inBlock {
			continue
		}
		if strings.HasPrefix(line, "++++") {
			break
		}
		fields := strings.Fields(line)
		for i := 0; i+1 < len(fields); i += 2 {
			var into *uint64
			switch fields[i] {
			case "RX-packets:":
				into, haveRx = &res.RxPackets, true
			case "RX-dropped:":
				into = &res.RxDropped
			case "TX-packets:":
				into, haveTx = &res.TxPackets, true
			case "TX-dropped:":
				into = &res.TxDropped
			default:
				continue
			}
			n, err := strconv.ParseUint(fields[i+1], 10, 64)
			if err != nil {
				return TestpmdResult{}, fmt.Errorf("anchor: testpmd line %q: %w", line, ErrUnexpectedOutput)
			}
			*into = n
		}
	}
	if !haveRx || !haveTx {
		return TestpmdResult{}, fmt.Errorf("anchor: testpmd printed no accumulated RX-packets and TX-packets: %w", ErrUnexpectedOutput)
	}
	return res, nil
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
