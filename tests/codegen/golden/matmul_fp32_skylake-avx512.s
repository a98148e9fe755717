	.text
	.file	"matmul"
	.p2align	4, 0x90
	.type	matmul_task0,@function
matmul_task0:
	movq	8(%rdi), %r9
	leaq	(%r9,%rsi), %rax
	addq	%r9, %rdx
	cmpq	%rdx, %rax
	jge	.LBB0_8
	pushq	%r14
	pushq	%rbx
	movq	24(%rdi), %r10
	movq	32(%rdi), %r11
	movq	40(%rdi), %rcx
	shlq	$10, %r10
	movq	16(%rdi), %r8
	addq	%r10, %r8
	movq	%rcx, %rbx
	shlq	$10, %rbx
	shlq	$20, %rcx
	addq	48(%rdi), %rcx
	addq	%r10, %rcx
	shlq	$15, %r9
	shlq	$15, %rsi
	addq	%r9, %rsi
	addq	%rbx, %rsi
	addq	%r11, %rsi
	addq	$28672, %rsi
	.p2align	4, 0x90
.LBB0_2:
	movq	%rax, %rdi
	shlq	$15, %rdi
	addq	%r8, %rdi
	movq	%rcx, %r9
	xorl	%r10d, %r10d
	.p2align	4, 0x90
.LBB0_3:
	movq	%r10, %r11
	movq	%r10, %rbx
	shlq	$7, %rbx
	vmovups	(%rdi,%rbx), %zmm6
	vmovups	64(%rdi,%rbx), %zmm7
	vmovups	4160(%rdi,%rbx), %zmm0
	vmovups	4096(%rdi,%rbx), %zmm9
	vmovups	8256(%rdi,%rbx), %zmm1
	vmovups	8192(%rdi,%rbx), %zmm10
	vmovups	12352(%rdi,%rbx), %zmm2
	vmovups	12288(%rdi,%rbx), %zmm11
	vmovups	16448(%rdi,%rbx), %zmm3
	vmovups	16384(%rdi,%rbx), %zmm12
	vmovups	20544(%rdi,%rbx), %zmm4
	vmovups	20480(%rdi,%rbx), %zmm13
	vmovups	24640(%rdi,%rbx), %zmm5
	vmovups	24576(%rdi,%rbx), %zmm14
	shlq	$5, %r11
	vmovups	28736(%rdi,%rbx), %zmm8
	vmovups	28672(%rdi,%rbx), %zmm15
	movq	%r9, %rbx
	movl	$0, %r14d
	.p2align	4, 0x90
.LBB0_4:
	vbroadcastss	-28672(%rsi,%r14,4), %zmm16
	vmovups	(%rbx), %zmm17
	vmovups	64(%rbx), %zmm18
	vfmadd231ps	%zmm16, %zmm18, %zmm7
	vbroadcastss	-24576(%rsi,%r14,4), %zmm19
	vfmadd231ps	%zmm16, %zmm17, %zmm6
	vfmadd231ps	%zmm19, %zmm18, %zmm0
	vfmadd231ps	%zmm19, %zmm17, %zmm9
	vbroadcastss	-20480(%rsi,%r14,4), %zmm16
	vfmadd231ps	%zmm16, %zmm18, %zmm1
	vfmadd231ps	%zmm16, %zmm17, %zmm10
	vbroadcastss	-16384(%rsi,%r14,4), %zmm16
	vfmadd231ps	%zmm16, %zmm18, %zmm2
	vbroadcastss	-12288(%rsi,%r14,4), %zmm19
	vfmadd231ps	%zmm16, %zmm17, %zmm11
	vfmadd231ps	%zmm19, %zmm18, %zmm3
	vfmadd231ps	%zmm19, %zmm17, %zmm12
	vbroadcastss	-8192(%rsi,%r14,4), %zmm16
	vfmadd231ps	%zmm16, %zmm18, %zmm4
	vfmadd231ps	%zmm16, %zmm17, %zmm13
	vbroadcastss	-4096(%rsi,%r14,4), %zmm16
	vfmadd231ps	%zmm16, %zmm18, %zmm5
	vbroadcastss	(%rsi,%r14,4), %zmm19
	vfmadd231ps	%zmm16, %zmm17, %zmm14
	vfmadd231ps	%zmm18, %zmm19, %zmm8
	vfmadd231ps	%zmm19, %zmm17, %zmm15
	incq	%r14
	addq	$4096, %rbx
	cmpq	$256, %r14
	jne	.LBB0_4
	vmovups	%zmm6, (%rdi,%r11,4)
	vmovups	%zmm7, 64(%rdi,%r11,4)
	vmovups	%zmm9, 4096(%rdi,%r11,4)
	vmovups	%zmm0, 4160(%rdi,%r11,4)
	vmovups	%zmm10, 8192(%rdi,%r11,4)
	vmovups	%zmm1, 8256(%rdi,%r11,4)
	vmovups	%zmm11, 12288(%rdi,%r11,4)
	vmovups	%zmm2, 12352(%rdi,%r11,4)
	vmovups	%zmm12, 16384(%rdi,%r11,4)
	vmovups	%zmm3, 16448(%rdi,%r11,4)
	vmovups	%zmm13, 20480(%rdi,%r11,4)
	vmovups	%zmm4, 20544(%rdi,%r11,4)
	vmovups	%zmm14, 24576(%rdi,%r11,4)
	vmovups	%zmm5, 24640(%rdi,%r11,4)
	vmovups	%zmm15, 28672(%rdi,%r11,4)
	vmovups	%zmm8, 28736(%rdi,%r11,4)
	incq	%r10
	subq	$-128, %r9
	cmpq	$8, %r10
	jne	.LBB0_3
	incq	%rax
	addq	$32768, %rsi
	cmpq	%rdx, %rax
	jne	.LBB0_2
	popq	%rbx
	popq	%r14
