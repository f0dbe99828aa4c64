// Package benchtopo is what the benchmarks that run two endpoints share:
// the two CPUs they pin them to and the veth pair between two namespaces
// they run them over.
package benchtopo

import (
	"errors"
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"

	"github.com/peregrine-net/peregrine/core/lcore"
	"github.com/peregrine-net/peregrine/pmd/netns"
)

// TwoCPUs picks the first and last of the first two CPUs this process may
// run on (the same one twice on a single CPU).
func TwoCPUs() (int, int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return 0, 0, fmt.Errorf("allowed CPUs: %w", err)
	}
	var cpus []int
	for c := 0; c < lcore.MaxCPU+1 && len(cpus) < 2; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	if len(cpus) == 0 {
		return 0, 0, errors.New("no allowed CPU")
	}
	return cpus[0], cpus[len(cpus)-1], nil
}

// VethPair creates namespaces PREFIX-a and PREFIX-b joined by a veth pair
// ifA-ifB (GRO on: AF_PACKET receives on a veth only with it, MTU 1500),
// the kernel's addresses addrA and addrB on its ends, and returns them
// with a function deleting both.
func VethPair(prefix, ifA, ifB string, addrA, addrB netip.Prefix) (a, b *netns.NS, cleanup func(), err error) {
	cleanup = func() {
		for _, ns := range []*netns.NS{a, b} {
			if ns != nil {
				_ = ns.Delete()
			}
		}
	}
	if a, err = netns.Create(prefix + "-a"); err != nil {
		return nil, nil, nil, err
	}
	if b, err = netns.Create(prefix + "-b"); err != nil {
		cleanup()
		return nil, nil, nil, err
	}
	if err = netns.Veth(a, ifA, b, ifB, netns.VethOptions{GRO: true, AddrA: addrA, AddrB: addrB}); err != nil {
		cleanup()
		return nil, nil, nil, err
	}
	return a, b, cleanup, nil
}

// PinThread restricts the calling OS thread, which the caller has locked
// to its goroutine (runtime.LockOSThread), to cpu. A goroutine that pins
// its thread should end without unlocking it: the runtime then ends the
// pinned thread instead of running other goroutines on it.
func PinThread(cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("pinning a thread to CPU %d: %w", cpu, err)
	}
	return nil
}
