package testenv

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSeedsByMode(t *testing.T) {
	s := Seeds{Full: 1000, Short: 100, Race: 40}
	want := 1000
	if testing.Short() {
		want = 100
	}
	if Race {
		want = 40
	}
	t.Setenv(SeedsEnv, "")
	require.Equal(t, want, s.N(t))
	require.Equal(t, 7, Seeds{Full: 7}.N(t), "no reduced count: the full one in every mode")
	t.Setenv(SeedsEnv, "3")
	require.Equal(t, 3, s.N(t), "PEREGRINE_SEEDS wins over every mode")
}

func TestReplay(t *testing.T) {
	t.Setenv(SeedEnv, "")
	old := *seedFlag
	defer func() { *seedFlag = old }()
	*seedFlag = ""
	_, ok := Replay(t)
	require.False(t, ok)
	t.Setenv(SeedEnv, "0x10")
	seed, ok := Replay(t)
	require.True(t, ok)
	require.EqualValues(t, 16, seed)
	*seedFlag = "42"
	seed, ok = Replay(t)
	require.True(t, ok)
	require.EqualValues(t, 42, seed, "the flag wins over the environment")
}
