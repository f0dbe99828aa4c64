// Package shm is the sidecar's shared-memory channel: one sealed memfd,
// mapped by the appliance and by one application, holding two lock-free
// single-producer single-consumer rings of fixed-size descriptors and a pool
// of equal buffers.
//
//	offset 0            header (magic, version, geometry; at 64, on a cache
//	                    line of its own, the appliance's "asleep" word),
//	                    one page
//	SubmitOff           submit ring: producer index, consumer index (each on
//	                    its own cache line), RingSize 48-byte Descs
//	CompleteOff         completion ring: the same, RingSize 16-byte Comps
//	BufOff              Buffers buffers of BufSize bytes, page aligned
//
// The application produces Descs (op, connection, first buffer or region,
// offset, length, the peer's key and offset for a push or a pull, cookie)
// and consumes Comps (cookie, status, length); the appliance does the
// reverse. A span of the pool may run over consecutive buffers: the pool is
// one piece of the mapping, so a message longer than a buffer is still one
// slice, with no chain to walk and no copy to gather it. A registered
// region is a memfd of its own (Region), mapped the same way by both.
//
// # Waking the appliance
//
// The appliance polls the rings on a poll loop that sleeps after a quiet
// spell. Before it looks at a channel's submit ring for the last time
// ahead of a sleep it sets the header's asleep word; an application that
// published a descriptor and then reads the word set writes the eventfd
// the appliance gave it (the channel's bell), which ends the sleep. Both
// sides' store-then-load are sequentially consistent, so either the
// appliance's last look finds the descriptor or the application rings.
// A bell rung needlessly costs the appliance a wake-up, no more.
//
// # Who owns a buffer
//
// The application owns every buffer until it names one in a Desc it
// publishes; the appliance then reads it (a Send) or writes it (a Recv)
// until it publishes the Comp with that Desc's cookie, and the buffer is the
// application's again. The pool's free list lives in the application's own
// memory: the appliance never allocates buffers, it only checks the ones it
// is given.
//
// # Trust
//
// The appliance creates the memfd, sizes it and seals it (F_SEAL_SHRINK,
// F_SEAL_GROW, F_SEAL_SEAL) before the application sees it, so the
// application can neither shrink the mapping under the appliance (a SIGBUS)
// nor grow it. The appliance reads nothing back from the header: the
// geometry it uses is its own copy. Of the rings it trusts nothing the
// application writes: it keeps its own copy of its consumer (submit) and
// producer (completion) index and only reads the application's index,
// clamping a value that claims more than a ring's worth (counted by the
// caller through the bool the ring calls return). A Desc is copied out of
// the ring once, and only the copy is checked and used, so an application
// that rewrites a slot while the appliance reads it changes nothing. What
// the fields may hold is for the caller to check (Layout.Span).
package shm
