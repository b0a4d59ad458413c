/* int unw_backtrace(void** buffer, int size): libunwind's list starts at the caller, so this
 * entry hands the walk the caller's registers as they will be after the return (a WalkStart: pc
 * = the return address, rsp above it, rbp and rbx, which this code leaves untouched) and lets
 * ehelf_capi_backtrace(buffer, size, &start) walk from there; unw_backtrace's own frame is never
 * unwound, nor written and dropped, so the walk can fill the caller's buffer directly. */
        .text
        .globl  unw_backtrace
        .type   unw_backtrace, @function
        .hidden ehelf_capi_backtrace
unw_backtrace:
        .cfi_startproc
        subq    $40, %rsp /* the WalkStart, and rsp 16-byte aligned at the call */
        .cfi_adjust_cfa_offset 40
        movq    40(%rsp), %rax
        movq    %rax, 0(%rsp)
        leaq    48(%rsp), %rax
        movq    %rax, 8(%rsp)
        movq    %rbp, 16(%rsp)
        movq    %rbx, 24(%rsp)
        movq    %rsp, %rdx
        call    ehelf_capi_backtrace
        addq    $40, %rsp
        .cfi_adjust_cfa_offset -40
        ret
        .cfi_endproc
        .size   unw_backtrace, .-unw_backtrace
        .section .note.GNU-stack,"",@progbits
