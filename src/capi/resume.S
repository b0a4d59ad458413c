/* The two ways unw_resume (resume.cpp) installs a local cursor's registers; neither returns.
 *
 * void ehelf_capi_jump(const uint64_t regs[17]): the general registers in DWARF order (rax,
 * rdx, rcx, rbx, rsi, rdi, rbp, rsp, r8-r15, rip) loaded, rsp switched, and a jump to rip by
 * a return through the word below the new rsp, as libunwind's setcontext does (that word is
 * where the frame's last call kept its return address). `regs` lies below the resumed frame's
 * rsp (in unw_resume's frame), so it is read to the end.
 *
 * void ehelf_capi_sigreturn(void* ucontext): rt_sigreturn on a signal context the kernel saved,
 * the interrupted frame's registers already written into it: the kernel restores every
 * register, the floating-point state and the signal mask from it, as on a handler's return.
 * The kernel reads its rt_sigframe 8 bytes below rsp, the ucontext at rsp. */
#define REG(n) (8 * (n))
        .text
        .globl  ehelf_capi_jump
        .hidden ehelf_capi_jump
        .type   ehelf_capi_jump, @function
ehelf_capi_jump:
        .cfi_startproc
        movq    REG(0)(%rdi), %rax
        movq    REG(1)(%rdi), %rdx
        movq    REG(3)(%rdi), %rbx
        movq    REG(4)(%rdi), %rsi
        movq    REG(6)(%rdi), %rbp
        movq    REG(8)(%rdi), %r8
        movq    REG(9)(%rdi), %r9
        movq    REG(10)(%rdi), %r10
        movq    REG(11)(%rdi), %r11
        movq    REG(12)(%rdi), %r12
        movq    REG(13)(%rdi), %r13
        movq    REG(14)(%rdi), %r14
        movq    REG(15)(%rdi), %r15
        movq    REG(7)(%rdi), %rsp
        movq    REG(16)(%rdi), %rcx
        pushq   %rcx
        movq    REG(2)(%rdi), %rcx
        movq    REG(5)(%rdi), %rdi
        ret
        .cfi_endproc
        .size   ehelf_capi_jump, .-ehelf_capi_jump

        .globl  ehelf_capi_sigreturn
        .hidden ehelf_capi_sigreturn
        .type   ehelf_capi_sigreturn, @function
ehelf_capi_sigreturn:
        .cfi_startproc
        movq    %rdi, %rsp
        movl    $15, %eax /* __NR_rt_sigreturn */
        syscall
        ud2
        .cfi_endproc
        .size   ehelf_capi_sigreturn, .-ehelf_capi_sigreturn
        .section .note.GNU-stack,"",@progbits
