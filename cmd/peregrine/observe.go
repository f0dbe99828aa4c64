package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/peregrine-net/peregrine/app"
	"github.com/peregrine-net/peregrine/app/config"
	"github.com/peregrine-net/peregrine/app/metrics"
	"github.com/peregrine-net/peregrine/app/txnload"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/rt/txn"
	"github.com/peregrine-net/peregrine/fabric"
)

// observeFlags are the observability flags of run: JSON lines and the
// Prometheus endpoint.
type observeFlags struct {
	json          bool
	metricsAddr   string
	metricsPublic bool
}

func (o *observeFlags) register(f *pflag.FlagSet) {
	f.BoolVar(&o.json, "json", false, "print the per-period figures and the summary as JSON lines (one object per line, like iperf3 -J) instead of text")
	o.registerMetrics(f)
}

// registerMetrics registers --metrics and --metrics-public only.
func (o *observeFlags) registerMetrics(f *pflag.FlagSet) {
	f.StringVar(&o.metricsAddr, "metrics", "", "serve Prometheus metrics on http://ADDR/metrics, e.g. 127.0.0.1:9100 (loopback only unless --metrics-public)")
	f.BoolVar(&o.metricsPublic, "metrics-public", false, "allow --metrics on a non-loopback address")
}

func (o *observeFlags) validate() error {
	if o.metricsPublic && o.metricsAddr == "" {
		return fmt.Errorf("--metrics-public needs --metrics ADDR")
	}
	if o.metricsAddr != "" {
		if err := metrics.CheckAddr(o.metricsAddr, o.metricsPublic); err != nil {
			return fmt.Errorf("--metrics %w", err)
		}
	}
	return nil
}

// observer is what a run reports through: text or JSON lines on out, the
// log, and the metrics server.
type observer struct {
	flags observeFlags
	out   io.Writer
	log   *slog.Logger
	reg   *metrics.Registry
	srv   *metrics.Server
	mu    sync.Mutex
}

// start opens the metrics endpoint, if asked, before anything else is
// opened: an address in use fails the run with nothing started.
func (o *observeFlags) start(out io.Writer) (*observer, error) {
	if err := o.validate(); err != nil {
		return nil, usage(err)
	}
	obs := &observer{flags: *o, out: out, log: slog.Default()}
	if o.metricsAddr == "" {
		return obs, nil
	}
	obs.reg = metrics.New()
	srv, err := metrics.Serve(o.metricsAddr, o.metricsPublic, obs.reg)
	if err != nil {
		return nil, fmt.Errorf("--metrics %w", err)
	}
	obs.srv = srv
	obs.log.Info("serving metrics", "url", "http://"+srv.Addr()+"/metrics")
	obs.textf("metrics on http://%s/metrics\n", srv.Addr())
	return obs, nil
}

// watchPipeline exports p's ports, pool and loops.
func (o *observer) watchPipeline(p *app.Pipeline) {
	if o.reg == nil {
		return
	}
	o.warn(o.reg.Ports(p.Ports))
	o.warn(o.reg.Pool(p.Pool()))
	o.warn(o.reg.Loops(p.Loops))
}

// watchTransport exports a transport endpoint's counters (and its
// workload's, for an initiator).
func (o *observer) watchTransport(name string, ep *txn.Endpoint, load *txnload.Load) {
	if o.reg == nil {
		return
	}
	var ops func() (uint64, uint64, uint64)
	if load != nil {
		ops = func() (uint64, uint64, uint64) { s := load.Stats(); return s.Completed, s.Failed, s.Bytes }
	}
	o.warn(o.reg.Transport(name, func() rt.Stats { return ep.Transport().Stats() }, ops))
}

// watchConns exports a sampler's RTT and window figures (nil: none).
func (o *observer) watchConns(name string, s *app.ConnSampler) {
	if o.reg != nil && s != nil {
		o.warn(o.reg.Conns(name, s.Sample))
	}
}

// watchMCSQ exports an MCSQ initiator's counters (WRs of size bytes).
func (o *observer) watchMCSQ(name string, m *app.MCSQInitiator, size int) {
	if o.reg != nil {
		o.warn(config.ExportMCSQ(o.reg, name, m, size))
	}
}

// watchFabric exports a fabric's counters.
func (o *observer) watchFabric(name string, f *fabric.Fabric) {
	if o.reg != nil {
		o.warn(o.reg.Fabric(name, f))
	}
}

// watchAppliance exports an appliance's pipeline and stages.
func (o *observer) watchAppliance(a *config.Appliance) {
	if o.reg == nil {
		return
	}
	o.watchPipeline(a.Pipeline)
	o.warn(config.Export(a, o.reg))
}

func (o *observer) warn(err error) {
	if err != nil {
		o.log.Warn("metrics: a collector was refused", "err", err)
	}
}

// textf prints unless --json.
func (o *observer) textf(format string, args ...any) {
	if o.flags.json {
		return
	}
	fmt.Fprintf(o.out, format, args...)
}

func (o *observer) jsonLine(v any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	jsonEncode(o.out, v)
}

func (o *observer) close() {
	if o.srv != nil {
		o.srv.Close()
	}
}

// newLogger builds the process's logger from --log-format and --log-level.
func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: use debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(format) {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: use text or json", format)
}

