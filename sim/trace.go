package sim

import (
	"fmt"
	"io"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/core/wire"
)

// tracePort logs every frame an endpoint sends and receives.
type tracePort struct {
	port.Port
	name string
	pool *mbuf.Pool
	clk  clock.Clock
	w    io.Writer
}

func (p *tracePort) log(dir string, hs []mbuf.Handle) {
	for _, h := range hs {
		traceFrame(p.w, p.clk.Now(), p.name, dir, p.pool.Data(h))
	}
}

// traceFrame writes one line about a frame a node sent or received.
func traceFrame(w io.Writer, now clock.Time, name, dir string, raw []byte) {
	var f wire.Frame
	if err := f.Decode(raw); err != nil {
		fmt.Fprintf(w, "%v %s %s undecodable: %v\n", now, name, dir, err)
		return
	}
	fmt.Fprintf(w, "%v %s %s %v\n", now, name, dir, f.Header.String())
}

func (p *tracePort) RxBurst(q int, hs []mbuf.Handle) int {
	n := p.Port.RxBurst(q, hs)
	p.log("rx", hs[:n])
	return n
}

func (p *tracePort) TxBurst(q int, hs []mbuf.Handle) int {
	p.log("tx", hs)
	return p.Port.TxBurst(q, hs)
}
