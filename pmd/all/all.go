// Package all links every peregrine port driver into a binary: import it
// for its side effect, then open ports with pmd.Open.
//
//	import _ "github.com/peregrine-net/peregrine/pmd/all"
package all

import (
	_ "github.com/peregrine-net/peregrine/pmd/afpacket"
	_ "github.com/peregrine-net/peregrine/pmd/afxdp"
	_ "github.com/peregrine-net/peregrine/pmd/mem"
	_ "github.com/peregrine-net/peregrine/pmd/null"
	_ "github.com/peregrine-net/peregrine/pmd/pcap"
)
