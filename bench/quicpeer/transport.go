package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
)

// alpn is the only application protocol both sides accept.
const alpn = "peregrine-bench"

// stream is what the bulk and latency protocols run over: a QUIC stream or
// a TCP connection.
type stream interface {
	io.Reader
	io.Writer
	// CloseWrite ends the sending direction: the peer reads EOF.
	CloseWrite() error
	SetDeadline(t time.Time) error
}

// streamHandler serves one stream on the server side.
type streamHandler func(s stream) error

// transport opens the sessions and listeners of one protocol.
type transport interface {
	name() string
	listen(ctx context.Context, addr string) (listener, error)
	// connect sets up what streams are opened from (the QUIC handshake;
	// nothing for TCP, which connects per stream).
	connect(ctx context.Context, addr string, timeout time.Duration) (session, error)
}

type listener interface {
	Addr() net.Addr
	accept(ctx context.Context) (serverConn, error)
	Close() error
}

// serverConn is one accepted connection; serve runs handler on each of its
// streams until the peer is done or ctx ends, then releases it.
type serverConn interface {
	serve(ctx context.Context, handler streamHandler) error
}

type session interface {
	open(ctx context.Context) (stream, error)
	Close() error
}

var (
	transportQUIC transport = quicTransport{}
	transportTCP  transport = tcpTransport{}
)

// ---- QUIC ----

type quicTransport struct{}

func (quicTransport) name() string { return "quic" }

func quicConfig(timeout time.Duration) *quic.Config {
	idle := 30 * time.Second
	if timeout > 0 && timeout < idle {
		idle = timeout
	}
	handshake := 10 * time.Second
	if timeout > 0 && timeout < handshake {
		handshake = timeout
	}
	return &quic.Config{MaxIdleTimeout: idle, HandshakeIdleTimeout: handshake, MaxIncomingStreams: 1024}
}

func (quicTransport) listen(_ context.Context, addr string) (listener, error) {
	cert, err := selfSignedCert()
	if err != nil {
		return nil, err
	}
	tlsConf := &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{alpn}, MinVersion: tls.VersionTLS13}
	ln, err := quic.ListenAddr(addr, tlsConf, quicConfig(0))
	if err != nil {
		return nil, fmt.Errorf("quic listen on %s: %w", addr, err)
	}
	return quicListener{ln}, nil
}

func (quicTransport) connect(ctx context.Context, addr string, timeout time.Duration) (session, error) {
	// A benchmark peer with a throw-away certificate: there is no identity
	// to verify, only ALPN to agree on.
	tlsConf := &tls.Config{InsecureSkipVerify: true, NextProtos: []string{alpn}, MinVersion: tls.VersionTLS13} //nolint:gosec
	conn, err := quic.DialAddr(ctx, addr, tlsConf, quicConfig(timeout))
	if err != nil {
		return nil, fmt.Errorf("quic handshake with %s: %w", addr, err)
	}
	return quicSession{conn}, nil
}

type quicListener struct{ ln *quic.Listener }

func (l quicListener) Addr() net.Addr { return l.ln.Addr() }
func (l quicListener) Close() error   { return l.ln.Close() }

func (l quicListener) accept(ctx context.Context) (serverConn, error) {
	c, err := l.ln.Accept(ctx)
	if err != nil {
		return nil, err
	}
	return quicServerConn{c}, nil
}

type quicServerConn struct{ c *quic.Conn }

func (sc quicServerConn) serve(ctx context.Context, handler streamHandler) error {
	stopAbort := context.AfterFunc(ctx, func() { _ = sc.c.CloseWithError(1, "server timeout") })
	defer stopAbort()
	deadline, _ := ctx.Deadline()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	var acceptErr error
	for {
		s, err := sc.c.AcceptStream(ctx)
		if err != nil {
			acceptErr = err
			break
		}
		_ = s.SetDeadline(deadline)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := handler(quicStream{s}); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("stream %d: %w", s.StreamID(), err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	_ = sc.c.CloseWithError(0, "")
	var appErr *quic.ApplicationError
	if errors.As(acceptErr, &appErr) && appErr.Remote && appErr.ErrorCode == 0 {
		acceptErr = nil // the client closed the connection: the normal end
	}
	if acceptErr != nil {
		acceptErr = fmt.Errorf("connection from %s: %w", sc.c.RemoteAddr(), acceptErr)
	}
	return errors.Join(append(errs, acceptErr)...)
}

type quicSession struct{ c *quic.Conn }

func (qs quicSession) open(ctx context.Context) (stream, error) {
	s, err := qs.c.OpenStreamSync(ctx)
	if err != nil {
		return nil, fmt.Errorf("open quic stream: %w", err)
	}
	return quicStream{s}, nil
}

func (qs quicSession) Close() error { return qs.c.CloseWithError(0, "") }

type quicStream struct{ *quic.Stream }

// CloseWrite sends FIN: quic-go's Stream.Close closes only the sending half.
func (s quicStream) CloseWrite() error { return s.Close() }

// ---- TCP ----

type tcpTransport struct{}

func (tcpTransport) name() string { return "tcp" }

func (tcpTransport) listen(ctx context.Context, addr string) (listener, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("tcp listen on %s: %w", addr, err)
	}
	return tcpListener{ln}, nil
}

func (tcpTransport) connect(_ context.Context, addr string, _ time.Duration) (session, error) {
	return &tcpSession{addr: addr}, nil
}

type tcpListener struct{ ln net.Listener }

func (l tcpListener) Addr() net.Addr { return l.ln.Addr() }
func (l tcpListener) Close() error   { return l.ln.Close() }

func (l tcpListener) accept(context.Context) (serverConn, error) {
	c, err := l.ln.Accept()
	if err != nil {
		return nil, err
	}
	return tcpServerConn{c.(*net.TCPConn)}, nil
}

type tcpServerConn struct{ c *net.TCPConn }

func (sc tcpServerConn) serve(ctx context.Context, handler streamHandler) error {
	stopAbort := context.AfterFunc(ctx, func() { _ = sc.c.Close() })
	defer stopAbort()
	deadline, _ := ctx.Deadline()
	_ = sc.c.SetDeadline(deadline)
	err := handler(sc.c)
	closeErr := sc.c.Close()
	if err != nil {
		return fmt.Errorf("connection from %s: %w", sc.c.RemoteAddr(), err)
	}
	if closeErr != nil && !errors.Is(closeErr, net.ErrClosed) {
		return fmt.Errorf("connection from %s: %w", sc.c.RemoteAddr(), closeErr)
	}
	return nil
}

// tcpSession opens one TCP connection per stream.
type tcpSession struct {
	addr  string
	mu    sync.Mutex
	conns []*net.TCPConn
}

func (ts *tcpSession) open(ctx context.Context) (stream, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", ts.addr)
	if err != nil {
		return nil, fmt.Errorf("tcp connect to %s: %w", ts.addr, err)
	}
	tc := c.(*net.TCPConn)
	ts.mu.Lock()
	ts.conns = append(ts.conns, tc)
	ts.mu.Unlock()
	return tc, nil
}

func (ts *tcpSession) Close() error {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	var err error
	for _, c := range ts.conns {
		if cerr := c.Close(); cerr != nil && !errors.Is(cerr, net.ErrClosed) {
			err = errors.Join(err, cerr)
		}
	}
	ts.conns = nil
	return err
}

// selfSignedCert makes a fresh ECDSA P-256 certificate valid for a day.
func selfSignedCert() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("generate certificate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("certificate serial: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "quicpeer"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"quicpeer"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("self-sign certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
