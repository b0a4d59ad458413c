/* ehelf_capture_context(uint64_t regs[17]): stores the caller's general registers in DWARF
 * order (rax rdx rcx rbx rsi rdi rbp rsp r8-r15 rip), as they will be right after this call
 * returns: rsp above the return address, rip = the return address. Clobbers only rax. */
        .text
        .globl  ehelf_capture_context
        .hidden ehelf_capture_context
        .type   ehelf_capture_context, @function
ehelf_capture_context:
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
        .size   ehelf_capture_context, .-ehelf_capture_context

/* ehelf_capture_walk_start(uint64_t regs[4]): what a walk from the caller needs: its pc (the
 * return address), rsp (above the return address), rbp and rbx. */
        .globl  ehelf_capture_walk_start
        .hidden ehelf_capture_walk_start
        .type   ehelf_capture_walk_start, @function
ehelf_capture_walk_start:
        .cfi_startproc
        movq    (%rsp), %rax
        movq    %rax, 0(%rdi)
        leaq    8(%rsp), %rax
        movq    %rax, 8(%rdi)
        movq    %rbp, 16(%rdi)
        movq    %rbx, 24(%rdi)
        ret
        .cfi_endproc
        .size   ehelf_capture_walk_start, .-ehelf_capture_walk_start
        .section .note.GNU-stack,"",@progbits
