/* int ehelf_capi_call_on_stack(int (*fn)(void*), void* arg, void* stack_top): fn(arg) called
 * with rsp at stack_top (16-byte aligned), back on the caller's stack after it returns. The CFI
 * keeps the caller's frame reachable from fn's (rbp holds the caller's stack pointer), so that
 * debuggers, and exceptions if fn let one out, unwind across the switch. See walk_stack.hpp. */
        .text
        .globl  ehelf_capi_call_on_stack
        .hidden ehelf_capi_call_on_stack
        .type   ehelf_capi_call_on_stack, @function
ehelf_capi_call_on_stack:
        .cfi_startproc
        /* A signal frame to unwinders: its caller's frame is on another stack, maybe below this
         * one (a walk from a signal handler that interrupted a walk goes through here). */
        .cfi_signal_frame
        pushq   %rbp
        .cfi_adjust_cfa_offset 8
        .cfi_rel_offset %rbp, 0
        movq    %rsp, %rbp
        .cfi_def_cfa_register %rbp
        movq    %rdx, %rsp
        movq    %rdi, %rax
        movq    %rsi, %rdi
        call    *%rax
        movq    %rbp, %rsp
        .cfi_def_cfa_register %rsp
        popq    %rbp
        .cfi_adjust_cfa_offset -8
        .cfi_restore %rbp
        ret
        .cfi_endproc
        .size   ehelf_capi_call_on_stack, .-ehelf_capi_call_on_stack
        .section .note.GNU-stack,"",@progbits
