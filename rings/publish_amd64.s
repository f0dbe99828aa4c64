//go:build !race

#include "textflag.h"

// func storeRelease32(addr *atomic.Uint32, val uint32)
TEXT ·storeRelease32(SB), NOSPLIT|NOFRAME, $0-12
	MOVQ	addr+0(FP), AX
	MOVL	val+8(FP), BX
	MOVL	BX, (AX)
	RET

// func cpuRelax()
TEXT ·cpuRelax(SB), NOSPLIT|NOFRAME, $0-0
	PAUSE
	RET
