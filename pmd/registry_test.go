package pmd_test

import (
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/pmd"
	_ "github.com/peregrine-net/peregrine/pmd/all"
)

func TestDrivers(t *testing.T) {
	ds := pmd.Drivers()
	names := make([]string, len(ds))
	for i, d := range ds {
		names[i] = d.Name
		require.NotEmpty(t, d.Syntax, d.Name)
		require.True(t, strings.HasPrefix(d.Syntax, d.Name+":"), "syntax %q starts with the driver name", d.Syntax)
		require.NotEmpty(t, d.Help, d.Name)
		require.NotNil(t, d.Open, d.Name)
	}
	require.True(t, slices.IsSorted(names), "sorted: %v", names)
	for _, want := range []string{"mem", "null", "pcap", "pcap-out"} {
		require.Contains(t, names, want)
		_, ok := pmd.Lookup(want)
		require.True(t, ok)
	}
}

func TestOpenErrors(t *testing.T) {
	pool, err := mbuf.New(mbuf.Options{Name: "reg", Frames: 64})
	require.NoError(t, err)
	defer pool.Close()
	env := &pmd.Env{Pool: pool}

	_, err = pmd.Open(env, "nosuch:x")
	require.ErrorIs(t, err, pmd.ErrUnknownDriver)
	for _, d := range pmd.Drivers() {
		require.ErrorContains(t, err, d.Syntax, "the error lists every driver with its syntax")
	}
	_, err = pmd.Open(env, "mem")
	require.ErrorIs(t, err, pmd.ErrBadSpec)
	_, err = pmd.Open(nil, "null:")
	require.ErrorContains(t, err, "env is nil")
	_, err = pmd.Open(env, "null:?size=1&size=2")
	require.ErrorIs(t, err, pmd.ErrBadParam)
	_, err = pmd.Open(env, "null:?burst=1")
	require.ErrorContains(t, err, `pmd: open "null:?burst=1": pmd: bad port parameter: null: unknown parameter "burst"`)
}

func TestRegisterPanics(t *testing.T) {
	open := func(*pmd.Env, pmd.Spec) (port.Port, error) { return nil, nil }
	require.PanicsWithValue(t, `pmd: Register: driver "mem" registered twice`, func() {
		pmd.Register(pmd.Driver{Name: "mem", Open: open})
	})
	require.Panics(t, func() { pmd.Register(pmd.Driver{Name: "", Open: open}) })
	require.Panics(t, func() { pmd.Register(pmd.Driver{Name: "Bad", Open: open}) })
	require.Panics(t, func() { pmd.Register(pmd.Driver{Name: "test-nil-open"}) })
}

func TestEnvShared(t *testing.T) {
	env := &pmd.Env{}
	var created int
	var wg sync.WaitGroup
	got := make([]any, 16)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = env.Shared("k", func() any { created++; return new(int) })
		}()
	}
	wg.Wait()
	require.Equal(t, 1, created, "create runs once")
	for _, v := range got {
		require.Same(t, got[0], v)
	}
	require.NotSame(t, got[0], env.Shared("other", func() any { return new(int) }))
	require.NotSame(t, got[0], (&pmd.Env{}).Shared("k", func() any { return new(int) }), "Envs do not share")
}

func TestEnvDefaults(t *testing.T) {
	env := &pmd.Env{}
	c := env.ClockOrReal()
	require.NotNil(t, c)
	require.Same(t, c, env.ClockOrReal(), "one real clock per Env")
	require.Same(t, slog.Default(), env.Logger())
	v := clock.NewVirtual(5)
	env = &pmd.Env{Clock: v, Log: slog.New(slog.DiscardHandler)}
	require.Same(t, v, env.ClockOrReal())
	require.NotSame(t, slog.Default(), env.Logger())
	_, err := env.RequirePool("x")
	require.ErrorIs(t, err, pmd.ErrNoPool)
	require.ErrorContains(t, err, "driver x needs one")
}
