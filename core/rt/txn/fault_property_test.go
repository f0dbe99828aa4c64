package txn

import (
	"bytes"
	"fmt"
	"time"
)

// harshTally counts the statuses the fault seeds ended with.
var harshTally = map[Status]int{}

// checkHarsh runs a harsh scenario to its end and checks the invariants
// that hold under any fault (see TestTransactionFaultProperty).
func checkHarsh(p *pair, sc propScenario, byTag map[uint64]*propOp, sides [2]*propSide, from [propConns]int, conns [propConns]*Conn) error {
	posted := 0
	for _, op := range sc.ops {
		if op.posted {
			posted++
		}
	}
	// Cancel the chosen operations after their number of polls (one whose
	// completion is decided already answers ErrNoOp; one whose connection
	// failed, ErrClosed).
	for step := range 60 {
		for i := range sc.ops {
			op := &sc.ops[i]
			if op.posted && op.cancelAt == step {
				if err := conns[op.conn].Cancel(op.rsn); err != nil && err != ErrNoOp && err != ErrClosed {
					return fmt.Errorf("cancel tag %d: %w", op.tag, err)
				}
			}
		}
		if p.poll() == 0 {
			p.clk.Advance(time.Microsecond)
		}
	}
	if !p.runFor(func() bool { return len(p.cqA)+len(p.cqB) >= posted }, 60*time.Second) {
		return fmt.Errorf("only %d of %d completions after 60s (A %+v, B %+v)\nA:\n%sB:\n%scompletions A %v\nB %v",
			len(p.cqA)+len(p.cqB), posted, p.a.Stats(), p.b.Stats(), p.a.dump(), p.b.dump(), brief(p.cqA), brief(p.cqB))
	}
	// Settle: notices acknowledged, requests released, packets resolved.
	settled := func() bool {
		return p.settled() && p.a.Transport().Outstanding() == 0 && p.b.Transport().Outstanding() == 0
	}
	if !p.runFor(settled, 30*time.Second) {
		return fmt.Errorf("not settled: A %d contexts, %d entries, %d items, %d credit; B %d contexts, %d entries, %d items, %d credit\nA:\n%sB:\n%s",
			p.a.Outstanding(), p.a.ro.Len(), p.a.sch.Len(), p.a.granted, p.b.Outstanding(), p.b.ro.Len(), p.b.sch.Len(), p.b.granted, p.a.dump(), p.b.dump())
	}
	last := [propConns]int{-1, -1, -1}
	for _, cq := range [][]Completion{p.cqA, p.cqB} {
		for _, cp := range cq {
			op := byTag[cp.Tag]
			if op == nil || !op.posted {
				return fmt.Errorf("completion for unknown or unposted tag %d", cp.Tag)
			}
			harshTally[cp.Status]++
			op.completed++
			if op.completed > 1 {
				return fmt.Errorf("tag %d completed twice", cp.Tag)
			}
			switch cp.Status {
			case StatusOK, StatusAbandoned, StatusConnFailed:
			case StatusTimeout:
				if op.timeout == 0 {
					return fmt.Errorf("tag %d: timed out without a timeout", cp.Tag)
				}
			case StatusCancelled:
				if op.cancelAt < 0 {
					return fmt.Errorf("tag %d: cancelled, never cancelled", cp.Tag)
				}
			case StatusRemoteAbandoned:
				if op.kind != OpPull {
					return fmt.Errorf("tag %d: a push completed %v", cp.Tag, cp.Status)
				}
			case StatusRemoteAccess:
				if !op.bad {
					return fmt.Errorf("tag %d: a good operation refused", cp.Tag)
				}
			default:
				return fmt.Errorf("tag %d: status %v", cp.Tag, cp.Status)
			}
			if cp.Status == StatusOK && op.bad {
				return fmt.Errorf("tag %d: a bad operation completed OK", cp.Tag)
			}
			if op.conn != 1 {
				if op.slot <= last[op.conn] {
					return fmt.Errorf("conn %d: completion of slot %d after slot %d (ordered)", op.conn, op.slot, last[op.conn])
				}
				last[op.conn] = op.slot
			}
			if cp.Status != StatusOK {
				continue
			}
			src, dst := sides[from[op.conn]], sides[1-from[op.conn]]
			slot := opSlotIndex(op) * propSlot
			if op.kind == OpPush && !bytes.Equal(dst.remote[slot:slot+op.size], src.src[slot:slot+op.size]) {
				return fmt.Errorf("tag %d: pushed bytes differ", op.tag)
			}
			if op.kind == OpPull && !bytes.Equal(src.dst[slot:slot+op.size], dst.remote[propZone+slot:propZone+slot+op.size]) {
				return fmt.Errorf("tag %d: pulled bytes differ", op.tag)
			}
		}
	}
	for _, op := range sc.ops {
		if op.posted && op.completed != 1 {
			return fmt.Errorf("tag %d completed %d times", op.tag, op.completed)
		}
	}
	for side, reqs := range [][]Request{p.reqB, p.reqA} {
		type key struct {
			c   *Conn // a failed connection's slot may be reused: the handle tells them apart
			rsn uint32
		}
		seen := map[key]bool{}
		lastRSN := map[*Conn]int64{}
		for _, r := range reqs {
			k := key{r.Conn, r.RSN}
			if seen[k] {
				return fmt.Errorf("side %d: request rsn %d delivered twice (conn %p idx %d gen %d)\n%s", side, r.RSN, r.Conn, r.Conn.idx, r.Conn.gen, reqList(reqs))
			}
			seen[k] = true
			if r.Conn.Ordered() {
				if l, ok := lastRSN[r.Conn]; ok && int64(r.RSN) <= l {
					return fmt.Errorf("side %d: request rsn %d after %d on an ordered connection", side, r.RSN, l)
				}
				lastRSN[r.Conn] = int64(r.RSN)
			}
		}
	}
	for i, ep := range []*Endpoint{p.a, p.b} {
		if ep.Transport().Stats().Internal != 0 {
			return fmt.Errorf("side %d: transport internal errors", i)
		}
		if err := ep.Transport().CheckInvariants(); err != nil {
			return fmt.Errorf("side %d: %w", i, err)
		}
	}
	return nil
}

func reqList(reqs []Request) string {
	s := ""
	for _, r := range reqs {
		s += fmt.Sprintf(" %p/%d/%d:%v:%d", r.Conn, r.Conn.idx, r.Conn.gen, r.Kind, r.RSN)
	}
	return s
}
