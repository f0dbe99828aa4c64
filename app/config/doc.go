// Package config reads the appliance's YAML configuration file (`peregrine
// run -c FILE`), checks every field before anything is opened, and builds
// the pipeline it declares through the same app builders the subcommands
// use (AddForwarders, AddGenerators, AddSinks, AddFabric, AddTransport,
// AddRoCE), so
// a config and a command line with the same values build the same thing.
//
// # The file
//
//	pool:      {frames: 16384, frame_size: 2048}
//	idle:      adaptive                    # adaptive | busy | yield | sleep
//	lcores:    [{name: a, cpu: 0, idle: busy}, {name: b, cpu: 1}]
//	ports:     [{name: p0, spec: "afxdp:veth0?queue=0"}, ...]
//	pipelines:                             # one per lcore, stages polled in order
//	  - lcore: a
//	    stages:
//	      - {kind: forwarder, ports: [p0, p1], mode: io}
//	run:       {duration: 10s, drain: 5s, stats_period: 1s}
//	host:      {socket: /run/peregrine.sock, port: "afxdp:eth1", ip: 198.18.0.1}  # the sidecar (optional)
//
// Stage kinds (Kinds): forwarder, generator, sink, fabric, transport, roce;
// the fields of each are its type's yaml tags (Forwarder, Generator, Sink,
// Fabric, Transport, RoCE). configs/ holds an example of every use.
//
// The host section (Host) runs the sidecar beside the pipelines, with
// serve's options as fields; config only checks it (it sits below the
// public package and host): the binary opens the endpoint and the server.
//
// The seed mechanisms: a transport stage's ioi (on|off|inorder|sprayed),
// msg_size, sends (initiator) and post_recv (target) for the delivery
// index's two-sided Sends, op_timeout (initiator) and global_qpns (both
// ends) are the transport subcommand's flags of the same names
// (configs/transport-mechanisms.yaml); a roce stage is the RoCEv2
// QP-translation stage of the roce subcommand (configs/roce-pcap.yaml).
// An initiator's targets (with dc_sqs, posters, burst) posts through the
// multi-channel send queue instead, as transport --targets and --dc-sqs do
// (app.AddMCSQInitiator; configs/transport-mcsq.yaml).
//
// The YAML library is go.yaml.in/yaml/v3, the maintained continuation of
// gopkg.in/yaml.v3 (already in the module graph). Its strict mode stops at
// the first unknown key and its type errors name a line, not a field, so
// Parse walks the document beside the schema's types itself (checkNode):
// every unknown key, every value of the wrong type and every explicit
// zero of a field that has a default (tagged default:"...": leaving it
// out gives the default, 0 would be silently replaced) is reported with
// its path, all at once. A stage is a mapping whose "kind" key selects its
// type, so its other keys are checked and decoded once the kind is known.
//
// Load bounds the file's size (MaxFileBytes) and takes the file names of
// ports (pcap:, pcap-out:, capture=) relative to the file's directory; a
// capture to read that does not exist is an error of the file.
//
// # Errors
//
// Parse returns every problem at once (Errors), each an *Error whose Path
// names the field as written — "pipelines[1].stages[0].profile" — and whose
// message gives the value and the fix. The value rules are shared with the
// command-line flags (rules.go: CheckFrames, CheckFrameSize, ParseRate, …)
// so the same mistake gets the same answer in both.
//
// # Adding a stage kind
//
// A mechanism (IOI, the delivery index, the multi-channel send queue, QP
// translation) adds a type implementing Stage — Check validates its fields
// through a Checker, Build adds it to the pipeline through a Builder and
// returns a Running the run reads — in a new file of this package, and one
// line in Kinds. A Running that also implements Export(name,
// *metrics.Registry) error has its counters on /metrics.
//
// # Running and stopping
//
// Appliance.Run starts the loops and waits until run.duration passes,
// every stage that ends by itself (Running.Finite) is Done, or its context
// ends (SIGINT/SIGTERM). Then it drains — each stage stops posting or
// sending and waits for its in-flight work, for up to run.drain, less if
// the hurry context ends (a second signal) — stops the loops, closes the
// ports and checks the pool is back to zero in use. Result.Lost names what
// did not make it.
//
// # Ownership
//
// The Appliance's pipeline owns the pool, the ports and every stage (see
// package app); config holds no frame. Running values read counters the
// stages publish for any goroutine.
package config
