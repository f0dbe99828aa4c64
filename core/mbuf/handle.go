package mbuf

// Handle names one frame of a Pool. It is an index, not a pointer: rings and
// queues carry handles so the garbage collector has nothing to scan and no
// write barriers run on the packet path.
type Handle uint32

// NoHandle is never a valid handle; use it to mark an empty slot.
const NoHandle Handle = ^Handle(0)
