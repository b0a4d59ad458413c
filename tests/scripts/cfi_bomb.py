#!/usr/bin/env python3
"""Writes the assembly of a .debug_frame bomb for test_cfi_bomb.sh: one CIE, then FDES FDEs (1
unless given), each from `main` + i * 256 MiB over 256 MiB of addresses with a CFA program that
repeats `DW_CFA_advance_loc 1; DW_CFA_def_cfa_offset N` COUNT times: one row each, all alike
(N = 16, 3 bytes a row) or, with --distinct, each row another (N grows by 8 from row to row
through all FDEs). Compressed by objcopy --compress-debug-sections, millions of rows fit in a file
of tens of kilobytes. Usage: cfi_bomb.py COUNT [FDES] [--distinct] > bomb.S (assembled with a C
file defining main).
"""
import sys

args = [a for a in sys.argv[1:] if not a.startswith('--')]
distinct = '--distinct' in sys.argv[1:]
count = int(args[0])
fdes = int(args[1]) if len(args) > 1 else 1
row = ('\t.byte 0x41, 0x0e          # DW_CFA_advance_loc 1; DW_CFA_def_cfa_offset\n'
       '\t.uleb128 .Loffset\n\t.set .Loffset, .Loffset + 8' if distinct else
       '\t.byte 0x41, 0x0e, 0x10    # DW_CFA_advance_loc 1; DW_CFA_def_cfa_offset 16')
out = ['''\t.section .debug_frame,"",@progbits
\t.set .Loffset, 16
.Lcie:
\t.long .Lcie_end - .Lcie_start
.Lcie_start:
\t.long 0xffffffff          # CIE id
\t.byte 1                   # version
\t.byte 0                   # augmentation ""
\t.uleb128 1                # code alignment
\t.sleb128 -8               # data alignment
\t.byte 16                  # return address column
\t.byte 0x0c, 7, 8          # DW_CFA_def_cfa rsp+8
\t.byte 0x90, 1             # DW_CFA_offset rip at cfa-8
\t.balign 8
.Lcie_end:''']
for i in range(fdes):
    out.append(f'''\t.long .Lfde{i}_end - .Lfde{i}_start
.Lfde{i}_start:
\t.long .Lcie               # CIE pointer
\t.quad main + {i} * 0x10000000  # pc_begin
\t.quad 0x10000000          # pc_range
\t.rept {count}
{row}
\t.endr
\t.balign 8
.Lfde{i}_end:''')
out.append('\t.section .note.GNU-stack,"",@progbits')
print('\n'.join(out))
