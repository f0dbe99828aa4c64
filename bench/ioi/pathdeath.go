package ioi

import (
	"context"
	"fmt"
	"time"

	"github.com/peregrine-net/peregrine/bench/report"
	"github.com/peregrine-net/peregrine/core/clock"
	cioi "github.com/peregrine-net/peregrine/core/ioi"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/rt/txn"
	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/fabric"
)

// The path-death scenario: the fabric of the package doc, but one of its
// four paths is black-holed in the data direction while the first message
// is under way (when half of it would have crossed four healthy paths), a
// failure beyond the switch that its spraying does not see. The path that
// dies is the connection's ordered path (the worst case for IOI and the
// only one for a wholly in-order message), found with a first 64 KiB push
// wholly in order on a second connection between the same ports. Its
// goodput is compared with that of a healthy fabric of three paths (delays
// d, d+2, d+5 µs), same policy, same messages.
//
// A row runs for each of the fabric's spraying policies with IOI (round
// robin, random, entropy — an ECMP switch hashing each packet's 5-tuple —
// and adaptive), and for wholly in-order messages (adaptive spraying;
// every packet on the ordered path).

// DeathMessages is how many messages of the scenario's size each run
// pushes, one after the other.
const DeathMessages = 2

// PathDeathRow is one policy's runs.
type PathDeathRow struct {
	Name string
	// Dead is the run with a path black-holed, Healthy the one over three
	// healthy paths.
	Dead, Healthy DeathRun
}

// Ratio is Dead's goodput over Healthy's.
func (r PathDeathRow) Ratio() float64 { return r.Dead.Goodput() / r.Healthy.Goodput() }

// DeathRun is one run of DeathMessages pushes.
type DeathRun struct {
	Bytes   int
	Elapsed time.Duration // from the first push's post to the last one's completion
	// Abandoned: messages that did not complete OK.
	Abandoned int
	// DeadPath is the path taken down (-1: none); DetectedAfter how long
	// after its death the sender first marked a value suspect or moved
	// its ordered path (0: never); IntoDead the frames sent into the dead
	// path from then on.
	DeadPath      int
	DetectedAfter time.Duration
	IntoDead      uint64
	Paths         rt.PathStats
	Retransmits   uint64
}

// Goodput returns the run's bytes per second.
func (r DeathRun) Goodput() float64 { return float64(r.Bytes) / r.Elapsed.Seconds() }

// profilePaths is Profile with n paths (the first n of its delays).
func profilePaths(r uint64, d time.Duration, n int, spray fabric.Spray) fabric.Profile {
	p := Profile(r, d, 0)
	p.Paths, p.PathDelay, p.Spray = n, p.PathDelay[:n], spray
	return p
}

// PathDeath runs one row: policy name, the fabric's spraying and the IOI
// mode, messages of size bytes.
func PathDeath(name string, spray fabric.Spray, mode cioi.Mode, r uint64, d time.Duration, window, size int) (PathDeathRow, error) {
	row := PathDeathRow{Name: name}
	var err error
	if row.Dead, err = deathRun(profilePaths(r, d, 4, spray), mode, window, size, true, r); err != nil {
		return row, fmt.Errorf("%s, one path dead: %w", name, err)
	}
	if row.Healthy, err = deathRun(profilePaths(r, d, 3, spray), mode, window, size, false, r); err != nil {
		return row, fmt.Errorf("%s, three healthy paths: %w", name, err)
	}
	return row, nil
}

func deathRun(prof fabric.Profile, mode cioi.Mode, window, size int, kill bool, r uint64) (DeathRun, error) {
	run := DeathRun{DeadPath: -1}
	pool, err := mbuf.New(mbuf.Options{Name: "bench-ioi-death", Frames: 1 << 15, CacheSize: 128})
	if err != nil {
		return run, err
	}
	defer pool.Close()
	e, err := newEnv(pool, prof, mode, window, 1, size)
	if err != nil {
		return run, err
	}
	defer e.close()
	conn, err := e.connect()
	if err != nil {
		return run, err
	}
	ordered, err := e.orderedPath()
	if err != nil {
		return run, err
	}
	tr := e.a.Transport()
	start := e.clk.Now()
	deathAt := start.Add(time.Duration(float64(size) * 8 / (8 * float64(r)) * float64(time.Second)))
	var detectedAt clock.Time
	var detectedInto uint64
	var base rt.PathStats
	into := func() uint64 {
		ps := e.fab.Stats().AtoB.PathDetail[run.DeadPath]
		return ps.Frames + ps.Drops
	}
	if kill {
		e.hook = func() {
			now := e.clk.Now()
			switch {
			case run.DeadPath < 0 && now >= deathAt:
				run.DeadPath = ordered
				base = tr.PathStats()
				_ = e.fab.SetPathDown(fabric.AtoB, ordered, true)
			case run.DeadPath >= 0 && detectedAt == 0:
				if ps := tr.PathStats(); ps.Suspects > base.Suspects || ps.OrderedMoves > base.OrderedMoves {
					detectedAt, detectedInto = now, into()
				}
			}
		}
		defer func() { e.hook = nil }()
	}
	before := tr.Stats()
	for i := range DeathMessages {
		e.got = e.got[:0]
		if _, err := conn.Push(txn.Op{Local: e.local, Len: size, Remote: wire.RegionRef{Key: e.region.Key}}); err != nil {
			run.Abandoned += DeathMessages - i // the connection failed
			break
		}
		if err := e.run(func() bool { return len(e.got) > 0 }, 60*time.Second); err != nil {
			return run, err
		}
		if e.got[0].Status != txn.StatusOK {
			run.Abandoned++
			continue
		}
		run.Bytes += size
	}
	run.Elapsed = e.clk.Now().Sub(start)
	if detectedAt != 0 {
		run.DetectedAfter = detectedAt.Sub(deathAt)
		run.IntoDead = into() - detectedInto
	}
	run.Paths = tr.PathStats()
	after := tr.Stats()
	run.Retransmits = after.TxRetransmit + after.TxEarlyRetransmit - before.TxRetransmit - before.TxEarlyRetransmit
	return run, nil
}

