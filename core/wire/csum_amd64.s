#include "textflag.h"

// func checksumAVX2(src []byte, sum uint64) uint64
//
// copyChecksumAVX2 (csum_copy_amd64.s) without the stores: the same lane
// sums ALL and HI, the same reduction, the same exact result. It reads the
// first len(src)&^31 bytes; the caller passes at most 1 GiB.
//
// Registers: SI src, CX bytes left (a multiple of 32), AX sum; Y0/Y1 ALL/HI
// for even blocks, Y2/Y3 for odd blocks.
TEXT ·checksumAVX2(SB), NOSPLIT, $0-40
	MOVQ src_base+0(FP), SI
	MOVQ src_len+8(FP), CX
	MOVQ sum+24(FP), AX
	ANDQ $-32, CX
	JZ   done

	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3

	CMPQ CX, $128
	JB   loop32

loop128:
	VMOVDQU 0(SI), Y4
	VMOVDQU 32(SI), Y5
	VMOVDQU 64(SI), Y6
	VMOVDQU 96(SI), Y7
	VPSRLQ  $32, Y4, Y8
	VPSRLQ  $32, Y5, Y9
	VPSRLQ  $32, Y6, Y10
	VPSRLQ  $32, Y7, Y11
	VPADDQ  Y4, Y0, Y0
	VPADDQ  Y8, Y1, Y1
	VPADDQ  Y5, Y2, Y2
	VPADDQ  Y9, Y3, Y3
	VPADDQ  Y6, Y0, Y0
	VPADDQ  Y10, Y1, Y1
	VPADDQ  Y7, Y2, Y2
	VPADDQ  Y11, Y3, Y3
	ADDQ    $128, SI
	SUBQ    $128, CX
	CMPQ    CX, $128
	JAE     loop128

loop32:
	TESTQ   CX, CX
	JZ      reduce
	VMOVDQU (SI), Y4
	VPSRLQ  $32, Y4, Y8
	VPADDQ  Y4, Y0, Y0
	VPADDQ  Y8, Y1, Y1
	ADDQ    $32, SI
	SUBQ    $32, CX
	JMP     loop32

reduce:
	VPADDQ       Y2, Y0, Y0 // ALL per lane, modulo 2^64
	VPADDQ       Y3, Y1, Y1 // HI per lane, exact
	VPSLLQ       $32, Y1, Y2
	VPSUBQ       Y2, Y0, Y0 // LO per lane, exact
	VEXTRACTI128 $1, Y0, X2
	VEXTRACTI128 $1, Y1, X3
	VPADDQ       X2, X0, X0
	VPADDQ       X3, X1, X1
	VPSHUFD      $0x4e, X0, X2
	VPSHUFD      $0x4e, X1, X3
	VPADDQ       X2, X0, X0
	VPADDQ       X3, X1, X1
	VMOVQ        X0, BX // LO, below 2^59
	VMOVQ        X1, DX // HI, likewise
	VZEROUPPER
	ROLQ         $32, DX // HI·2^32 modulo 2^64-1
	ADDQ         DX, BX
	ADCQ         $0, BX
	ADDQ         BX, AX
	ADCQ         $0, AX

done:
	MOVQ AX, ret+32(FP)
	RET
