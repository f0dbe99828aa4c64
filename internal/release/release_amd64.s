//go:build !race

#include "textflag.h"

// func Store64(addr *atomic.Uint64, val uint64)
TEXT ·Store64(SB), NOSPLIT|NOFRAME, $0-16
	MOVQ	addr+0(FP), AX
	MOVQ	val+8(FP), BX
	MOVQ	BX, (AX)
	RET

// func CPURelax()
TEXT ·CPURelax(SB), NOSPLIT|NOFRAME, $0-0
	PAUSE
	RET
