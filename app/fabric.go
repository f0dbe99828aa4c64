package app

import (
	"fmt"

	"github.com/peregrine-net/peregrine/fabric"
)

// FabricOptions configures AddFabric: the fabric emulator as a middlebox
// between two of a pipeline's ports. `peregrine fabric` and (later) a
// config file's fabric stage build through it.
type FabricOptions struct {
	// A and B are the indices (in Options.Ports order) of the two ports
	// the fabric joins.
	A, B int
	// AtoB and BtoA are the impairment profiles of each direction.
	AtoB, BtoA fabric.Profile
	// Seed seeds the fabric's random streams (the same seed replays the
	// same impairments).
	Seed uint64
	// TransportPort, when nonzero, classifies frames to that UDP port as
	// transport packets (per-connection ordering, see
	// fabric.TransportClassifier); 0 uses the fabric's flow hash.
	TransportPort uint16
	// InOrderDSCP, 1..63, also keeps frames with that IP DSCP on their
	// flow's path (fabric.TransportClassifierDSCP; needs TransportPort).
	InOrderDSCP uint8
	// Loop is the index of the loop that polls the fabric.
	Loop int
}

// AddFabric adds a fabric middlebox between ports A and B on Loop. The
// pipeline owns it: Stop closes it after the loops end, freeing the frames
// it still holds. The fabric allocates and frees through a cache of its
// own, so no queue half is given the loop's. Errors are *FieldError naming
// a FabricOptions field where one is to blame.
func (p *Pipeline) AddFabric(o FabricOptions) (*fabric.Fabric, error) {
	a, err := p.portAt("A", o.A)
	if err != nil {
		return nil, err
	}
	b, err := p.portAt("B", o.B)
	if err != nil {
		return nil, err
	}
	if o.Loop < 0 || o.Loop >= p.Lcores() {
		return nil, &FieldError{"Loop", -1, fmt.Errorf("%d is not an lcore of the pipeline (use 0..%d)", o.Loop, p.Lcores()-1)}
	}
	if o.InOrderDSCP > 63 {
		return nil, &FieldError{"InOrderDSCP", -1, fmt.Errorf("%d is not a DSCP (use 1..63, or 0 for the IOI flag alone)", o.InOrderDSCP)}
	}
	fo := fabric.Options{Name: "fabric", A: a, B: b, Pool: p.pool, AtoB: o.AtoB, BtoA: o.BtoA, Seed: o.Seed}
	if o.TransportPort != 0 {
		fo.Classify = fabric.TransportClassifierDSCP(o.TransportPort, o.InOrderDSCP)
	}
	fab, err := fabric.New(fo)
	if err != nil {
		return nil, err
	}
	p.Own(fab)
	if err := p.Add(Stage{Stage: fab, Loop: o.Loop}); err != nil {
		return nil, err
	}
	return fab, nil
}

func portIndexError(i, n int) error {
	return fmt.Errorf("port %d is not one of the pipeline's (use 0..%d, an index of Options.Ports)", i, n-1)
}