.LBB0_8:
	xorl	%eax, %eax
	vzeroupper
	retq
.Lfunc_end0:
	.size	matmul_task0, .Lfunc_end0-matmul_task0

	.globl	matmul
	.p2align	4, 0x90
	.type	matmul,@function
matmul:
	pushq	%rbp
	pushq	%r15
	pushq	%r14
	pushq	%r13
	pushq	%r12
	pushq	%rbx
	subq	$88, %rsp
	movq	%rsi, 64(%rsp)
	movq	(%rdi), %rax
	movq	%rax, 80(%rsp)
	movq	8(%rdi), %rax
	movq	%rax, 72(%rsp)
	movq	16(%rdi), %rax
	movq	%rax, 56(%rsp)
	leaq	29568(%rax), %r14
	xorl	%ecx, %ecx
	vxorps	%xmm0, %xmm0, %xmm0
	leaq	matmul_task0(%rip), %rsi
	movq	%rsp, %rdx
	movq	56(%rsp), %r13
	movq	80(%rsp), %rbp
	.p2align	4, 0x90
.LBB1_1:
	xorl	%eax, %eax
	.p2align	4, 0x90
.LBB1_2:
	vmovups	%zmm0, -29504(%r14,%rax)
	vmovups	%zmm0, -29568(%r14,%rax)
	vmovups	%zmm0, -25408(%r14,%rax)
	vmovups	%zmm0, -25472(%r14,%rax)
	vmovups	%zmm0, -21312(%r14,%rax)
	vmovups	%zmm0, -21376(%r14,%rax)
	vmovups	%zmm0, -17216(%r14,%rax)
	vmovups	%zmm0, -17280(%r14,%rax)
	vmovups	%zmm0, -13120(%r14,%rax)
	vmovups	%zmm0, -13184(%r14,%rax)
	vmovups	%zmm0, -9024(%r14,%rax)
	vmovups	%zmm0, -9088(%r14,%rax)
	vmovups	%zmm0, -4928(%r14,%rax)
	vmovups	%zmm0, -4992(%r14,%rax)
	vmovups	%zmm0, -832(%r14,%rax)
	vmovups	%zmm0, -896(%r14,%rax)
	vmovups	%zmm0, -29376(%r14,%rax)
	vmovups	%zmm0, -29440(%r14,%rax)
	vmovups	%zmm0, -25280(%r14,%rax)
	vmovups	%zmm0, -25344(%r14,%rax)
	vmovups	%zmm0, -21184(%r14,%rax)
	vmovups	%zmm0, -21248(%r14,%rax)
	vmovups	%zmm0, -17088(%r14,%rax)
	vmovups	%zmm0, -17152(%r14,%rax)
	vmovups	%zmm0, -12992(%r14,%rax)
	vmovups	%zmm0, -13056(%r14,%rax)
	vmovups	%zmm0, -8896(%r14,%rax)
	vmovups	%zmm0, -8960(%r14,%rax)
	vmovups	%zmm0, -4800(%r14,%rax)
	vmovups	%zmm0, -4864(%r14,%rax)
	vmovups	%zmm0, -704(%r14,%rax)
	vmovups	%zmm0, -768(%r14,%rax)
	vmovups	%zmm0, -29248(%r14,%rax)
	vmovups	%zmm0, -29312(%r14,%rax)
	vmovups	%zmm0, -25152(%r14,%rax)
	vmovups	%zmm0, -25216(%r14,%rax)
	vmovups	%zmm0, -21056(%r14,%rax)
	vmovups	%zmm0, -21120(%r14,%rax)
	vmovups	%zmm0, -16960(%r14,%rax)
	vmovups	%zmm0, -17024(%r14,%rax)
	vmovups	%zmm0, -12864(%r14,%rax)
	vmovups	%zmm0, -12928(%r14,%rax)
	vmovups	%zmm0, -8768(%r14,%rax)
	vmovups	%zmm0, -8832(%r14,%rax)
	vmovups	%zmm0, -4672(%r14,%rax)
	vmovups	%zmm0, -4736(%r14,%rax)
	vmovups	%zmm0, -576(%r14,%rax)
	vmovups	%zmm0, -640(%r14,%rax)
	vmovups	%zmm0, -29120(%r14,%rax)
	vmovups	%zmm0, -29184(%r14,%rax)
	vmovups	%zmm0, -25024(%r14,%rax)
	vmovups	%zmm0, -25088(%r14,%rax)
	vmovups	%zmm0, -20928(%r14,%rax)
	vmovups	%zmm0, -20992(%r14,%rax)
	vmovups	%zmm0, -16832(%r14,%rax)
	vmovups	%zmm0, -16896(%r14,%rax)
	vmovups	%zmm0, -12736(%r14,%rax)
	vmovups	%zmm0, -12800(%r14,%rax)
	vmovups	%zmm0, -8640(%r14,%rax)
	vmovups	%zmm0, -8704(%r14,%rax)
	vmovups	%zmm0, -4544(%r14,%rax)
	vmovups	%zmm0, -4608(%r14,%rax)
	vmovups	%zmm0, -448(%r14,%rax)
	vmovups	%zmm0, -512(%r14,%rax)
	vmovups	%zmm0, -29056(%r14,%rax)
	vmovups	%zmm0, -28992(%r14,%rax)
	vmovups	%zmm0, -24960(%r14,%rax)
	vmovups	%zmm0, -24896(%r14,%rax)
	vmovups	%zmm0, -20864(%r14,%rax)
	vmovups	%zmm0, -20800(%r14,%rax)
	vmovups	%zmm0, -16768(%r14,%rax)
	vmovups	%zmm0, -16704(%r14,%rax)
	vmovups	%zmm0, -12672(%r14,%rax)
	vmovups	%zmm0, -12608(%r14,%rax)
	vmovups	%zmm0, -8576(%r14,%rax)
	vmovups	%zmm0, -8512(%r14,%rax)
	vmovups	%zmm0, -4480(%r14,%rax)
	vmovups	%zmm0, -4416(%r14,%rax)
	vmovups	%zmm0, -384(%r14,%rax)
	vmovups	%zmm0, -320(%r14,%rax)
	vmovups	%zmm0, -28864(%r14,%rax)
	vmovups	%zmm0, -28928(%r14,%rax)
	vmovups	%zmm0, -24768(%r14,%rax)
	vmovups	%zmm0, -24832(%r14,%rax)
	vmovups	%zmm0, -20672(%r14,%rax)
	vmovups	%zmm0, -20736(%r14,%rax)
	vmovups	%zmm0, -16576(%r14,%rax)
	vmovups	%zmm0, -16640(%r14,%rax)
	vmovups	%zmm0, -12480(%r14,%rax)
	vmovups	%zmm0, -12544(%r14,%rax)
	vmovups	%zmm0, -8384(%r14,%rax)
	vmovups	%zmm0, -8448(%r14,%rax)
	vmovups	%zmm0, -4288(%r14,%rax)
	vmovups	%zmm0, -4352(%r14,%rax)
	vmovups	%zmm0, -192(%r14,%rax)
	vmovups	%zmm0, -256(%r14,%rax)
	vmovups	%zmm0, -28800(%r14,%rax)
	vmovups	%zmm0, -28736(%r14,%rax)
	vmovups	%zmm0, -24704(%r14,%rax)
	vmovups	%zmm0, -24640(%r14,%rax)
	vmovups	%zmm0, -20608(%r14,%rax)
	vmovups	%zmm0, -20544(%r14,%rax)
	vmovups	%zmm0, -16512(%r14,%rax)
	vmovups	%zmm0, -16448(%r14,%rax)
	vmovups	%zmm0, -12416(%r14,%rax)
	vmovups	%zmm0, -12352(%r14,%rax)
	vmovups	%zmm0, -8320(%r14,%rax)
	vmovups	%zmm0, -8256(%r14,%rax)
	vmovups	%zmm0, -4224(%r14,%rax)
	vmovups	%zmm0, -4160(%r14,%rax)
	vmovups	%zmm0, -128(%r14,%rax)
	vmovups	%zmm0, -64(%r14,%rax)
	vmovups	%zmm0, -28608(%r14,%rax)
	vmovups	%zmm0, -28672(%r14,%rax)
	vmovups	%zmm0, -24512(%r14,%rax)
	vmovups	%zmm0, -24576(%r14,%rax)
	vmovups	%zmm0, -20416(%r14,%rax)
	vmovups	%zmm0, -20480(%r14,%rax)
	vmovups	%zmm0, -16320(%r14,%rax)
	vmovups	%zmm0, -16384(%r14,%rax)
	vmovups	%zmm0, -12224(%r14,%rax)
	vmovups	%zmm0, -12288(%r14,%rax)
	vmovups	%zmm0, -8128(%r14,%rax)
	vmovups	%zmm0, -8192(%r14,%rax)
	vmovups	%zmm0, -4032(%r14,%rax)
	vmovups	%zmm0, -4096(%r14,%rax)
	vmovups	%zmm0, 64(%r14,%rax)
	vmovups	%zmm0, (%r14,%rax)
	addq	$32768, %rax
	cmpq	$4194304, %rax
	jne	.LBB1_2
	movq	64(%rsp), %r15
	movq	%r15, (%rsp)
	movq	$0, 8(%rsp)
	movq	%r13, 16(%rsp)
	movq	%rcx, %r12
	movq	%rcx, 24(%rsp)
	movq	%rbp, 32(%rsp)
	movq	$0, 40(%rsp)
	movq	72(%rsp), %rbx
	movq	%rbx, 48(%rsp)
	movl	$128, %ecx
	movq	%r15, %rdi
	vzeroupper
	callq	ts_rt_parallel_for@PLT
	testl	%eax, %eax
	jne	.LBB1_9
	movq	%r15, (%rsp)
	movq	$0, 8(%rsp)
	movq	%r13, 16(%rsp)
	movq	%r12, 24(%rsp)
	movq	%rbp, 32(%rsp)
	movq	$1, 40(%rsp)
	movq	%rbx, 48(%rsp)
	movl	$128, %ecx
	movq	%r15, %rdi
	leaq	matmul_task0(%rip), %rsi
	movq	%rsp, %rdx
	callq	ts_rt_parallel_for@PLT
	testl	%eax, %eax
	jne	.LBB1_9
	movq	%r15, (%rsp)
	movq	$0, 8(%rsp)
	movq	%r13, 16(%rsp)
	movq	%r12, 24(%rsp)
	movq	%rbp, 32(%rsp)
	movq	$2, 40(%rsp)
	movq	%rbx, 48(%rsp)
	movl	$128, %ecx
	movq	%r15, %rdi
	leaq	matmul_task0(%rip), %rsi
	movq	%rsp, %rdx
	callq	ts_rt_parallel_for@PLT
	testl	%eax, %eax
	jne	.LBB1_9
	movq	%r15, (%rsp)
	movq	$0, 8(%rsp)
	movq	%r13, 16(%rsp)
	movq	%r12, 24(%rsp)
	movq	%rbp, 32(%rsp)
	movq	$3, 40(%rsp)
	movq	%rbx, 48(%rsp)
	movl	$128, %ecx
	movq	%r15, %rdi
	movq	%r12, %rbx
	leaq	matmul_task0(%rip), %rsi
	movq	%rsi, %r12
	movq	%rsp, %rdx
	movq	%rdx, %r15
	callq	ts_rt_parallel_for@PLT
	testl	%eax, %eax
	jne	.LBB1_9
	incq	%rbx
	addq	$1024, %r14
	movq	%rbx, %rcx
	cmpq	$4, %rbx
	vxorps	%xmm0, %xmm0, %xmm0
	movq	%r12, %rsi
	movq	%r15, %rdx
	jne	.LBB1_1
	xorl	%eax, %eax
.LBB1_9:
	addq	$88, %rsp
	popq	%rbx
	popq	%r12
	popq	%r13
	popq	%r14
	popq	%r15
	popq	%rbp
	vzeroupper
	retq
.Lfunc_end1:
	.size	matmul, .Lfunc_end1-matmul

	.section	".note.GNU-stack","",@progbits
