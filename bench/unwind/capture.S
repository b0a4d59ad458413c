/* bench_capture(uint64_t regs[17]): the caller's general registers in DWARF order (rax rdx rcx
 * rbx rsi rdi rbp rsp r8-r15 rip) as they are right after this call returns: rsp above the
 * return address, rip = the return address. Used by the peers that take a register set (the
 * frame-pointer walk, libdwfl); the ehelf peers use the runtime's own capture_local(). */
        .text
        .globl  bench_capture
        .hidden bench_capture
        .type   bench_capture, @function
bench_capture:
        .cfi_startproc
        movq    %rax, 0(%rdi)
        movq    %rdx, 8(%rdi)
        movq    %rcx, 16(%rdi)
        movq    %rbx, 24(%rdi)
        movq    %rsi, 32(%rdi)
        movq    %rdi, 40(%rdi)
        movq    %rbp, 48(%rdi)
        leaq    8(%rsp), %rax
        movq    %rax, 56(%rdi)
        movq    %r8, 64(%rdi)
        movq    %r9, 72(%rdi)
        movq    %r10, 80(%rdi)
        movq    %r11, 88(%rdi)
        movq    %r12, 96(%rdi)
        movq    %r13, 104(%rdi)
        movq    %r14, 112(%rdi)
        movq    %r15, 120(%rdi)
        movq    (%rsp), %rax
        movq    %rax, 128(%rdi)
        ret
        .cfi_endproc
        .size   bench_capture, .-bench_capture
        .section .note.GNU-stack,"",@progbits
