#include "textflag.h"

// func int80(nr, a1 uintptr) uintptr: a syscall through the i386 ABI.
TEXT ·int80(SB),NOSPLIT,$0-24
	MOVQ nr+0(FP), AX
	MOVQ a1+8(FP), BX
	INT $0x80
	MOVQ AX, ret+16(FP)
	RET
