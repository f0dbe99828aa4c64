package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/peregrine-net/peregrine/core/lcore"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/pmd"
)

// session holds what a tool subcommand opens: the pool, ports and poll
// loops. close releases everything in reverse order and reports leaks.
//
// Each poll loop has one mbuf cache, which its stages allocate from and
// free to (stageCache) and which the ports use for the queue halves those
// stages drive (drives; afxdp and afpacket ports), so frames cycle through
// one LIFO stack on each CPU, as through a DPDK lcore's mempool cache.
type session struct {
	pool  *mbuf.Pool
	env   *pmd.Env
	ports []port.Port
	group lcore.Group
	// caches[i] is loop i's cache (loops hands out stages round-robin),
	// made on first use; halves records which cache each port queue's
	// receive and transmit halves use. Both are the loops' from Start
	// until they stop, then closed by stop.
	caches []*mbuf.Cache
	halves map[portQueue]*queueCaches
}

// portQueue names one queue of a port.
type portQueue struct {
	port  port.Port
	queue int
}

// queueCaches are the caches of the loops driving a queue's halves.
type queueCaches struct{ rx, tx *mbuf.Cache }

// cacheUser is implemented by ports that can take frames from, and free
// them to, the cache of the loop driving a queue half (afxdp, afpacket).
type cacheUser interface {
	UseCaches(queue int, rx, tx *mbuf.Cache) error
}

func newSession(frames, frameSize int) (*session, error) {
	pool, err := mbuf.New(mbuf.Options{Name: "peregrine", Frames: frames, FrameSize: frameSize})
	if err != nil {
		return nil, err
	}
	return &session{pool: pool, env: &pmd.Env{Pool: pool}}, nil
}

// open opens every spec, in order.
func (s *session) open(specs []string) error {
	for _, spec := range specs {
		p, err := pmd.Open(s.env, spec)
		if err != nil {
			return err
		}
		s.ports = append(s.ports, p)
	}
	return nil
}

// stageCache returns the mbuf cache of the loop that stage number i (its
// index in the stages later given to loops with these cpus) will run on.
func (s *session) stageCache(cpus []int, i int) *mbuf.Cache {
	loop := i % len(cpus)
	for len(s.caches) <= loop {
		s.caches = append(s.caches, nil)
	}
	if s.caches[loop] == nil {
		s.caches[loop] = s.pool.NewCache()
	}
	return s.caches[loop]
}

// drives records that a stage using cache receives on rxPort's queue rxQ
// and sends on txPort's queue txQ (either port may be nil): loops makes
// those queue halves use cache.
func (s *session) drives(cache *mbuf.Cache, rxPort port.Port, rxQ int, txPort port.Port, txQ int) {
	half := func(p port.Port, q int) *queueCaches {
		if s.halves == nil {
			s.halves = make(map[portQueue]*queueCaches)
		}
		k := portQueue{p, q}
		if s.halves[k] == nil {
			s.halves[k] = &queueCaches{}
		}
		return s.halves[k]
	}
	if rxPort != nil {
		half(rxPort, rxQ).rx = cache
	}
	if txPort != nil {
		half(txPort, txQ).tx = cache
	}
}

// loops builds one poll loop per CPU, handing out stages round-robin, and
// gives the ports the loops' caches recorded with drives.
func (s *session) loops(cpus []int, idle lcore.IdleMode, stages []lcore.Stage) error {
	for k, c := range s.halves {
		if cu, ok := k.port.(cacheUser); ok {
			if err := cu.UseCaches(k.queue, c.rx, c.tx); err != nil {
				return err
			}
		}
	}
	per := make([][]lcore.Stage, len(cpus))
	for i, st := range stages {
		per[i%len(cpus)] = append(per[i%len(cpus)], st)
	}
	for i, cpu := range cpus {
		if len(per[i]) == 0 {
			continue
		}
		l, err := lcore.New(lcore.Options{Name: fmt.Sprintf("lcore-%d", cpu), CPU: cpu, Idle: lcore.IdlePolicy{Mode: idle}, Stages: per[i]})
		if err != nil {
			return err
		}
		s.group.Add(l)
	}
	return nil
}

