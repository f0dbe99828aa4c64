package txn

import (
	"testing"

	"github.com/peregrine-net/peregrine/core/dix"
	"github.com/stretchr/testify/require"
)

// SetIndex configures the index of a connection's Sends until its first
// Send, and refuses after: the index counts from that Send.
func TestSetIndexOnlyBeforeFirstSend(t *testing.T) {
	p := newPair(t, 1, "", nil)
	c := p.connect(ConnOptions{})
	cfg := dix.Config{Kind: dix.FreeRunning, Width: 16}
	require.NoError(t, c.SetIndex(cfg))
	require.Error(t, c.SetIndex(dix.Config{Kind: dix.FreeRunning, Width: 3}), "an invalid config")
	r, err := p.a.Register(make([]byte, 64), 0)
	require.NoError(t, err)
	_, err = c.Send(Op{Local: r, Len: 64})
	require.NoError(t, err)
	require.ErrorContains(t, c.SetIndex(cfg), "after the connection's first Send")
	require.NoError(t, c.Close())
	require.ErrorIs(t, c.SetIndex(cfg), ErrClosed)
}
