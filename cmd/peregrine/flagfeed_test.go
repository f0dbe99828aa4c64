package main

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/peregrine-net/peregrine/core/lcore"
)

// flagCase is one flag of a subcommand and values it must refuse.
type flagCase struct {
	flag string
	bad  []string
}

// TestEveryFlagRefusesBadValues feeds every subcommand zero, negative and
// absurd values for each numeric, duration, size, rate and list flag (the
// values each flag must refuse) and checks that the command line is
// refused as a usage error (exit status 2) naming the flag, without a
// panic and without starting anything that could hang.
func TestEveryFlagRefusesBadValues(t *testing.T) {
	capture := filepath.Join(t.TempDir(), "x.pcap")
	initiator := []string{"transport", "initiator", "--port", "null:", "--ip", "198.18.0.1", "--peer-mac", "02:00:00:00:00:02", "--peer-ip", "198.18.0.2"}
	target := []string{"transport", "target", "--port", "null:", "--ip", "198.18.0.2"}
	durations := []string{"-1s", "-1ns", "99999999999h"}
	periods := []string{"0", "-1s", "1ns"}
	for _, sub := range []struct {
		name  string
		base  []string
		flags []flagCase
	}{
		{"demo", []string{"demo"}, []flagCase{
			{"duration", append([]string{"0"}, durations...)},
			{"size", []string{"0", "-1", "59", "1GiB", "big"}},
			{"burst", []string{"0", "-1", "257", "1000000"}},
			{"lcores", []string{"99", "-1", "0-3", "x"}},
			{"idle", []string{"nap"}},
			{"frames", []string{"0", "-1", "10", "1000000000"}},
			{"rate", []string{"-1", "1e30pps", "-5gbit", "fast"}},
			{"workload", []string{"bogus"}},
			{"profile", []string{"loss=200%", "rate=-1gbit"}},
			{"window", []string{"0", "-1", "5000"}},
			{"seed", []string{"-1"}},
			{"target-delay", []string{"0", "-1s"}},
			{"min-rto", []string{"0", "-1s"}},
		}},
		{"gen", []string{"gen", "--port", "null:"}, []flagCase{
			{"rate", []string{"-1", "1e30pps", "1e20gbit", "5furlongs"}},
			{"size", []string{"0", "-1", "59", "1GiB", "100-64"}},
			{"flows", []string{"0", "-1", "70000"}},
			{"count", []string{"-1"}},
			{"duration", durations},
			{"burst", []string{"0", "-1", "257", "1000"}},
			{"lcores", []string{"99", "-1", "x", ""}},
			{"idle", []string{"nap"}},
			{"stats-period", periods},
			{"timing", []string{"slow"}},
			{"loop", []string{"-1", "99999999999"}},
			{"expect", []string{"-1"}},
			{"idle-exit", durations},
			{"frames", []string{"0", "-1", "10", "16777216", "1000000000"}},
			{"frame-size", []string{"0", "-1", "1000", "1000000"}},
		}},
		{"gen --rx", []string{"gen", "--rx", "--port", "null:"}, []flagCase{
			{"flows", []string{"0", "-1", "70000"}},
			{"duration", durations},
			{"burst", []string{"0", "257"}},
			{"lcores", []string{"99"}},
			{"stats-period", periods},
			{"idle-exit", durations},
			{"frames", []string{"0", "10"}},
		}},
		{"fwd", []string{"fwd", "--port", "null:"}, []flagCase{
			{"mode", []string{"bogus"}},
			{"duration", durations},
			{"burst", []string{"0", "-1", "257"}},
			{"lcores", []string{"99", "-1"}},
			{"idle", []string{"nap"}},
			{"stats-period", periods},
			{"peer-mac", []string{"zz"}},
			{"flows", []string{"0", "70000"}},
			{"frames", []string{"0", "10", "1000000000"}},
		}},
		{"fwd txonly", []string{"fwd", "--port", "null:", "--mode", "txonly"}, []flagCase{
			{"size", []string{"0", "-1", "1GiB"}},
			{"rate", []string{"-1", "1e30pps"}},
			{"flows", []string{"0", "-1", "70000"}},
		}},
		{"fabric", []string{"fabric", "--port-a", "null:", "--port-b", "null:"}, []flagCase{
			{"profile", []string{"loss=200%", "rate=10gbits", "delay=-1s"}},
			{"a-to-b", []string{"loss=200%"}},
			{"b-to-a", []string{"loss=-1%"}},
			{"seed", []string{"-1"}},
			{"udp-port", []string{"0", "-1", "70000"}},
			{"duration", durations},
			{"lcores", []string{"99", "-1"}},
			{"idle", []string{"nap"}},
			{"stats-period", periods},
			{"frames", []string{"0", "-1", "10", "1000000000"}},
			{"frame-size", []string{"0", "-1", "1000", "1000000"}},
		}},
		{"fabric jumbo", []string{"fabric", "--port-a", "null:", "--port-b", "null:", "--frame-size", "16384"}, []flagCase{
			{"frames", []string{"16777216"}}, // 256 GiB of pool
		}},
		{"transport initiator", initiator, []flagCase{
			{"ip", []string{"x"}},
			{"peer-mac", []string{"x"}},
			{"peer-ip", []string{"x"}},
			{"region-key", []string{"-1"}},
			{"region-size", []string{"-1", "1000000000000"}},
			{"sizes", []string{"0", "-1", "15", "2GiB", "1GiB", "x", "512,,4KiB"}},
			{"window", []string{"0", "-1", "5000"}},
			{"conns", []string{"0", "-1", "100000"}},
			{"pull-every", []string{"-1"}},
			{"duration", durations},
			{"count", []string{"-1"}},
			{"lcore", []string{"-1", "99", "5000"}},
			{"idle", []string{"nap"}},
			{"frames", []string{"0", "10", "1000000000"}},
			{"frame-size", []string{"0", "1000"}},
			{"target-delay", []string{"0", "-1s"}},
			{"min-rto", []string{"0", "-1s"}},
			{"min-cwnd", []string{"-1", "0.0001", "1000", "NaN"}},
			{"psn-window", []string{"0", "-1", "63", "100", "8192"}},
			{"seed", []string{"-1"}},
			{"op-timeout", []string{"-1s", "x"}},
		}},
		{"transport target", target, []flagCase{
			{"ip", []string{"x", ""}},
			{"region-size", []string{"-1"}},
			{"window", []string{"0", "-1", "5000"}},
			{"duration", durations},
			{"lcore", []string{"-1", "99"}},
			{"frames", []string{"0", "10"}},
			{"frame-size", []string{"1000"}},
		}},
		{"decode", []string{"decode", capture}, []flagCase{
			{"count", []string{"-1"}},
			{"udp-port", []string{"0", "-1", "70000"}},
		}},
		{"bench vs-testpmd", []string{"bench", "vs-testpmd"}, []flagCase{
			{"rounds", []string{"0", "-1", "1000000"}},
			{"duration", []string{"0", "-1s"}},
			{"sizes", []string{"0", "-1", "59", "1519", "x"}},
		}},
		{"bench foundation", []string{"bench", "foundation"}, []flagCase{
			{"cpus", []string{"0", "99,100", "-1", "x"}},
			{"fwd-duration", []string{"0", "-1s"}},
		}},
		{"bench transport-core", []string{"bench", "transport-core"}, []flagCase{
			{"cpu", []string{"-1", "99"}},
		}},
	} {
		for _, fc := range sub.flags {
			for _, v := range fc.bad {
				args := append(append([]string(nil), sub.base...), "--"+fc.flag+"="+v)
				t.Run(fmt.Sprintf("%s --%s=%s", sub.name, fc.flag, v), func(t *testing.T) {
					out, code := runGuarded(t, args)
					if code != exitUsage {
						t.Fatalf("peregrine %s: exit status %d, want %d (usage error):\n%s", strings.Join(args, " "), code, exitUsage, out)
					}
					if !strings.Contains(out, "--"+fc.flag) {
						t.Fatalf("peregrine %s: the error does not name --%s:\n%s", strings.Join(args, " "), fc.flag, out)
					}
				})
			}
		}
	}
}

