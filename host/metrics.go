package host

import "sync/atomic"

// AppCounters are one application's counters, updated as Poll and the
// control requests run; read them through Server.Stats.
type AppCounters struct {
	OpsOK, OpsFailed          atomic.Uint64 // operations completed, by outcome (refusals included in failed)
	OpsUnused                 atomic.Uint64 // Recvs posted ahead (shm.FlagAhead) that ended without a message
	BytesSent, BytesReceived  atomic.Uint64 // message bytes of successful Sends and Recvs
	BadOp, BadConn, BadBuffer atomic.Uint64 // descriptors refused: unknown op, connection not the application's, buffer span outside its pool
	BadRegion                 atomic.Uint64 // descriptors refused: a push's or a pull's region not the application's, or its span outside it
	BadRingIndex              atomic.Uint64 // a ring index the application published was impossible
	LostCompletions           atomic.Uint64 // completions dropped because of BadRingIndex
	BadControl                atomic.Uint64 // control messages refused as malformed or unknown
	QuotaRefused              atomic.Uint64 // requests refused over a quota
	Conns                     atomic.Int64  // connections open now
}

// AppStats is a snapshot of one attached application.
type AppStats struct {
	ID                                                                                            uint64 // the attachment's number, unique for the server's life
	UID                                                                                           uint32 // the peer's credentials when it attached
	PID                                                                                           int32
	InFlight                                                                                      int // operations in flight now
	Buffers                                                                                       int // pool buffers the operations in flight span now (the appliance reads or writes them until they complete)
	OpsOK, OpsFailed, OpsUnused, BytesSent, BytesReceived                                         uint64
	BadOp, BadConn, BadBuffer, BadRegion, BadRingIndex, LostCompletions, BadControl, QuotaRefused uint64
	Conns                                                                                         int64
}

// ServerStats are the server's own counters.
type ServerStats struct {
	Attached int    // applications attached now
	Attaches uint64 // attachments accepted, ever
	Detaches uint64 // attachments ended (closed or died), ever
	Refused  uint64 // attachments refused (malformed, over quota)
}

// Stats returns the server's counters and calls fn with each attached
// application's: what a metrics exporter scrapes (app/metrics would export
// them labelled by ID, UID and PID at scrape time; nothing of it runs per
// descriptor).
func (s *Server) Stats(fn func(AppStats)) ServerStats {
	s.mu.Lock()
	apps := make([]*app, 0, len(s.apps))
	for a := range s.apps {
		apps = append(apps, a)
	}
	st := ServerStats{Attached: len(s.apps), Attaches: s.attached.Load(), Detaches: s.detached.Load(), Refused: s.refused.Load()}
	s.mu.Unlock()
	if fn == nil {
		return st
	}
	for _, a := range apps {
		a.mu.Lock()
		inflight, bufs := a.inflight, a.bufs
		a.mu.Unlock()
		c := &a.stats
		fn(AppStats{ID: a.id, UID: a.uid, PID: a.pid, InFlight: inflight, Buffers: bufs,
			OpsOK: c.OpsOK.Load(), OpsFailed: c.OpsFailed.Load(), OpsUnused: c.OpsUnused.Load(), BytesSent: c.BytesSent.Load(), BytesReceived: c.BytesReceived.Load(),
			BadOp: c.BadOp.Load(), BadConn: c.BadConn.Load(), BadBuffer: c.BadBuffer.Load(), BadRegion: c.BadRegion.Load(), BadRingIndex: c.BadRingIndex.Load(),
			LostCompletions: c.LostCompletions.Load(), BadControl: c.BadControl.Load(), QuotaRefused: c.QuotaRefused.Load(),
			Conns: c.Conns.Load()})
	}
	return st
}
