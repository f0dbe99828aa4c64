package fabric

import (
	"errors"

	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/pmd/mem"
)

// DefaultLinkRing is the ring size of Link's mem pairs.
const DefaultLinkRing = 4096

// Link builds a simulated link: two mem pairs with a fabric between them.
// It returns the two endpoint ports, a and b, and the fabric stage; what a
// transmits comes out of b after the AtoB impairments, and the reverse.
// Poll the fabric (on the simulation's virtual clock, or in an lcore loop)
// to move frames.
//
// opts.A and opts.B must be nil (Link makes them) and opts.Pool nil or
// pool. The caller owns a and b and closes them; the fabric's Close closes
// its own two ends.
func Link(pool *mbuf.Pool, opts Options) (a, b port.Port, f *Fabric, err error) {
	if pool == nil {
		return nil, nil, nil, badOptions("Link: pool is nil (pass the pool the endpoints' frames live in)")
	}
	if opts.A != nil || opts.B != nil {
		return nil, nil, nil, badOptions("Link: Options.A and Options.B must be nil (Link makes the ports; use New to join ports you have)")
	}
	if opts.Pool != nil && opts.Pool != pool {
		return nil, nil, nil, badOptions("Link: Options.Pool %q is not the pool %q passed to Link (leave it nil)", opts.Pool.Name(), pool.Name())
	}
	name := opts.Name
	if name == "" {
		name = "fabric"
	}
	ring := opts.LinkRing
	if ring == 0 {
		ring = DefaultLinkRing
	}
	endA, sideA, err := mem.NewPair(pool, mem.PairOptions{Name: name + "-a", Size: ring})
	if err != nil {
		return nil, nil, nil, badOptions("Options.LinkRing: %v", err)
	}
	sideB, endB, err := mem.NewPair(pool, mem.PairOptions{Name: name + "-b", Size: ring})
	if err != nil {
		return nil, nil, nil, errors.Join(badOptions("Options.LinkRing: %v", err), endA.Close(), sideA.Close())
	}
	opts.A, opts.B, opts.Pool = sideA, sideB, pool
	f, err = New(opts)
	if err != nil {
		return nil, nil, nil, errors.Join(err, endA.Close(), sideA.Close(), endB.Close(), sideB.Close())
	}
	f.owned = []port.Port{sideA, sideB}
	return endA, endB, f, nil
}