// runGuarded runs the command line in-process, turning a panic into a
// test failure and a run that does not end within a generous bound into
// one too (the command would have started instead of refusing).
func runGuarded(t *testing.T, args []string) (string, int) {
	t.Helper()
	type result struct {
		out   string
		code  int
		panic any
	}
	done := make(chan result, 1)
	go func() {
		var out bytes.Buffer
		defer func() {
			if p := recover(); p != nil {
				done <- result{out.String(), -1, p}
			}
		}()
		root := newRootCommand()
		root.SetOut(&out)
		root.SetErr(&out)
		code := execute(root, args, &out)
		done <- result{out.String(), code, nil}
	}()
	select {
	case r := <-done:
		if r.panic != nil {
			t.Fatalf("peregrine %s panicked: %v\n%s", strings.Join(args, " "), r.panic, r.out)
		}
		return r.out, r.code
	case <-time.After(30 * time.Second):
		t.Fatalf("peregrine %s did not return within 30s: it started instead of refusing", strings.Join(args, " "))
		return "", 0
	}
}

// TestExitStatus: 0 for a run that succeeded, 1 for one that failed, 2 for
// a wrong command line of any kind.
func TestExitStatus(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.pcap")
	for _, c := range []struct {
		args []string
		want int
	}{
		{[]string{"--help"}, exitOK},
		{[]string{"--version"}, exitOK},
		{[]string{"gen", "--port", "null:", "--count", "10", "--stats-period", "1h"}, exitOK},
		{[]string{"bogus"}, exitUsage},
		{[]string{"gen", "--bogus"}, exitUsage},
		{[]string{"gen", "--burst", "x"}, exitUsage},
		{[]string{"gen"}, exitUsage},
		{[]string{"gen", "--port", "null:", "extra"}, exitUsage},
		{[]string{"transport"}, exitUsage},
		{[]string{"decode"}, exitUsage},
		{[]string{"bench"}, exitUsage},
		{[]string{"bench", "bogus"}, exitUsage},
		{[]string{"decode", missing}, exitFailed},
		{[]string{"gen", "--port", "nosuchdriver:x"}, exitUsage},
		{[]string{"gen", "--port", "null:", "--count", "1", "--metrics", "bogus"}, exitUsage},
		{[]string{"help", "foo"}, exitUsage},
		{[]string{"completion", "tcsh"}, exitUsage},
	} {
		out, code := runGuarded(t, c.args)
		if code != c.want {
			t.Errorf("peregrine %s: exit status %d, want %d:\n%s", strings.Join(c.args, " "), code, c.want, out)
		}
	}
}

