package config

import (
	"fmt"
	"net/netip"
	"os"
	"os/user"
	"strconv"
	"strings"

	"github.com/peregrine-net/peregrine/pmd"
)

// Host enables the sidecar, as peregrine serve runs it: one transport
// endpoint on its own port, and a Unix socket applications attach to
// (package host/client), each getting a shared-memory channel of its own.
// The endpoint runs beside the pipelines, on its own poll loop; its port
// is not one of the file's ports.
type Host struct {
	// Socket is the Unix socket's path (required).
	Socket string `yaml:"socket"`
	// Port is the endpoint's port spec (required): afxdp:IFACE?queue=N,
	// afpacket:IFACE or mem:PAIR/END.
	Port string `yaml:"port"`
	// IP is the endpoint's IPv4 address (required).
	IP string `yaml:"ip"`
	// SocketMode is the socket file's mode, octal (default 0660: the
	// owner and the group may attach).
	SocketMode string `yaml:"socket_mode" default:"0660"`
	// Owner and Group, a name or an id, become the socket file's owner
	// and group (default: as created).
	Owner string `yaml:"owner"`
	Group string `yaml:"group"`
	// Buffers, BufferSize and Ring are the channel an application gets
	// when it asks for nothing: its buffers, each buffer's bytes (its
	// longest message, a multiple of 64) and its descriptors per ring (its
	// operations in flight, a power of two).
	Buffers    int `yaml:"buffers" default:"256"`
	BufferSize int `yaml:"buffer_size" default:"65536"`
	Ring       int `yaml:"ring" default:"256"`
	// The quotas: channels one user may hold at once, and per channel the
	// buffers, the largest buffer, the connections open and the largest
	// ring.
	MaxChannels   int `yaml:"max_channels" default:"16"`
	MaxBuffers    int `yaml:"max_buffers" default:"1024"`
	MaxBufferSize int `yaml:"max_buffer_size" default:"8388608"`
	MaxConns      int `yaml:"max_conns" default:"64"`
	MaxRing       int `yaml:"max_ring" default:"1024"`
	// Echo, with a mem: port, runs an echo peer at IP + 1 on the pair's
	// other end: applications can try the sidecar without a network.
	Echo bool `yaml:"echo"`
	// Shards runs the endpoint as that many shards, one poll loop and
	// port queue each (default 1; peregrine.Options.Shards: the port is
	// opened with queues=N, and the echo peer gets as many).
	Shards int `yaml:"shards" default:"1"`
}

// The channel's bounds (host/shm's MaxRing, MaxBuffers, MaxBufSize; this
// package sits below host and cannot import it, and cmd/peregrine's tests
// check that the two agree).
const (
	SidecarMaxRing    = 1 << 16
	SidecarMaxBuffers = 1 << 16
	SidecarMaxBufSize = 1 << 30
)