// notifyContext is signal.NotifyContext for SIGINT and SIGTERM with the
// appliance's signal rules, the same as run's: the first signal ends ctx
// (the command stops posting, drains and stops in order); the second cuts
// the drain short (drainOrHurry returns at once) and the command still
// stops its loops, closes its ports — flushing a capture's last records —
// and reports the pool and what was abandoned, exiting non-zero; a third
// stops the process at once — the signal's default action, after a line
// on stderr. What the command registered with onKill (say, its network
// namespaces) is undone first: stopping at once abandons work, never the
// machine's state.
func notifyContext(parent context.Context, stderr io.Writer) (context.Context, func()) {
	hooks := &killHooks{}
	parent = context.WithValue(parent, killHooksKey{}, hooks)
	hurry, cancelHurry := context.WithCancel(parent)
	ctx, cancel := context.WithCancel(context.WithValue(parent, hurryKey{}, hurry))
	ch := make(chan os.Signal, 3)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		for n := 0; ; n++ {
			var sig os.Signal
			select {
			case sig = <-ch:
			case <-done:
				return
			}
			switch n {
			case 0:
				slog.Info("signal: stopping (a second signal cuts the drain short, a third stops at once)", "signal", sig.String())
				cancel()
			case 1:
				fmt.Fprintln(stderr, "peregrine: second signal: cutting the drain short (operations still in flight are abandoned); stopping the loops and closing the ports (a third signal stops at once)")
				cancelHurry()
			default:
				fmt.Fprintln(stderr, "peregrine: third signal: stopping at once, without closing (in-flight operations and frames are abandoned)")
				hooks.run()
				signal.Reset(os.Interrupt, syscall.SIGTERM)
				if s, ok := sig.(syscall.Signal); ok {
					syscall.Kill(os.Getpid(), s)
				}
				return
			}
		}
	}()
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			signal.Stop(ch)
			close(done)
			cancel()
			cancelHurry()
		})
	}
}

// hurryKey holds, in a notifyContext context, the context the second
// signal ends.
type hurryKey struct{}

// hurryOf returns the context the second signal ends (one that never
// ends when ctx is not notifyContext's).
func hurryOf(ctx context.Context) context.Context {
	if h, ok := ctx.Value(hurryKey{}).(context.Context); ok {
		return h
	}
	return context.Background()
}

// drainOrHurry runs drain (a wait for in-flight work, with a timeout of
// its own) and returns its result, or false at once when a second signal
// comes first: the command goes on to stop its loops and close its ports.
// A drain left behind only reads counters the stages publish for any
// goroutine, so it may run on while they stop. Without notifyContext's
// context it just runs drain.
func drainOrHurry(ctx context.Context, drain func() bool) bool {
	hurry, ok := ctx.Value(hurryKey{}).(context.Context)
	if !ok {
		return drain()
	}
	res := make(chan bool, 1)
	go func() { res <- drain() }()
	select {
	case ok := <-res:
		return ok
	case <-hurry.Done():
		return false
	}
}

// killHooks are what a third signal undoes before the process stops at
// once: the command's side effects outside the process.
type killHooks struct {
	mu  sync.Mutex
	fns []func()
	ran bool
}

type killHooksKey struct{}

// onKill registers undo to run if a third signal stops the process at
// once (a no-op for a context notifyContext did not make). The command
// still undoes it itself on a normal exit; undo must tolerate running
// twice.
func onKill(ctx context.Context, undo func()) {
	if h, ok := ctx.Value(killHooksKey{}).(*killHooks); ok {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.fns = append(h.fns, undo)
	}
}

func (h *killHooks) run() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ran {
		return
	}
	h.ran = true
	for i := len(h.fns) - 1; i >= 0; i-- {
		h.fns[i]()
	}
}

// jsonRun writes a run's --json lines: one "interval" object per stats
// period with the cumulative counters and their rates over the period,
// and one "summary" object at the end. A nil *jsonRun writes nothing, so
// a command calls it whether --json was given or not.
type jsonRun struct {
	w    io.Writer
	last map[string]float64
	at   float64
}

// jsonOutput returns where a command's text goes (io.Discard with --json)
// and the JSON writer (nil without --json).
func jsonOutput(on bool, out io.Writer) (io.Writer, *jsonRun) {
	if !on {
		return out, nil
	}
	return io.Discard, &jsonRun{w: out, last: map[string]float64{}}
}

// interval writes one period's line: counters are cumulative.
func (j *jsonRun) interval(elapsed float64, counters map[string]float64) {
	if j == nil {
		return
	}
	rates := map[string]float64{}
	if dt := elapsed - j.at; dt > 0 {
		for k, v := range counters {
			rates[k+"_per_s"] = (v - j.last[k]) / dt
		}
	}
	j.last, j.at = counters, elapsed
	jsonEncode(j.w, map[string]any{"type": "interval", "elapsed_s": elapsed, "counters": counters, "rates": rates})
}

// summary writes the last line: the totals, every check and the verdict.
func (j *jsonRun) summary(elapsed float64, totals map[string]any, checks []check, interrupted bool) {
	if j == nil {
		return
	}
	ok := true
	var cs []map[string]any
	for _, c := range checks {
		ok = ok && c.ok
		cs = append(cs, map[string]any{"ok": c.ok, "what": c.what})
	}
	jsonEncode(j.w, map[string]any{"type": "summary", "elapsed_s": elapsed, "totals": totals, "checks": cs, "interrupted": interrupted, "ok": ok})
}

// expectChecks is gen --rx's check for --json: every expected frame
// arrived (none without --expect).
func expectChecks(ok bool, received, expect uint64) []check {
	if expect == 0 {
		return nil
	}
	return []check{{ok, fmt.Sprintf("every expected frame arrived (%d of %d)", received, expect)}}
}
