// Package pcap is the capture-file driver: it replays a pcap file as a
// receive-only port, writes a transmit-only port's packets to a pcap file,
// and mirrors any port's traffic into a file (Mirror).
//
// Specs:
//
//	pcap:FILE[?timing=fast|original|speed=N|rate&rate=R&loop=N]
//	pcap-out:FILE[?snaplen=N&max=SIZE&linktype=ethernet|raw|linux_sll|N]
//
// Input is pcap (gzip-compressed too) or pcapng, of Ethernet frames, Linux
// cooked frames (tcpdump -i any: SLL, SLL2) or raw IPv4/IPv6, the latter
// replayed with an Ethernet header of zero addresses (ToEthernet); other
// link types are refused at open rather than replayed as Ethernet. Output
// is classic libpcap format with nanosecond timestamps and opens in
// Wireshark and tshark. max=SIZE (1GiB) bounds an output file: records
// that would take it past SIZE are not written and are counted (Report).
// Any port spec's capture=FILE (pmd.CaptureParam) takes snaplen=N and
// max=SIZE beside it for the capture (SplitCapture).
//
// # What is lost is reported
//
// Reader.Loss counts the records longer than a frame's room and keeps the
// read error that ended a pass early; Writer.Report and Mirror.Report give
// the file, its frame count, what max kept out and the first write error.
// The commands turn these into checks that fail the run.
//
// # Timing and timestamps
//
// timing=fast (the default) releases packets as fast as RxBurst is called;
// timing=original (or recorded) releases each packet when the port's clock
// has advanced, since the first packet of its pass was released, by as
// much as the capture's timestamps have; timing=speed=N divides those gaps
// by N (2: twice as fast); timing=rate releases packets at rate=R (1mpps:
// a microsecond apart; 10gbit: each after the bits of the one before),
// whatever the capture's timestamps say. A paced port advertises
// port.CapPaced. loop=N replays the file N times (0 = forever); a new pass
// starts right after the last packet of the previous one (at rate=, the
// schedule runs on). The file is read a record at a time, never whole, so
// a capture larger than memory replays (rewinding it for each pass).
// Received packets carry Meta.RxTime: the clock reading of the RxBurst
// call (fast), or the packet's scheduled release time (paced), so replays
// under a virtual clock are deterministic.
//
// Written packets are stamped with the writer's clock at TxBurst, mapped to
// wall time: Epoch (default: the wall time at open) plus the clock time
// elapsed since open. Meta.RxTime is not used: it is a reading of whatever
// clock the receiving port had, not necessarily this one. A packet a
// Reader on the same pool read keeps its capture timestamp instead
// (stamps.go), so pcap → pcap-out preserves the input's timing.
//
// # Buffer ownership
//
// A file port must copy. The reader allocates a frame per packet from its
// own mbuf.Cache and copies the record into it; the caller owns bufs[:n]
// from RxBurst. Records longer than a frame's room (FrameSize - Headroom)
// are skipped and counted as RxDropped; a malformed or truncated file ends
// the pass and is counted in Errors, it never panics. At the end of the
// last pass RxBurst returns 0 forever.
//
// The writer owns every handle TxBurst gives it: it writes the packet (cut
// to snaplen) and frees the handle through its own cache at once, so
// TxBurst always returns len(bufs). Write errors are counted in Errors and
// the first one is returned by Close.
//
// Mirror passes every call to the port it wraps and writes each packet that
// port received (after RxBurst) or accepted for transmission (TxBurst; the
// records are built before the handles are handed over, and only the
// accepted ones are written). It never takes ownership of a packet.
//
// Reader and Writer have one queue, whose RX and TX sides must each be
// driven by one goroutine at a time, and Close must not run concurrently
// with bursts.
package pcap
