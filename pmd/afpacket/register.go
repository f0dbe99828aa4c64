package afpacket

import (
	"fmt"
	"time"

	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/pmd"
)

func init() {
	pmd.Register(pmd.Driver{
		Name:   DriverName,
		Syntax: "afpacket:IFACE[?netns=NAME&queues=N&ring=v2|v3&block_size=N&block_count=N&frame_size=N&tx_slots=256&tx_batch=128&block_timeout=MS&qdisc_bypass=1&promisc=1&fanout=hash|lb|cpu|qm]",
		Help:   "a Linux interface through AF_PACKET mmap rings (TPACKET_V2, a frame per slot; ring=v3 packs frames into blocks for capture throughput at up to block_timeout of delay); one copy per packet, any interface, veth included",
		Open:   open,
	})
}

func open(env *pmd.Env, spec pmd.Spec) (port.Port, error) {
	if err := spec.CheckParams("netns", "queues", "ring", "block_size", "block_count", "frame_size", "tx_slots", "tx_batch", "block_timeout",
		"qdisc_bypass", "promisc", "fanout"); err != nil {
		return nil, err
	}
	pool, err := env.RequirePool(DriverName)
	if err != nil {
		return nil, err
	}
	if spec.Target == "" {
		return nil, fmt.Errorf("%w: afpacket: no interface named in %q (e.g. afpacket:eth0)", pmd.ErrBadSpec, spec.String())
	}
	opts := Options{Interface: spec.Target, Netns: spec.Params.Get("netns"), Name: spec.String(), Clock: env.ClockOrReal()}
	if spec.Params.Has("netns") && opts.Netns == "" {
		return nil, fmt.Errorf("%w: afpacket: parameter netns is empty (name a namespace from `ip netns`)", pmd.ErrBadParam)
	}
	if opts.Queues, err = spec.Int("queues", DefaultQueues, 1, MaxQueues); err != nil {
		return nil, err
	}
	ring, err := spec.Choice("ring", RingV2.String(), RingV2.String(), RingV3.String())
	if err != nil {
		return nil, err
	}
	if ring == RingV3.String() {
		opts.Ring = RingV3
	}
	// 0 leaves block and frame sizes to the driver, which fits them to
	// the interface's MTU.
	if opts.BlockSize, err = spec.Int("block_size", 0, 1, MaxBlockSize); err != nil {
		return nil, err
	}
	if opts.BlockCount, err = spec.Int("block_count", DefaultBlockCount, 1, MaxBlockCount); err != nil {
		return nil, err
	}
	if opts.FrameSize, err = spec.Int("frame_size", 0, MinFrameSize, MaxBlockSize); err != nil {
		return nil, err
	}
	if opts.TxSlots, err = spec.Int("tx_slots", DefaultTxSlots, 1, MaxTxSlots); err != nil {
		return nil, err
	}
	if opts.TxBatch, err = spec.Int("tx_batch", 0, 1, MaxTxSlots); err != nil {
		return nil, err
	}
	ms, err := spec.Int("block_timeout", int(DefaultBlockTimeout/time.Millisecond), 1, 60000)
	if err != nil {
		return nil, err
	}
	opts.BlockTimeout = time.Duration(ms) * time.Millisecond
	if opts.QdiscBypass, err = spec.Bool("qdisc_bypass", false); err != nil {
		return nil, err
	}
	if opts.Promisc, err = spec.Bool("promisc", false); err != nil {
		return nil, err
	}
	mode, err := spec.Choice("fanout", "hash", "hash", "lb", "cpu", "qm")
	if err != nil {
		return nil, err
	}
	for f := range Fanout(fanoutCount) {
		if f.String() == mode {
			opts.Fanout = f
		}
	}
	p, err := New(pool, opts)
	if err != nil {
		return nil, err
	}
	return p, nil
}
