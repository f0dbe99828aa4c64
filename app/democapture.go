package app

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/pmd"
	"github.com/peregrine-net/peregrine/pmd/pcap"
)

// captureDemo wraps pt in a pcap mirror writing to file ("" returns pt as
// it is). On error pt is closed.
func (p *Pipeline) captureDemo(file string, pt port.Port) (port.Port, error) {
	if file == "" {
		return pt, nil
	}
	m, err := pcap.NewMirror(pt, p.pool, pcap.MirrorOptions{Path: file, Clock: p.opts.Clock})
	if err != nil {
		pt.Close()
		return nil, &FieldError{"Capture", -1, fmt.Errorf("%s: %w (give a file this process can create)", file, err)}
	}
	return m, nil
}

// WithCapture returns spec with a capture=FILE parameter (pmd.CaptureParam)
// added, so that app.New mirrors the port to file ("" returns spec).
func WithCapture(spec, file string) string {
	if file == "" {
		return spec
	}
	sep := "?"
	if strings.Contains(spec, "?") {
		sep = "&"
	}
	return spec + sep + pmd.CaptureParam + "=" + url.QueryEscape(file)
}
