// Command quicpeer is the peer peregrine's reliable transport is compared
// against in bench/vs-quic.sh: bulk goodput and 4 KiB request/response
// latency over quic-go (the QUIC stack a Go user would pick) and over kernel
// TCP (the ceiling). It lives in its own module so that the main module never
// depends on quic-go.
//
//	quicpeer quic-server     --listen ADDR [--conns N] [--timeout D] [--lifetime D]
//	quicpeer quic-client     --connect ADDR (--bytes N | --duration D) [--streams K] [--timeout D]
//	quicpeer tcp-server      (same flags as quic-server)
//	quicpeer tcp-client      (same flags as quic-client)
//	quicpeer quic-lat-server (same flags as quic-server)
//	quicpeer quic-lat-client --connect ADDR [--size 4096] [--count N] [--warmup N] [--timeout D]
//	quicpeer tcp-lat-server / tcp-lat-client (the same over TCP)
//
// Servers print "READY proto=P listen=ADDR" once they accept connections
// (ADDR is the bound address, so --listen 127.0.0.1:0 works) and serve until
// SIGINT/SIGTERM, --lifetime, or N connections (--conns). Clients print one
// machine-readable line and exit 0, or print the error and exit 1 (2 for a
// usage error):
//
//	RESULT proto=quic bytes=N seconds=S goodput_gbps=G
//	RESULT proto=quic op=push4k p50_us=.. p99_us=.. p999_us=.. count=N
//
// # Bulk protocol
//
// The client opens K streams (QUIC: streams of one connection, TCP: K
// connections), writes its share of N bytes (or writes until D has passed)
// on each and half-closes it. The server reads each stream to EOF and replies
// with the byte count it received, 8 bytes big-endian. Goodput is the sum of
// the confirmed counts divided by the time from the first byte written to the
// last confirmation read, so bytes still in flight or in buffers when the
// client stops are never counted.
//
// # Latency protocol
//
// One stream (QUIC) or one connection (TCP) carries every request, framed as
// a 4-byte big-endian length and that many payload bytes; the server answers
// each with its length, 8 bytes big-endian (the acknowledgement of a push).
// The client keeps exactly one request outstanding, so a request's latency
// is its full round trip including any loss recovery, and no request waits
// behind another (one stream per request would add stream-credit frames
// and measure quic-go's stream bookkeeping rather than the transport). The
// first --warmup requests are not measured.
//
// # TLS
//
// Each server generates a self-signed ECDSA P-256 certificate in memory at
// start; clients skip verification (a benchmark peer, never a service) and
// both sides insist on ALPN "peregrine-bench".
//
// # Ownership
//
// Every stream handler owns its own buffer for its lifetime; nothing is
// shared between streams except the counters the client sums after all of
// them have finished.
package main
