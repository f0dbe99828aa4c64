// Package app assembles a peregrine pipeline: one mbuf pool, the ports that
// move its frames, the poll loops (lcores) and the stages each loop polls,
// started together and stopped in order, with a check at the end that every
// frame is back in the pool. Every subcommand of the peregrine binary and
// every benchmark harness that runs stages on loops builds its pipeline
// here, so the order of the steps and the ownership of each frame are
// decided in one place; it is what a configuration file will build and
// what a new mechanism plugs a stage into.
//
// A pipeline is built in three steps, from one controlling goroutine:
//
//  1. New validates Options at once (every lcore's CPU and the idle policy
//     are checked before anything is opened), makes the pool and opens
//     Options.Ports, in order, through the pmd registry. The caller links
//     the drivers it wants (import pmd/all, or single drivers): app
//     registers none. Ports made elsewhere (a mem.NewPair, a fabric.Link)
//     join with AddPort; other things to close after the loops stop (a
//     fabric, a transport endpoint) join with Own.
//  2. The caller builds its stages with Pool, Port and Cache(loop) — the
//     mbuf cache of the loop the stage will run on — and declares each with
//     Add: which loop polls it, and which port queue halves it drives.
//  3. Start hands every declared queue half the cache of the loop that
//     drives it (ports that implement CacheUser: afxdp, afpacket), builds
//     one lcore.Loop per lcore that has stages, in the order the stages
//     were added, and starts them. Run waits while they work (a duration,
//     a done condition, a context), calling a tick for live figures. Stop
//     ends everything in order and checks the pool.
//
// # One cache per loop
//
// Each loop has one mbuf cache, made on the first Cache(loop). Its stages
// allocate from it and free to it, and the ports take frames from it and
// free them to it for the queue halves those stages drive, so frames cycle
// through one LIFO stack on each CPU, as through a DPDK lcore's mempool
// cache, instead of passing through the pool's shared ring: measured on
// AF_XDP, +25% transmit rate for 1518-byte frames. A queue half (the
// receive or the transmit side of one port queue) is driven by stages of
// one loop only, since its cache is that loop's and a burst call is not
// safe from two goroutines at once; the two halves of a queue may be on
// different loops (io forwarding A→B on one, B→A on another). Add
// refuses a second loop for a half. A stage may leave Rx and Tx empty when it
// keeps caches of its own (a transport endpoint), or when its ports have
// none to wire (mem, null): then nothing is wired for it.
//
// # Stopping
//
// Stop (or StopLoops followed by Close; Halt signals the loops ahead of
// StopLoops when a measurement needs its window to end at once) does, in
// this order:
//
//  1. signals every loop and waits for it; each loop calls Stop on its
//     stages that implement lcore.Stopper, from its own goroutine, after its
//     last Poll, so they free the frames they hold and flush their caches.
//     Stages whose loop never started are stopped here instead;
//  2. closes the loops' caches (the stages are done with them; a port
//     returns the frames it holds through caches of its own);
//  3. closes what was given to Own, last first;
//  4. closes the ports, in order: each returns the frames it still holds
//     (port.Port.Close), whatever its receive queues still have waiting, so
//     nothing here reads a port until it runs dry — a null port never does;
//  5. checks that the pool has no frame in use (mbuf.Pool.CheckLeaks: its
//     error names the pool and the count, and the handles with
//     Options.Pool.Debug) and closes the pool.
//
// # Who owns a frame
//
//   - The pool owns every frame that no one has allocated. Frames in a
//     loop's cache count as free.
//   - A stage owns what it allocated or received (Port.RxBurst) until it
//     hands it on: Port.TxBurst accepting it, a ring, a free. A port owns
//     what TxBurst accepted and what it holds for receiving (an AF_XDP fill
//     ring) until it gives it back by RxBurst, frees it, or closes.
//   - app itself never holds a frame: it only decides when each owner is
//     told to give its frames back (step 1 for stages, 3 and 4 for owned
//     things and ports), and checks afterwards that they did.
//   - The Pipeline owns the pool, the ports (also those given to AddPort),
//     the loops' caches and what was given to Own; the caller must not close
//     them. The stages belong to their loops from Start until Stop returns;
//     their counters may be read from any goroutine, as each stage allows.
//
// # Stage builders
//
// The stages every subcommand runs are built here, not in cmd, so that
// `peregrine run -c FILE` builds the same stages through the same code:
// AddForwarders (testpmd's modes, txonly generators, one stage per queue
// spread over the loops), AddGenerators, AddSinks and AddReplay (gen),
// AddFabric (the fabric middlebox), AddTransport (a txn endpoint: a target
// with its registered region or an initiator with its txnload workload),
// and the two demo compositions AddForwardDemo and AddTransportDemo. Each
// takes an options struct, refuses a bad field with a *FieldError naming
// it (a command maps the name back to its flag), adds its stages to the
// pipeline before Start, and returns the stages or accessors a caller
// prints live and final figures from. The pipeline owns what they build.
// NewVethTopology makes demo --veth's three network namespaces (and
// removes them: Delete). AddTransport also puts a ConnSampler on an
// initiator's loop: connection state (SRTT, congestion window) is read on
// that loop only, and the sampler publishes it for metrics. Package config builds a YAML file's pipeline
// through the same builders; package metrics exports a pipeline to
// Prometheus.
//
// # Captures
//
// A port spec with a capture=FILE parameter (pmd.CaptureParam) is opened
// without it and wrapped in a pcap.Mirror that writes every frame the port
// receives or accepts for transmission to FILE; the mirror hands the
// loops' caches on to the port it wraps. A spec without the parameter is
// not wrapped, so a port that is not captured pays nothing.
package app
