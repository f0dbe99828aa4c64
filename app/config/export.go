package config

import (
	"errors"

	"github.com/peregrine-net/peregrine/app"
	"github.com/peregrine-net/peregrine/app/metrics"
	"github.com/peregrine-net/peregrine/core/rt"
)

// exporter is a Running whose counters have Prometheus collectors of
// their own (a mechanism's stage implements it to join /metrics).
type exporter interface {
	Export(name string, reg *metrics.Registry) error
}

// Export registers the collectors of every stage that has some with reg.
// The pipeline's ports, pool and loops are exported by the caller
// (metrics.Registry.Ports, Pool, Loops).
func Export(a *Appliance, reg *metrics.Registry) error {
	var errs []error
	for _, b := range a.Stages {
		if e, ok := b.Running.(exporter); ok {
			errs = append(errs, e.Export(b.Name, reg))
		}
	}
	return errors.Join(errs...)
}

// Export implements exporter.
func (r *fabricRun) Export(name string, reg *metrics.Registry) error { return reg.Fabric(name, r.f) }

// Export implements exporter.
func (r *transportRun) Export(name string, reg *metrics.Registry) error {
	stats := func() rt.Stats { return r.t.Endpoint.Transport().Stats() }
	conns := reg.Conns(name, r.t.Sampler.Sample) // initiator and target
	if r.t.Load == nil {
		return errors.Join(reg.Transport(name, stats, nil), conns)
	}
	return errors.Join(conns, reg.Transport(name, stats, func() (uint64, uint64, uint64) {
		s := r.t.Load.Stats()
		return s.Completed, s.Failed, s.Bytes
	}))
}

// Export implements exporter.
func (r *forwarderRun) Export(name string, reg *metrics.Registry) error {
	return reg.Stage("forwarder", name, func() map[string]uint64 { return map[string]uint64{"frames": r.moved()} },
		func() map[string]uint64 { return map[string]uint64{"output_refused": r.f.Dropped()} })
}

// Export implements exporter.
func (r *generatorRun) Export(name string, reg *metrics.Registry) error {
	return reg.Stage("generator", name, func() map[string]uint64 {
		st := r.g.Stats()
		return map[string]uint64{"frames": st.Sent, "bytes": st.Bytes}
	}, func() map[string]uint64 { return map[string]uint64{"no_buffer": r.g.Stats().NoBuf} })
}

// Export implements exporter. Only the sink's frame count is read: its
// other counters are published under a lock the sink's loop takes, and a
// scrape never contends with the datapath.
func (r *sinkRun) Export(name string, reg *metrics.Registry) error {
	return reg.Stage("sink", name, func() map[string]uint64 { return map[string]uint64{"frames": r.s.Frames()} }, nil)
}

// ExportRoCE exports a RoCE stage's counters (the roce subcommand and the
// roce stage of a file).
func ExportRoCE(reg *metrics.Registry, name string, r *app.RoCE) error {
	return reg.Stage("roce", name, func() map[string]uint64 {
		s := r.Stage.Stats()
		return map[string]uint64{"to_host_forwarded": s.ToHost.Forwarded, "to_net_forwarded": s.ToNet.Forwarded,
			"to_host_received": s.ToHost.Received, "to_net_received": s.ToNet.Received}
	}, func() map[string]uint64 {
		s := r.Stage.Stats()
		return map[string]uint64{"stale_qpn": s.ToHost.DropRetired, "unknown_qpn": s.ToHost.DropUnknown + s.ToNet.DropUnknown,
			"icrc": s.ToHost.DropICRC + s.ToNet.DropICRC, "malformed": s.ToHost.DropMalformed + s.ToNet.DropMalformed,
			"access": s.ToHost.DropAccess + s.ToNet.DropAccess, "strict_psn": s.ToHost.DropStrictPSN + s.ToNet.DropStrictPSN,
			"tx_full": s.ToHost.DropTxFull + s.ToNet.DropTxFull}
	})
}

// Export implements exporter.
func (r *roceRun) Export(name string, reg *metrics.Registry) error { return ExportRoCE(reg, name, r.r) }
