package host_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/peregrine-net/peregrine"
	"github.com/peregrine-net/peregrine/host"
)

// The test binary re-executes itself as an application (childApp) or as an
// appliance (childAppliance) to be killed with SIGKILL.
const (
	envApp       = "PEREGRINE_HOST_TEST_APP"       // socket path
	envPeer      = "PEREGRINE_HOST_TEST_PEER"      // IP, MAC hex and region key of the peer to dial
	envAppliance = "PEREGRINE_HOST_TEST_APPLIANCE" // socket path
)

func TestMain(m *testing.M) {
	if sock := os.Getenv(envApp); sock != "" {
		childApp(sock, os.Getenv(envPeer))
		os.Exit(0)
	}
	if sock := os.Getenv(envAppliance); sock != "" {
		childAppliance(sock)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// childApp attaches, dials the echo peer and does round trips for ever,
// printing a line after each, with a Recv in flight most of the time and a
// Push from a region of its own into the peer's (key) most of the time too.
func childApp(sock, peer string) {
	var ip string
	var mac [6]byte
	var key uint32
	fmt.Sscanf(peer, "%s %x %d", &ip, &mac, &key)
	ep, err := peregrine.Attach(sock, peregrine.AttachOptions{})
	if err != nil {
		fmt.Println("attach:", err)
		os.Exit(1)
	}
	fmt.Println("attached")
	ctx := context.Background()
	c, err := ep.Dial(ctx, peregrine.Addr{IP: netip.MustParseAddr(ip), MAC: mac}, peregrine.ConnOptions{})
	if err != nil {
		fmt.Println("dial:", err)
		os.Exit(1)
	}
	region, err := ep.Register(make([]byte, 64<<10), 0)
	if err != nil {
		fmt.Println("register:", err)
		os.Exit(1)
	}
	var push peregrine.Op
	msg := make([]byte, 2000)
	buf := make([]byte, 64<<10)
	for i := 0; ; i++ {
		if i > 0 {
			if _, err := push.Wait(ctx); err != nil {
				os.Exit(1)
			}
		}
		if c.PushAsync(&push, region, 0, 64<<10, peregrine.RemoteAddr{Key: key}) != nil {
			os.Exit(1)
		}
		if c.Send(ctx, msg) != nil {
			os.Exit(1)
		}
		if _, err := c.Recv(ctx, buf); err != nil {
			os.Exit(1)
		}
		fmt.Println(i)
	}
}

// echoAll accepts every connection dialled to ep and echoes its messages,
// counting the connections that ended.
func echoAll(t testing.TB, ep *peregrine.Endpoint, accepted, ended *atomic.Int64) {
	l, err := ep.Listen(peregrine.ConnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := l.Accept(context.Background())
			if err != nil {
				return
			}
			accepted.Add(1)
			go func() {
				defer ended.Add(1)
				defer c.Close()
				buf := make([]byte, 64<<10)
				for {
					n, err := c.Recv(context.Background(), buf)
					if err != nil {
						return
					}
					if c.Send(context.Background(), buf[:n]) != nil {
						return
					}
				}
			}()
		}
	}()
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// An application SIGKILLed at a random point of its life (seeded) has its
// connection closed, its operations ended (a push from its region among
// them, most of the time) and its channel and region released; an
// application beside it keeps working; the pool ends with nothing in use.
func TestKilledApplication(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	r := newRig(t, host.Quota{})
	var accepted, ended atomic.Int64
	echoAll(t, r.b, &accepted, &ended)
	ctx := ctxT(t)
	other := attach(t, r, peregrine.AttachOptions{})
	oc, err := other.Dial(ctx, r.b.Addr(), peregrine.ConnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pa := r.b.Addr()
	target, err := r.b.Register(make([]byte, 64<<10), peregrine.RemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	peer := fmt.Sprintf("%s %x %d", pa.IP, pa.MAC[:], target.Remote(0).Key)
	buf := make([]byte, 100)
	for seed := uint64(1); seed <= 12; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0))
		at := rng.IntN(12) - 2 // -2: before attach; -1: after attach, during dial
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envApp+"="+r.socket, envPeer+"="+peer)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		for i := -2; i < at && sc.Scan(); i++ {
			if line := sc.Text(); line != "attached" {
				if _, err := strconv.Atoi(line); err != nil {
					t.Fatalf("seed %d: child says %q", seed, line)
				}
			}
		}
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		waitFor(t, fmt.Sprintf("seed %d: the killed application detached", seed), func() bool {
			return r.srv.Stats(nil).Attached == 1
		})
		st := r.srv.Stats(nil)
		if st.Attaches != st.Detaches+1 {
			t.Fatalf("seed %d (killed at %d): %d attaches, %d detaches: want one live", seed, at, st.Attaches, st.Detaches)
		}
		// The other application is unaffected.
		msg := fmt.Appendf(nil, "after seed %d", seed)
		if err := oc.Send(ctx, msg); err != nil {
			t.Fatalf("seed %d: the other application's send: %v", seed, err)
		}
		n, err := oc.Recv(ctx, buf)
		if err != nil || string(buf[:n]) != string(msg) {
			t.Fatalf("seed %d: the other application's echo %q, %v", seed, buf[:n], err)
		}
		t.Logf("seed %d: killed at round trip %d", seed, at)
	}
	// Every connection the killed applications had was closed: the peer's
	// side of each ended.
	waitFor(t, "the killed applications' connections to end at the peer", func() bool {
		return ended.Load() == accepted.Load()-1 // the other application's lives
	})
	oc.Close()
	other.Close()
	waitFor(t, "the last application to detach", func() bool { return r.srv.Stats(nil).Attached == 0 })
	if err := r.shutdown(); err != nil {
		t.Fatalf("host close (frames in use would be a leak): %v", err)
	}
}

