# One instruction per case, between the labels x86_<case> and x86_<case>_end, for
# test_x86_decode.cpp: the bytes are the assembler's, and the test decodes them at their address
# in the test program (never executed).
        .macro CASE name, insn:vararg
        .globl x86_\name
        .globl x86_\name\()_end
x86_\name:
        \insn
x86_\name\()_end:
        .endm

        .section .text.x86_decode_cases, "ax", @progbits
        .globl x86_target
x86_target:
.Ltarget:
        nop
        # jrcxz and loop reach only 128 bytes: first.
        CASE jrcxz, jrcxz .Ltarget
        CASE loop, loop .Ltarget
        CASE push_rbx, pushq %rbx
        CASE push_rbp, pushq %rbp
        CASE push_r15, pushq %r15
        CASE pop_rbx, popq %rbx
        CASE pop_rbp, popq %rbp
        CASE push_imm, pushq $0x12
        CASE pushw_imm, pushw $1
        CASE push_rsp_mem, pushq 16(%rsp)
        CASE push_drap, pushq -8(%r10)
        CASE push_indexed, pushq (%rax,%rbx,8)
        CASE push_rip, pushq 0x10(%rip)
        CASE push_rsp, pushq %rsp
        CASE pop_rsp, popq %rsp
        CASE pop_mem, popq 8(%rax)
        CASE pushf, pushfq
        CASE popf, popfq
        CASE sub_rsp, subq $0x28, %rsp
        CASE add_rsp, addq $0x28, %rsp
        CASE add_rsp_big, addq $0x10000, %rsp
        CASE sub_rsp_reg, subq %rax, %rsp
        CASE lea_rsp_rsp, leaq -0x18(%rsp), %rsp
        CASE and_rsp, andq $-32, %rsp
        CASE and_rsp_odd, andq $-24, %rsp
        CASE lea_drap, leaq 8(%rsp), %r10
        CASE lea_rsp_drap, leaq -8(%r10), %rsp
        CASE lea_rbp_rsp, leaq 16(%rsp), %rbp
        CASE lea_rsp_rbp, leaq -24(%rbp), %rsp
        CASE lea_indexed_rsp, leaq (%rsp,%rax), %rsp
        CASE mov_rsp_rbp, movq %rsp, %rbp
        CASE mov_rbp_rsp, movq %rbp, %rsp
        CASE mov_rsp_rdi, movq %rsp, %rdi
        CASE leave, leave
        CASE enter, enter $16, $0
        CASE enter_nested, enter $16, $1
        CASE store_rbp_slot, movq %rbx, -8(%rbp)
        CASE store_rsp_slot, movq %r12, 0x10(%rsp)
        CASE load_rbp_slot, movq -8(%rbp), %rbx
        CASE load_rsp_slot, movq 0x10(%rsp), %r12
        CASE store_32bit, movl %ebx, -8(%rbp)
        CASE store_other_base, movq %rbx, 8(%rdi)
        CASE xor_ebp, xorl %ebp, %ebp
        CASE mov_rsp_mem, movq (%rdi), %rsp
        CASE xchg_rsp, xchgq %rax, %rsp
        CASE mov_rax_rbx, movq %rax, %rbx
        CASE lea_rip, leaq .Ltarget(%rip), %rdi
        CASE call_direct, call .Ltarget
        CASE call_reg, call *%rax
        CASE call_mem, call *8(%rax)
        CASE call_far, lcall *(%rax)
        CASE jmp_direct, jmp .Ltarget
        CASE jmp_reg, jmp *%rax
        CASE jmp_notrack, notrack jmp *(%rax,%rcx,8)
        CASE jmp_far, ljmp *(%rax)
        CASE je, je .Ltarget
        CASE xbegin, xbegin .Ltarget
        CASE ret, ret
        CASE ret_imm, ret $16
        CASE repz_ret, repz ret
        CASE lret, lretq
        CASE iretq, iretq
        CASE syscall, syscall
        CASE int80, int $0x80
        CASE int_other, int $0x21
        CASE sysret, sysretq
        CASE hlt, hlt
        CASE ud2, ud2
        CASE int3, int3
        CASE nop, nop
        CASE endbr64, endbr64
        CASE cpuid, cpuid
        CASE avx512, vpaddd %zmm1, %zmm2, %zmm3{%k1}
        .section .note.GNU-stack, "", @progbits
