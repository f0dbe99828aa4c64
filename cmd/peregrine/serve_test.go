package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/peregrine-net/peregrine"
	"github.com/peregrine-net/peregrine/host"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// Messages go end to end through peregrine serve in memory: application
// → client → rings → serve → transport → echo peer and back.
func TestServeCarriesMessages(t *testing.T) {
	for _, shards := range []int{1, 2} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) { testServeCarriesMessages(t, shards) })
	}
}

func testServeCarriesMessages(t *testing.T, shards int) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	cfg := serveConfig{socket: sock, port: fmt.Sprintf("mem:servetest%d/0", shards), ip: "198.18.0.1", mode: "0660", echo: true, shards: shards,
		buffers: 16, bufSize: 64 << 10, ring: 16, period: time.Hour,
		quota: host.Quota{Channels: 4, Buffers: 64, BufSize: 1 << 20, Conns: 4, Ring: 64, Regions: 4, RegionBytes: 1 << 20}}
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	type ready struct {
		srv  *host.Server
		peer peregrine.Addr
	}
	rc := make(chan ready, 1)
	cfg.ready = func(s *host.Server, a peregrine.Addr) { rc <- ready{s, a} }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncBuf
	done := make(chan error, 1)
	go func() { done <- runServe(ctx, &cfg, &out) }()
	var r ready
	select {
	case r = <-rc:
	case err := <-done:
		t.Fatalf("serve ended before it served: %v\n%s", err, out.String())
	}
	ep, err := peregrine.Attach(sock, peregrine.AttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cctx, ccancel := context.WithTimeout(ctx, 20*time.Second)
	defer ccancel()
	// A connection per shard: serve's endpoint deals them round robin.
	for k := range shards {
		c, err := ep.Dial(cctx, r.peer, peregrine.ConnOptions{})
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 64<<10)
		for i := range 20 {
			msg := bytes.Repeat([]byte{byte(i + k)}, 100*i+1)
			if err := c.Send(cctx, msg); err != nil {
				t.Fatal(err)
			}
			n, err := c.Recv(cctx, buf)
			if err != nil || !bytes.Equal(buf[:n], msg) {
				t.Fatalf("connection %d, round trip %d: %d bytes back, %v", k, i, n, err)
			}
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}

	ep.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v\n%s", err, out.String())
	}
	if s := out.String(); !strings.Contains(s, "1 attaches, 1 detaches") {
		t.Fatalf("serve's summary does not count the application:\n%s", s)
	}
}

func TestServeRefusesFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--socket-mode", "0999"},
		{"--socket-mode", "0060"},
		{"--port", "null:"},
		{"--port", "afxdp:eth0", "--echo"},
		{"--ring", "3"},
		{"--shards", "-1"},
		{"--shards", "300"},
		{"--buffers", "2000"},
		{"--ip", "::1"},
		{"--owner", "no-such-user-here"},
	} {
		cmd := newServeCommand()
		cmd.SetArgs(args)
		cmd.RunE = func(*cobra.Command, []string) error { return nil }
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		if err := cmd.Execute(); err == nil {
			t.Errorf("serve %v accepted", args)
		}
	}
}