// stop stops the loops (their stop hooks return cached frames), closes the
// ports and the pool. It returns the loops' error joined with any leak.
func (s *session) stop() error {
	s.group.StopAll()
	err := s.group.WaitAll()
	// The loops are done with their caches; the ports return what they
	// hold through their own.
	for _, c := range s.caches {
		if c != nil {
			c.Close()
		}
	}
	s.caches = nil
	for _, p := range s.ports {
		err = errors.Join(err, p.Close())
	}
	s.ports = nil
	if leak := s.pool.CheckLeaks(); leak != nil {
		return errors.Join(err, leak)
	}
	return errors.Join(err, s.pool.Close())
}

// runFor starts the loops and calls tick every period until d passes (0:
// until ctx ends) or done reports true.
// ready, when set, is called once the loops are running.
func (s *session) runFor(ctx context.Context, d, period time.Duration, tick func(elapsed time.Duration), done func() bool, ready func()) (time.Duration, error) {
	if err := s.group.StartAll(); err != nil {
		return 0, err
	}
	if ready != nil {
		ready()
	}
	elapsed, _ := waitRun(ctx, d, period, tick, done)
	return elapsed, nil
}

// waitRun is a command's wait while its poll loops run: it calls tick every
// period until d passes (0: no limit), done reports true, or ctx ends
// (interrupted). Elapsed counts from the call.
func waitRun(ctx context.Context, d, period time.Duration, tick func(elapsed time.Duration), done func() bool) (elapsed time.Duration, interrupted bool) {
	start := time.Now()
	var deadline <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		deadline = t.C
	}
	ticker := time.NewTicker(period)
	defer ticker.Stop()
	// A finished job (done) is noticed at the next poll of this slower
	// ticker; the command's own pace, not a synchronisation.
	check := time.NewTicker(5 * time.Millisecond)
	defer check.Stop()
	for {
		select {
		case <-ticker.C:
			if tick != nil {
				tick(time.Since(start))
			}
		case <-check.C:
			if done != nil && done() {
				return time.Since(start), false
			}
		case <-deadline:
			return time.Since(start), false
		case <-ctx.Done():
			return time.Since(start), true
		}
	}
}

// portMeter prints per-port, per-queue rates between calls.
type portMeter struct {
	ports []port.Port
	last  []port.Stats
	at    time.Duration
}

func newPortMeter(ports []port.Port) *portMeter {
	m := &portMeter{ports: ports, last: make([]port.Stats, len(ports))}
	for i, p := range ports {
		m.last[i] = p.Stats()
	}
	return m
}

func (m *portMeter) print(w io.Writer, elapsed time.Duration) {
	dt := (elapsed - m.at).Seconds()
	m.at = elapsed
	for i, p := range m.ports {
		st := p.Stats()
		prev := m.last[i]
		m.last[i] = st
		fmt.Fprintf(w, "[%5.1fs] %-28s rx %8.3f Mpps %7.3f Gbit/s  tx %8.3f Mpps %7.3f Gbit/s  drop rx %d tx %d\n",
			elapsed.Seconds(), p.Info().Name,
			float64(st.RxPackets-prev.RxPackets)/dt/1e6, float64(st.RxBytes-prev.RxBytes)*8/dt/1e9,
			float64(st.TxPackets-prev.TxPackets)/dt/1e6, float64(st.TxBytes-prev.TxBytes)*8/dt/1e9,
			st.RxDropped+st.RxNoBuf, st.TxDropped)
		if len(st.Queues) > 1 {
			for q, qs := range st.Queues {
				var pq port.QueueStats
				if q < len(prev.Queues) {
					pq = prev.Queues[q]
				}
				fmt.Fprintf(w, "          %-28s rx %8.3f Mpps            tx %8.3f Mpps\n",
					fmt.Sprintf("  queue %d", q), float64(qs.RxPackets-pq.RxPackets)/dt/1e6, float64(qs.TxPackets-pq.TxPackets)/dt/1e6)
			}
		}
	}
}

// summary prints each port's totals.
func (m *portMeter) summary(w io.Writer, elapsed time.Duration) {
	secs := elapsed.Seconds()
	for _, p := range m.ports {
		st := p.Stats()
		fmt.Fprintf(w, "  %-28s rx %d pkts (%.3f Mpps)  tx %d pkts (%.3f Mpps)  rx dropped %d  no-buf %d  tx refused %d  errors %d\n",
			p.Info().Name, st.RxPackets, float64(st.RxPackets)/secs/1e6, st.TxPackets, float64(st.TxPackets)/secs/1e6,
			st.RxDropped, st.RxNoBuf, st.TxDropped, st.Errors)
	}
}
