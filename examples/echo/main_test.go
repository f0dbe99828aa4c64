package main

import (
	"bytes"
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/peregrine-net/peregrine/examples/internal/doortest"
)

// The example as a user runs it, through each door: in this process, and
// through an appliance on the pair's other end. Over veth the two ports
// are in two namespaces.
func TestEcho(t *testing.T) {
	doortest.EachPlace(t, func(t *testing.T, ports doortest.Ports, sidecar string) {
		c := config{role: "both", port: ports.A, ip: doortest.IPA.String(), sidecar: sidecar, serverPort: ports.B,
			serverIP: doortest.IPB.String(), n: 200, size: 1024, host: ports.Host}
		var out bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := run(ctx, c, &out); err != nil {
			t.Fatalf("%v\n%s", err, out.Bytes())
		}
		if !regexp.MustCompile(`(?m)^200 requests of 1024 B, every reply checked: \d+ requests/s, p50 \S+, p99 \S+$`).Match(out.Bytes()) {
			t.Fatalf("output:\n%s", out.Bytes())
		}
	})
}

// A configuration that cannot run is refused before any port opens.
func TestEchoRefusesBadConfig(t *testing.T) {
	for _, c := range []config{
		{role: "both", n: 0, size: 1024},
		{role: "both", n: 1, size: 4},
		{role: "client", n: 1, size: 64},
		{role: "proxy", n: 1, size: 64},
	} {
		if err := run(context.Background(), c, &bytes.Buffer{}); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
}
