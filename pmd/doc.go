// Package pmd is the registry of poll-mode drivers: it opens a port.Port from
// a spec string the way DPDK opens a vdev from its devargs, for example
//
//	mem:ab/0?queues=2       one end of the in-memory pair "ab"
//	null:?size=64           a net_null-like source and sink
//	pcap:in.pcap?timing=recorded
//	pcap-out:out.pcap
//
// The syntax is DRIVER:TARGET[?KEY=VALUE&KEY=VALUE...]. Drivers live in
// sub-packages and register themselves from init(); import pmd/all to link
// every driver into a binary. Registration is the one package-level mutable
// state the project allows.
//
// # Environment
//
// An Env carries what every driver needs: the mbuf pool packets live in, the
// clock ports stamp and pace with, a logger, and a get-or-create store for
// state a driver shares between the ports it opens (the mem driver keeps its
// named pairs there). Use one Env per process or simulated appliance; two
// Envs never see each other's mem pairs.
//
// # Buffer ownership
//
// A port opened here follows the core/port contract: RxBurst hands the
// caller handles it now owns; TxBurst takes ownership of the first n handles
// it returns and leaves the rest with the caller. Close returns to the pool
// every handle the port still holds. The registry itself never touches
// packets.
package pmd
