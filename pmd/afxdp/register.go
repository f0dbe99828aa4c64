package afxdp

import (
	"fmt"
	"math/bits"
	"time"

	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/pmd"
	"github.com/peregrine-net/peregrine/pmd/netns"
)

func init() {
	pmd.Register(pmd.Driver{
		Name:   DriverName,
		Syntax: "afxdp:IFACE[?queue=N&queues=M&netns=NAME&mode=auto|native|generic&zerocopy=auto|on|off&udp_port=P&shard_bits=B&ring=2048&fill=RING/2&busy_poll=US&busy_budget=64&prefer_busy=1&tx_batch=128]",
		Help:   "AF_XDP sockets on queues of a kernel interface; the pool's arena is the UMEM, so frames pass with no copy in peregrine",
		Open:   open,
	})
}

// attachmentsKey is where the driver keeps its Attachments in a pmd.Env, so
// ports of one Env can share an interface.
const attachmentsKey = "afxdp/attachments"

func open(env *pmd.Env, spec pmd.Spec) (port.Port, error) {
	if err := spec.CheckParams("queue", "queues", "netns", "mode", "zerocopy", "udp_port", "shard_bits", "ring", "fill", "busy_poll", "busy_budget", "prefer_busy", "tx_batch"); err != nil {
		return nil, err
	}
	pool, err := env.RequirePool(DriverName)
	if err != nil {
		return nil, err
	}
	if spec.Target == "" {
		return nil, fmt.Errorf("%w: afxdp: no interface in %q (e.g. afxdp:eth0?queues=2)", pmd.ErrBadSpec, spec.Raw)
	}
	opts := Options{Interface: spec.Target, Name: spec.String(), Logger: env.Logger()}
	if opts.Queue, err = spec.Int("queue", 0, 0, 1<<20); err != nil {
		return nil, err
	}
	if opts.Queues, err = spec.Int("queues", 1, 1, MaxQueues); err != nil {
		return nil, err
	}
	if opts.RingSize, err = spec.Int("ring", DefaultRingSize, MinRingSize, MaxRingSize); err != nil {
		return nil, err
	}
	if opts.RingSize&(opts.RingSize-1) != 0 {
		return nil, fmt.Errorf("%w: afxdp: parameter ring=%d is not a power of two (use ring=%d)", pmd.ErrBadParam, opts.RingSize, 1<<bits.Len(uint(opts.RingSize)))
	}
	if opts.FillLevel, err = spec.Int("fill", 0, 0, MaxRingSize); err != nil {
		return nil, err
	}
	if opts.UDPPort, err = spec.Int("udp_port", 0, 0, 65535); err != nil {
		return nil, err
	}
	if opts.ShardBits, err = spec.Int("shard_bits", 0, 0, MaxShardBits); err != nil {
		return nil, err
	}
	if opts.TxBatch, err = spec.Int("tx_batch", 0, 1, MaxRingSize); err != nil {
		return nil, err
	}
	// busy_poll is in microseconds, as SO_BUSY_POLL and net.core.busy_read
	// are; busy_budget alone turns busy polling on, as in DPDK.
	usec, err := spec.Int("busy_poll", 0, 0, int(MaxBusyPoll/time.Microsecond))
	if err != nil {
		return nil, err
	}
	opts.BusyPoll = time.Duration(usec) * time.Microsecond
	if opts.BusyBudget, err = spec.Int("busy_budget", 0, 0, MaxBusyBudget); err != nil {
		return nil, err
	}
	prefer, err := spec.Bool("prefer_busy", true)
	if err != nil {
		return nil, err
	}
	opts.NoPreferBusy = !prefer
	mode, err := spec.Choice("mode", string(ModeAuto), string(ModeAuto), string(ModeNative), string(ModeGeneric))
	if err != nil {
		return nil, err
	}
	opts.Mode = Mode(mode)
	zc, err := spec.Choice("zerocopy", string(ZeroCopyAuto), string(ZeroCopyAuto), string(ZeroCopyOn), string(ZeroCopyOff))
	if err != nil {
		return nil, err
	}
	opts.ZeroCopy = ZeroCopy(zc)
	if spec.Params.Has("netns") {
		if opts.Namespace, err = netns.Open(spec.Params.Get("netns")); err != nil {
			return nil, fmt.Errorf("%w: afxdp: netns=%q: %w", pmd.ErrBadParam, spec.Params.Get("netns"), err)
		}
	}
	opts.Attachments = env.Shared(attachmentsKey, func() any { return NewAttachments() }).(*Attachments)
	return New(pool, opts)
}