// orderedPath finds the path of the data direction the connection's
// ordered flow hashes to: a 64 KiB push wholly in order on a second
// connection between the same ports (the same 5-tuple) goes down it alone.
func (e *env) orderedPath() (int, error) {
	cfg := cioi.Config{Mode: cioi.ModeInOrder}
	c, err := e.a.Open(rt.PeerAddr{MAC: [6]byte(e.pb.Info().MAC), IP: ipB}, txn.ConnOptions{Ordered: true, IOI: &cfg})
	if err != nil {
		return 0, err
	}
	if err := e.run(func() bool { return c.Transport() != nil && c.Transport().State() == rt.StateEstablished }, time.Second); err != nil {
		return 0, err
	}
	before := e.fab.Stats().AtoB.Paths
	if _, err := e.push(c, 64<<10); err != nil {
		return 0, err
	}
	after := e.fab.Stats().AtoB.Paths
	best := 0
	for i := range after {
		if after[i]-before[i] > after[best]-before[best] {
			best = i
		}
	}
	return best, nil
}

// pathDeathRows runs the path-death scenario and adds its ratios.
func pathDeathRows(ctx context.Context, rep *report.Report, opts Options) error {
	rows := []struct {
		name  string
		spray fabric.Spray
		mode  cioi.Mode
	}{
		{"rr", fabric.SprayRoundRobin, cioi.ModeIOI},
		{"random", fabric.SprayRandom, cioi.ModeIOI},
		{"entropy", fabric.SprayEntropy, cioi.ModeIOI},
		{"adaptive", fabric.SprayAdaptive, cioi.ModeIOI},
		{"inorder", fabric.SprayAdaptive, cioi.ModeInOrder}, // adaptive spraying
	}
	rep.Note("path death: %d messages of %s, the ordered path of 4 black-holed (data direction) when half the first would have crossed 4 healthy paths; against 3 healthy paths",
		DeathMessages, fmtSize(opts.DeathSize))
	abandoned := 0
	var detail string
	for _, r := range rows {
		if err := ctx.Err(); err != nil {
			return err
		}
		row, err := PathDeath(r.name, r.spray, r.mode, opts.PathRate, opts.Delay, opts.Window, opts.DeathSize)
		if err != nil {
			return fmt.Errorf("bench ioi: path death: %w", err)
		}
		d, h := row.Dead, row.Healthy
		abandoned += d.Abandoned + h.Abandoned
		detail += fmt.Sprintf("%s %d+%d; ", r.name, d.Abandoned, h.Abandoned)
		rep.Add(report.Ratio{Name: "ioi_one_path_dead_vs_three_paths_" + r.name, Value: row.Ratio(), Op: report.AtLeast, Target: 0.7,
			Detail: fmt.Sprintf("%s, %v: goodput %.2f Gbit/s with path %d dead vs %.2f over 3 healthy paths; detected %v after its death; retransmits %d vs %d; reroutes %d, suspect values %d, probes %d, ordered-path moves %d",
				r.name, r.mode, d.Goodput()*8/1e9, d.DeadPath, h.Goodput()*8/1e9, d.DetectedAfter, d.Retransmits, h.Retransmits,
				d.Paths.Reroutes, d.Paths.Suspects, d.Paths.Probes, d.Paths.OrderedMoves)})
		why := ""
		if r.spray != fabric.SprayEntropy && r.mode != cioi.ModeInOrder {
			why = "; this fabric picks a sprayed frame's path itself, which no entropy value steers, so a quarter of them still go there"
		}
		rep.Note("frames_into_dead_path_after_detection %s %d (of %d retransmits%s)", r.name, d.IntoDead, d.Retransmits, why)
	}
	rep.Add(report.Ratio{Name: "messages_abandoned_with_healthy_path", Value: float64(abandoned), Op: report.AtMost, Target: 0,
		Detail: "per policy, with a dead path + over healthy paths: " + detail})
	return nil
}
