/* int unw_getcontext(unw_context_t* uc): stores the caller's general registers in
 * uc->uc_mcontext.gregs (glibc's REG_* slots; unw_context_t is a ucontext_t) as they will be right
 * after this call returns: rsp above the return address, rip = the return address. So
 * unw_init_local's first frame is the caller of unw_getcontext. Returns 0; clobbers only rax.
 * Floating-point state is not saved. Offsets are checked in cursor.cpp. */
#define GREG(n) (40 + 8 * (n))
        .text
        .globl  unw_getcontext
        .type   unw_getcontext, @function
        .globl  _Ux86_64_getcontext
        .type   _Ux86_64_getcontext, @function
unw_getcontext:
_Ux86_64_getcontext:
        .cfi_startproc
        movq    %r8,  GREG(0)(%rdi)
        movq    %r9,  GREG(1)(%rdi)
        movq    %r10, GREG(2)(%rdi)
        movq    %r11, GREG(3)(%rdi)
        movq    %r12, GREG(4)(%rdi)
        movq    %r13, GREG(5)(%rdi)
        movq    %r14, GREG(6)(%rdi)
        movq    %r15, GREG(7)(%rdi)
        movq    %rdi, GREG(8)(%rdi)
        movq    %rsi, GREG(9)(%rdi)
        movq    %rbp, GREG(10)(%rdi)
        movq    %rbx, GREG(11)(%rdi)
        movq    %rdx, GREG(12)(%rdi)
        movq    %rax, GREG(13)(%rdi)
        movq    %rcx, GREG(14)(%rdi)
        leaq    8(%rsp), %rax
        movq    %rax, GREG(15)(%rdi)
        movq    (%rsp), %rax
        movq    %rax, GREG(16)(%rdi)
        xorl    %eax, %eax
        ret
        .cfi_endproc
        .size   unw_getcontext, .-unw_getcontext
        .size   _Ux86_64_getcontext, .-_Ux86_64_getcontext
        .section .note.GNU-stack,"",@progbits
