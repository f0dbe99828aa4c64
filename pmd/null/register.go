package null

import (
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/pmd"
)

func init() {
	pmd.Register(pmd.Driver{
		Name:   DriverName,
		Syntax: "null:[NAME][?queues=N&size=N&fill=1]",
		Help:   "source/sink like DPDK net_null: RX allocates size-byte frames, TX frees",
		Open:   open,
	})
}

func open(env *pmd.Env, spec pmd.Spec) (port.Port, error) {
	if err := spec.CheckParams("queues", "size", "fill"); err != nil {
		return nil, err
	}
	pool, err := env.RequirePool(DriverName)
	if err != nil {
		return nil, err
	}
	opts := Options{Name: spec.Raw}
	if opts.Queues, err = spec.Int("queues", DefaultQueues, 1, MaxQueues); err != nil {
		return nil, err
	}
	room := pool.FrameSize() - pool.Headroom()
	if opts.Size, err = spec.Int("size", DefaultSize, 1, room); err != nil {
		return nil, err
	}
	if opts.Fill, err = spec.Bool("fill", false); err != nil {
		return nil, err
	}
	return New(pool, opts)
}
