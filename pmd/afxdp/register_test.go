package afxdp

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/pmd"
	"github.com/peregrine-net/peregrine/pmd/netns"
)

func TestSpecErrors(t *testing.T) {
	pool, err := mbuf.New(mbuf.Options{Frames: 1024})
	require.NoError(t, err)
	defer pool.Close()
	env := &pmd.Env{Pool: pool}
	for _, c := range []struct {
		spec string
		want error
		says string
	}{
		{"afxdp:", pmd.ErrBadSpec, "no interface"},
		{"afxdp:eth0?ring=1000", pmd.ErrBadParam, "ring=1024"},
		{"afxdp:eth0?ring=16", pmd.ErrBadParam, "64..32768"},
		{"afxdp:eth0?mode=fast", pmd.ErrBadParam, "auto, native, generic"},
		{"afxdp:eth0?zerocopy=maybe", pmd.ErrBadParam, "auto, on, off"},
		{"afxdp:eth0?udp_port=70000", pmd.ErrBadParam, "0..65535"},
		{"afxdp:eth0?queues=0", pmd.ErrBadParam, "1..256"},
		{"afxdp:eth0?udp_port=4791&shard_bits=9", pmd.ErrBadParam, "0..8"},
		{"afxdp:eth0?udp_port=4791&shard_bits=-1", pmd.ErrBadParam, "shard_bits"},
		{"afxdp:eth0?colour=red", pmd.ErrBadParam, "valid parameters"},
		{"afxdp:eth0?netns=pgt-surely-absent", netns.ErrNotExist, "ip netns add"},
	} {
		_, err := pmd.Open(env, c.spec)
		require.ErrorIs(t, err, c.want, c.spec)
		require.Contains(t, err.Error(), c.says, c.spec)
	}
	_, err = pmd.Open(&pmd.Env{}, "afxdp:eth0")
	require.ErrorIs(t, err, pmd.ErrNoPool)
	d, ok := pmd.Lookup(DriverName)
	require.True(t, ok, "the driver registers itself")
	require.Contains(t, d.Syntax, "udp_port")
	require.Contains(t, d.Syntax, "shard_bits")
}

func TestOptionsValidation(t *testing.T) {
	pool, err := mbuf.New(mbuf.Options{Frames: 1024})
	require.NoError(t, err)
	defer pool.Close()
	for _, c := range []struct {
		opts Options
		says string
	}{
		{Options{}, "Options.Interface is empty"},
		{Options{Interface: "x", Queue: -1}, "Options.Queue -1"},
		{Options{Interface: "x", Queues: 300}, "Options.Queues 300"},
		{Options{Interface: "x", RingSize: 100}, "use 128"},
		{Options{Interface: "x", RingSize: 1 << 20}, "Options.RingSize 1048576"},
		{Options{Interface: "x", UDPPort: -5}, "Options.UDPPort -5"},
		{Options{Interface: "x", UDPPort: 4791, ShardBits: 9}, "Options.ShardBits 9 is out of range (use 0..8"},
		{Options{Interface: "x", UDPPort: 4791, ShardBits: -1}, "Options.ShardBits -1"},
		{Options{Interface: "x", ShardBits: 2}, "needs Options.UDPPort"},
		{Options{Interface: "x", FillLevel: 16}, "Options.FillLevel 16"},
		{Options{Interface: "x", RingSize: 256, FillLevel: 512}, "RingSize 256"},
		{Options{Interface: "x", BusyPoll: -1}, "Options.BusyPoll -1ns"},
		{Options{Interface: "x", BusyPoll: 1500 * time.Nanosecond}, "whole microseconds"},
		{Options{Interface: "x", BusyBudget: 65536}, "Options.BusyBudget 65536"},
		{Options{Interface: "x", Mode: "turbo"}, `Options.Mode "turbo"`},
		{Options{Interface: "x", ZeroCopy: "yes"}, `Options.ZeroCopy "yes"`},
	} {
		_, err := New(pool, c.opts)
		require.ErrorIs(t, err, ErrInvalidOptions, "%+v", c.opts)
		require.Contains(t, err.Error(), c.says)
	}
	_, err = New(nil, Options{Interface: "x"})
	require.ErrorIs(t, err, ErrInvalidOptions)
}

// TestRegistryOpen opens ports by spec, two of them on two queues of one
// interface through the Env's shared attachments.
func TestRegistryOpen(t *testing.T) {
	tp := topo(t, 2)
	pool := newPool(t, 8192, 2048)
	env := &pmd.Env{Pool: pool}
	open := func(spec string) *Port {
		p, err := pmd.Open(env, spec)
		require.NoError(t, err, spec)
		t.Cleanup(func() { require.NoError(t, p.Close()) })
		require.Equal(t, spec, p.Info().Name)
		require.Equal(t, DriverName, p.Info().Driver)
		return p.(*Port)
	}
	tx := open(fmt.Sprintf("afxdp:%s?netns=%s&queues=2&ring=256&zerocopy=off", tp.IfA, tp.A.Name))
	rx0 := open(fmt.Sprintf("afxdp:%s?netns=%s&queue=0&ring=256&mode=native", tp.IfB, tp.B.Name))
	rx1 := open(fmt.Sprintf("afxdp:%s?netns=%s&queue=1&ring=256", tp.IfB, tp.B.Name))
	require.Equal(t, 2, tx.Info().Queues)
	require.Equal(t, tp.MACA, tx.Info().MAC)
	require.Equal(t, 1500, tx.Info().MTU)
	sendFrames(t, tx, pool, 0, 5, 60)
	sendFrames(t, tx, pool, 1, 7, 60)
	require.Equal(t, 5, receiveFrames(t, rx0, pool, 0, 5, 60))
	require.Equal(t, 7, receiveFrames(t, rx1, pool, 0, 7, 60))
}
