package kgen

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// progTestRunAttr is the BPF_PROG_TEST_RUN member of union bpf_attr
// (include/uapi/linux/bpf.h), up to batch_size.
type progTestRunAttr struct {
	progFD      uint32
	retval      uint32
	dataSizeIn  uint32
	dataSizeOut uint32
	dataIn      uint64
	dataOut     uint64
	repeat      uint32
	duration    uint32
	ctxSizeIn   uint32
	ctxSizeOut  uint32
	ctxIn       uint64
	ctxOut      uint64
	flags       uint32
	cpu         uint32
	batchSize   uint32
	_           uint32
}

// testRun issues live-frame test runs of one program with one template
// through a raw bpf(2) call: cilium/ebpf's Program.Run allocates per call,
// which would show up in the allocation counts of the benchmark it feeds.
type testRun struct {
	attr     progTestRunAttr
	template []byte // referenced by attr.dataIn; kept alive here
}

func newTestRun(progFD int, template []byte) *testRun {
	r := &testRun{template: template}
	r.attr = progTestRunAttr{
		progFD:     uint32(progFD),
		dataSizeIn: uint32(len(template)),
		dataIn:     uint64(uintptr(unsafe.Pointer(&template[0]))),
		flags:      unix.BPF_F_TEST_XDP_LIVE_FRAMES,
	}
	return r
}

// do generates repeat frames. An interrupted call (EINTR: a signal reached
// the thread) is not an error; its frames are not counted by the caller.
func (r *testRun) do(repeat uint32) error {
	r.attr.repeat = repeat
	_, _, errno := unix.Syscall(unix.SYS_BPF, unix.BPF_PROG_TEST_RUN, uintptr(unsafe.Pointer(&r.attr)), unsafe.Sizeof(r.attr))
	if errno != 0 && errno != unix.EINTR {
		return errno
	}
	return nil
}