// childAppliance runs an appliance over a mem pair with an echo peer on
// the pair's other end, and prints the peer's address once serving.
func childAppliance(sock string) {
	h, err := peregrine.NewHost(peregrine.HostOptions{})
	if err != nil {
		os.Exit(1)
	}
	a, err := h.Open("mem:k/0", peregrine.Options{IP: netip.MustParseAddr("198.18.0.1")})
	if err != nil {
		os.Exit(1)
	}
	b, err := h.Open("mem:k/1", peregrine.Options{IP: netip.MustParseAddr("198.18.0.2")})
	if err != nil {
		os.Exit(1)
	}
	var x, y atomic.Int64
	echoAll(nil, b, &x, &y)
	srv, err := host.New(host.Options{Socket: sock, Endpoint: a, UID: -1, GID: -1})
	if err != nil {
		os.Exit(1)
	}
	pa := b.Addr()
	fmt.Printf("%s %x\n", pa.IP, pa.MAC[:])
	srv.Run(context.Background())
}

// The appliance dying (SIGKILL) ends the client's calls with ErrClosed: a
// Recv waiting, and every call after; none hangs.
func TestApplianceKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	sock := filepath.Join(t.TempDir(), "a.sock")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envAppliance+"="+sock)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	sc := bufio.NewScanner(out)
	if !sc.Scan() {
		t.Fatal("the appliance printed nothing")
	}
	var ip string
	var mac [6]byte
	fmt.Sscanf(sc.Text(), "%s %x", &ip, &mac)
	ep, err := peregrine.Attach(sock, peregrine.AttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	ctx := ctxT(t)
	c, err := ep.Dial(ctx, peregrine.Addr{IP: netip.MustParseAddr(ip), MAC: mac}, peregrine.ConnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 100)
	if err := c.Send(ctx, []byte("ping")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Recv(ctx, buf); err != nil {
		t.Fatal(err)
	}
	recvd := make(chan error, 1)
	go func() { _, err := c.Recv(ctx, buf); recvd <- err }() // nothing will come
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if err := <-recvd; !errors.Is(err, peregrine.ErrClosed) {
		t.Fatalf("Recv waiting when the appliance died = %v, want ErrClosed", err)
	}
	if err := c.Send(ctx, []byte("x")); !errors.Is(err, peregrine.ErrClosed) {
		t.Fatalf("Send after = %v, want ErrClosed", err)
	}
	if _, err := ep.Dial(ctx, peregrine.Addr{IP: netip.MustParseAddr(ip), MAC: mac}, peregrine.ConnOptions{}); !errors.Is(err, peregrine.ErrClosed) {
		t.Fatalf("Dial after = %v, want ErrClosed", err)
	}
	if _, err := peregrine.Attach(sock, peregrine.AttachOptions{}); !errors.Is(err, peregrine.ErrClosed) {
		t.Fatalf("Attach to a dead appliance = %v, want ErrClosed", err)
	}
}
