# ehelf_test_rbx_cfa_frame(void (*callback)(void)): calls `callback` from a frame whose CFA is
# computed from rbx (as a stack-realigning function's can be), a rule the rule cache cannot hold
# and whose walk needs the caller-saved value of rbx: the fast walk, which does not track rbx,
# must take such frames again with every register. Used by test_runtime_fast_walk.cpp.
        .text
        .globl  ehelf_test_rbx_cfa_frame
        .type   ehelf_test_rbx_cfa_frame, @function
ehelf_test_rbx_cfa_frame:
        .cfi_startproc
        pushq   %rbx
        .cfi_def_cfa_offset 16
        .cfi_offset %rbx, -16
        movq    %rsp, %rbx
        .cfi_def_cfa_register %rbx
        andq    $-64, %rsp
        subq    $64, %rsp
        call    *%rdi
        nop
        movq    %rbx, %rsp
        .cfi_def_cfa_register %rsp
        popq    %rbx
        .cfi_def_cfa_offset 8
        ret
        .cfi_endproc
        .size   ehelf_test_rbx_cfa_frame, .-ehelf_test_rbx_cfa_frame
        .section .note.GNU-stack,"",@progbits