func applyHostDefaults(h *Host) {
	if h == nil {
		return
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	if h.SocketMode == "" {
		h.SocketMode = "0660"
	}
	def(&h.Buffers, 256)
	def(&h.BufferSize, 64<<10)
	def(&h.Ring, 256)
	def(&h.MaxChannels, 16)
	def(&h.MaxBuffers, 1024)
	def(&h.MaxBufferSize, 8<<20)
	def(&h.MaxConns, 64)
	def(&h.MaxRing, 1024)
	def(&h.Shards, 1)
}

// Addr returns the endpoint's address (valid once the file is).
func (h *Host) Addr() netip.Addr {
	a, _ := netip.ParseAddr(h.IP)
	return a
}

// Mode returns the socket file's mode (valid once the file is).
func (h *Host) Mode() os.FileMode {
	m, _ := strconv.ParseUint(h.SocketMode, 8, 32)
	return os.FileMode(m)
}

// IDs returns the socket file's owner and group, -1 for "as created".
func (h *Host) IDs() (uid, gid int, err error) {
	if uid, err = userID(h.Owner); err == nil {
		gid, err = groupID(h.Group)
	}
	return
}

func userID(s string) (int, error) {
	return lookupID(s, "user", func(s string) (string, error) {
		u, err := user.Lookup(s)
		if err != nil {
			return "", err
		}
		return u.Uid, nil
	})
}

func groupID(s string) (int, error) {
	return lookupID(s, "group", func(s string) (string, error) {
		g, err := user.LookupGroup(s)
		if err != nil {
			return "", err
		}
		return g.Gid, nil
	})
}

// EchoPort is the port spec of the echo peer: the mem: pair's other end.
func (h *Host) EchoPort() string {
	return h.Port[:len(h.Port)-1] + map[byte]string{'0': "1", '1': "0"}[h.Port[len(h.Port)-1]]
}

// lookupID reads a user or group as a name or a number; empty is -1.
func lookupID(s, what string, byName func(string) (string, error)) (int, error) {
	if s == "" {
		return -1, nil
	}
	if n, err := strconv.Atoi(s); err == nil {
		if n < 0 || n > 1<<31-2 {
			return 0, fmt.Errorf("%s is out of range: give a %s name or an id in 0..%d", s, what, 1<<31-2)
		}
		return n, nil
	}
	id, err := byName(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a %s of this machine (%v): give a name from getent or a numeric id", s, what, err)
	}
	return strconv.Atoi(id)
}

// checkHost adds the host section's problems, each naming its field.
func (c *Config) checkHost(top func(string, error)) {
	h := c.File.Host
	if h == nil {
		return
	}
	if h.Socket == "" {
		top("host.socket", fmt.Errorf("missing: give the Unix socket applications attach to, e.g. socket: /run/peregrine.sock"))
	}
	switch err := CheckSpec(h.Port); {
	case err != nil:
		top("host.port", err)
	case !strings.HasPrefix(h.Port, "mem:") && !strings.HasPrefix(h.Port, "afxdp:") && !strings.HasPrefix(h.Port, "afpacket:"):
		top("host.port", fmt.Errorf("%q: the sidecar runs on mem:PAIR/END, afxdp:IFACE?… or afpacket:IFACE?…", h.Port))
	default:
		for i, p := range c.File.Ports {
			if p.Spec != "" && pmd.PortKey(p.Spec) == pmd.PortKey(h.Port) {
				top("host.port", fmt.Errorf("%q opens the same port as ports[%d] (%q): the sidecar's endpoint needs a port of its own", h.Port, i, p.Spec))
			}
		}
		if h.Echo && (!strings.HasPrefix(h.Port, "mem:") || !strings.HasSuffix(h.Port, "/0") && !strings.HasSuffix(h.Port, "/1")) {
			top("host.echo", fmt.Errorf("the echo peer runs on a mem: pair's other end: set port to mem:PAIR/0 or mem:PAIR/1 (it is %q), or leave echo out", h.Port))
		}
	}
	if ip, err := netip.ParseAddr(h.IP); err != nil || !ip.Is4() {
		top("host.ip", fmt.Errorf("%q is not an IPv4 address: give the endpoint's, e.g. ip: 198.18.0.1", h.IP))
	}
	if m, err := strconv.ParseUint(h.SocketMode, 8, 32); err != nil || m > 0o777 {
		top("host.socket_mode", fmt.Errorf("%q is not an octal mode in 0..0777: e.g. \"0660\" (quote it, or YAML reads a number)", h.SocketMode))
	} else if m&0o600 != 0o600 {
		top("host.socket_mode", fmt.Errorf("%q leaves the owner unable to read or write the socket: give the owner rw, e.g. \"0660\"", h.SocketMode))
	}
	if _, err := userID(h.Owner); err != nil {
		top("host.owner", err)
	}
	if _, err := groupID(h.Group); err != nil {
		top("host.group", err)
	}
	rng := func(path string, v, lo, hi int, what string) bool {
		if v < lo || v > hi {
			top(path, fmt.Errorf("%d is out of range: give %s in %d..%d", v, what, lo, hi))
			return false
		}
		return true
	}
	rng("host.shards", h.Shards, 1, 256, "the endpoint's shards")
	rng("host.max_channels", h.MaxChannels, 1, 1<<16, "the channels one user may hold")
	rng("host.max_conns", h.MaxConns, 1, 1<<16, "the connections one channel may hold")
	if rng("host.max_buffers", h.MaxBuffers, 1, SidecarMaxBuffers, "the buffers one channel may have") {
		rng("host.buffers", h.Buffers, 1, h.MaxBuffers, "the buffers of a default channel (at most max_buffers)")
	}
	if rng("host.max_buffer_size", h.MaxBufferSize, 64, SidecarMaxBufSize, "the largest buffer, in bytes") &&
		rng("host.buffer_size", h.BufferSize, 64, h.MaxBufferSize, "a default channel's buffer size in bytes (at most max_buffer_size)") &&
		h.BufferSize%64 != 0 {
		top("host.buffer_size", fmt.Errorf("%d is not a multiple of 64: e.g. %d", h.BufferSize, (h.BufferSize+63)/64*64))
	}
	pow2 := func(path string, v int) {
		if v&(v-1) != 0 {
			top(path, fmt.Errorf("%d is not a power of two: e.g. %d", v, ceilPow2(v)))
		}
	}
	if rng("host.max_ring", h.MaxRing, 2, SidecarMaxRing, "the largest ring, in descriptors") {
		pow2("host.max_ring", h.MaxRing)
		if rng("host.ring", h.Ring, 2, h.MaxRing, "a default channel's ring in descriptors (at most max_ring)") {
			pow2("host.ring", h.Ring)
		}
	}
}

func ceilPow2(n int) int {
	p := 2
	for p < n {
		p <<= 1
	}
	return p
}
