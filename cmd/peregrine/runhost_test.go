package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine"
	"github.com/peregrine-net/peregrine/app/config"
	"github.com/peregrine-net/peregrine/host/shm"
)

// TestRunSidecarConfig runs configs/sidecar.yaml as a person would: an
// application attaches to the socket, sends messages to the echo peer
// through the appliance and gets them back, and /metrics shows its
// counters labelled by app; SIGTERM detaches it and the run exits 0.
func TestRunSidecarConfig(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "p.sock")
	data, err := os.ReadFile("../../configs/sidecar.yaml")
	require.NoError(t, err)
	cfg := strings.NewReplacer("/tmp/peregrine.sock", sock, "mem:side/0", "mem:rs/0").Replace(string(data))
	file := filepath.Join(dir, "sidecar.yaml")
	require.NoError(t, os.WriteFile(file, []byte(cfg), 0o644))

	c := startChild(t, "run", "-c", file, "--duration", "0", "--quiet", "--metrics", "127.0.0.1:0")
	url := strings.TrimPrefix(c.waitLine(`^metrics on http://`), "metrics on ")
	m := regexp.MustCompile(`^echo peer at (\S+) (\S+) `).FindStringSubmatch(c.waitLine(`^echo peer at `))
	c.waitLine(`^running`)
	fi, err := os.Stat(sock)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o660), fi.Mode().Perm(), "the socket's mode")

	mac, err := net.ParseMAC(m[2])
	require.NoError(t, err)
	ep, err := peregrine.Attach(sock, peregrine.AttachOptions{})
	require.NoError(t, err)
	defer ep.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := ep.Dial(ctx, peregrine.Addr{IP: netip.MustParseAddr(m[1]), MAC: [6]byte(mac)}, peregrine.ConnOptions{})
	require.NoError(t, err)
	buf := make([]byte, 2048)
	for i := range 10 {
		msg := bytes.Repeat([]byte{byte(i)}, 1000+i)
		require.NoError(t, conn.Send(ctx, msg))
		n, err := conn.Recv(ctx, buf)
		require.NoError(t, err)
		require.Equal(t, msg, buf[:n])
	}
	body := scrape(t, url)
	pid := fmt.Sprint(os.Getpid())
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`peregrine_sidecar_app_ops_total\{app="\d+",outcome="ok",pid="` + pid + `",uid="\d+"\} 20`),
		regexp.MustCompile(`peregrine_sidecar_app_connections\{app="\d+",pid="` + pid + `",uid="\d+"\} 1`),
		regexp.MustCompile(`peregrine_sidecar_app_bytes_total\{app="\d+",direction="sent",pid="` + pid + `",uid="\d+"\} 10045`),
		regexp.MustCompile(`peregrine_sidecar_app_drops_total\{app="\d+",pid="` + pid + `",reason="bad_buffer",uid="\d+"\} 0`),
		regexp.MustCompile(`peregrine_sidecar_app_channels\{app="\d+",pid="` + pid + `",uid="\d+"\} 1`),
		regexp.MustCompile(`peregrine_sidecar_apps_attached 1`),
	} {
		require.Regexp(t, want, body)
	}
	require.NoError(t, c.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, c.wait(), c.output())
	require.Contains(t, c.output(), "the sidecar's applications detached and its frames returned")
	require.Contains(t, c.output(), "applications: 1 attached")
}

// The config's bounds are the channel's own.
func TestSidecarBoundsAgree(t *testing.T) {
	require.Equal(t, []int{shm.MaxRing, shm.MaxBuffers, shm.MaxBufSize},
		[]int{config.SidecarMaxRing, config.SidecarMaxBuffers, config.SidecarMaxBufSize})
}