// TestTransportWithoutRoleSaysWhatIsMissing: not cobra's "accepts 1
// arg(s)", but the roles and an example.
func TestTransportWithoutRoleSaysWhatIsMissing(t *testing.T) {
	out, code := runGuarded(t, []string{"transport"})
	if code != exitUsage || !strings.Contains(out, "transport needs a role: initiator or target") || !strings.Contains(out, "e.g. peregrine transport target") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

// TestFabricBlamesTheFlagGiven: a bad --profile is --profile's mistake,
// not --a-to-b's.
func TestFabricBlamesTheFlagGiven(t *testing.T) {
	out, code := runGuarded(t, []string{"fabric", "--port-a", "null:", "--port-b", "null:", "--profile", "loss=200%"})
	if code != exitUsage || !strings.Contains(out, "--profile:") || strings.Contains(out, "--a-to-b") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

// TestLcoresSuggestsUsableCPUs: the answer to a CPU this process may not
// use lists the ones it may, and never suggests -1, which is refused.
func TestLcoresSuggestsUsableCPUs(t *testing.T) {
	allowed, err := allowedCPUs()
	if err != nil {
		t.Skip(err)
	}
	out, code := runGuarded(t, []string{"gen", "--port", "null:", "--lcores", "1023"})
	want := "use CPUs from " + lcore.FormatCPUList(allowed)
	if code != exitUsage || !strings.Contains(out, "--lcores 1023") || !strings.Contains(out, want) || strings.Contains(out, "or -1") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

// TestDemoRefusesATooSmallPool: --frames below what the demo's loops keep
// in their caches is refused up front with the minimum, not a stall.
func TestDemoRefusesATooSmallPool(t *testing.T) {
	out, code := runGuarded(t, []string{"demo", "--frames", "10", "--lcores", "0"})
	if code != exitUsage || !strings.Contains(out, "--frames 10 is out of range: use 1536..") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	out, code = runGuarded(t, []string{"demo", "--frames", "1536", "--lcores", "0", "--duration", "1s", "--drain", "1m", "--quiet"})
	if code != exitOK {
		t.Fatalf("the minimum pool runs: exit %d:\n%s", code, out)
	}
}
