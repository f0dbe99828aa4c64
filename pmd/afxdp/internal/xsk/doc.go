// Package xsk is the raw AF_XDP layer under pmd/afxdp: socket creation,
// UMEM registration, the four mmap'd rings (fill, completion, RX, TX), bind,
// statistics and the wakeup syscalls. Every unsafe pointer and raw syscall of
// the driver lives here.
//
// # Rings
//
// A ring is a power-of-two array shared with the kernel plus a producer and
// a consumer index, each written by one side only. The user side keeps a
// private copy of the other side's index (cachedProd / cachedCons) and only
// re-reads the shared one when the copy says there is not enough room or
// data, so a burst costs at most one atomic load and one atomic store.
//
//   - Fill and TX rings: user space produces (Free, Index, Submit).
//   - RX and completion rings: user space consumes (Avail, Index, Release).
//
// # Ownership
//
// This package moves addresses, not buffers: it neither knows nor checks
// which frame an address belongs to. An address written to the fill or TX
// ring belongs to the kernel from Submit until the same address (or, for RX,
// an address inside the same chunk) comes back on the RX or completion ring;
// after Close every address is the caller's again. The caller (pmd/afxdp)
// keeps that account.
package xsk
