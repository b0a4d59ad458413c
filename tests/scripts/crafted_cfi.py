#!/usr/bin/env python3
# (One file of 845 lines: one ELF builder and the list of crafted cases it writes, a few lines each.)
"""Writes hostile ELF files for `ehelf dump` against `readelf -wF` (test_dump_crafted.sh).

Each file is an ELF64 x86_64 image built from scratch (section headers only, no program
headers) holding a .eh_frame or .debug_frame made of raw CIE/FDE bytes, so every field can be
wrong on purpose: register numbers out of readelf's table and past 32 bits, every DW_EH_PE
pointer encoding, negative and zero pc ranges, odd CIE versions and augmentations, truncated
instructions, unknown opcodes, remember/restore underflow, bad lengths and CIE pointers, and
bad section headers. Usage: crafted_cfi.py OUTDIR (prints the number of files written).
"""
import os
import struct
import sys

# DW_CFA opcodes (the ones with operands are spelled out where used).
NOP, SET_LOC, ADV1, ADV2, ADV4 = 0x00, 0x01, 0x02, 0x03, 0x04
OFFSET_EXT, RESTORE_EXT, UNDEFINED, SAME_VALUE, REGISTER = 0x05, 0x06, 0x07, 0x08, 0x09
REMEMBER, RESTORE_STATE, DEF_CFA, DEF_CFA_REG, DEF_CFA_OFF = 0x0a, 0x0b, 0x0c, 0x0d, 0x0e
DEF_CFA_EXPR, EXPRESSION, OFFSET_EXT_SF, DEF_CFA_SF, DEF_CFA_OFF_SF = 0x0f, 0x10, 0x11, 0x12, 0x13
VAL_OFFSET, VAL_OFFSET_SF, VAL_EXPRESSION = 0x14, 0x15, 0x16
MIPS_ADV8, ARGS_SIZE, NEG_OFFSET_EXT = 0x1d, 0x2e, 0x2f

TEXT_ADDR = 0x401000
FRAME_ADDR = 0x402000
GOT_ADDR = 0x403000


def uleb(v):
    out = bytearray()
    while True:
        b = v & 0x7f
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def sleb(v):
    out = bytearray()
    while True:
        b = v & 0x7f
        v >>= 7
        if (v == 0 and not b & 0x40) or (v == -1 and b & 0x40):
            out.append(b)
            return bytes(out)
        out.append(b | 0x80)


def u8(v): return struct.pack('<B', v & 0xff)
def u16(v): return struct.pack('<H', v & 0xffff)
def u32(v): return struct.pack('<I', v & 0xffffffff)
def u64(v): return struct.pack('<Q', v & 0xffffffffffffffff)


# --- CFI sections ---------------------------------------------------------------------------

class Cie:
    """A CIE; `body` overrides everything after the id (raw bytes)."""

    def __init__(self, version=1, aug=b'zR', cf=1, df=-8, ra=16, augdata=None, insns=None,
                 body=None, length=None, cie_id=None, dwarf64=False, pad=True):
        self.version, self.aug, self.cf, self.df, self.ra = version, aug, cf, df, ra
        if augdata is None:
            augdata = b'\x1b' if aug == b'zR' else b''
        self.augdata = augdata
        self.insns = bytes([DEF_CFA, 7, 8, 0x80 | 16, 1]) if insns is None else insns
        self.body, self.length, self.cie_id, self.dwarf64, self.pad = (
            body, length, cie_id, dwarf64, pad)

    def payload(self):
        if self.body is not None:
            return self.body
        p = bytearray([self.version]) + self.aug + b'\0'
        if self.version >= 4 and not isinstance(self, RawHeaderCie):
            p += b'\x08\x00'
        p += uleb(self.cf) + sleb(self.df)
        p += u8(self.ra) if self.version == 1 else uleb(self.ra)
        if self.aug.startswith(b'z'):
            p += uleb(len(self.augdata)) + self.augdata
        return bytes(p) + self.insns


class RawHeaderCie(Cie):
    """A v4 CIE whose address and segment sizes are given in `extra` (after the augmentation)."""

    def __init__(self, extra, **kw):
        super().__init__(version=4, **kw)
        self.extra = extra

    def payload(self):
        p = bytearray([self.version]) + self.aug + b'\0' + self.extra
        p += uleb(self.cf) + sleb(self.df) + uleb(self.ra)
        if self.aug.startswith(b'z'):
            p += uleb(len(self.augdata)) + self.augdata
        return bytes(p) + self.insns


class Fde:
    """An FDE of `cie` (an index into the entry list, or a raw pointer with cie_ptr)."""

    def __init__(self, cie=0, pc=None, rng=None, insns=b'', augdata=b'', aug=True, body=None,
                 length=None, cie_ptr=None, dwarf64=False, pad=True):
        self.cie, self.pc, self.rng, self.insns, self.augdata, self.aug = (
            cie, pc, rng, insns, augdata, aug)
        self.body, self.length, self.cie_ptr, self.dwarf64, self.pad = (
            body, length, cie_ptr, dwarf64, pad)


class Raw:
    """Bytes placed as they are (terminators, garbage, cut entries)."""

    def __init__(self, data):
        self.data = data


def frame_section(entries, eh=True, addr=FRAME_ADDR):
    """Lays out entries; an FDE's `cie` is the index of any entry, before or after it. FDE pc
    fields default to a pcrel sdata4 pointer to TEXT_ADDR + 16*i."""
    offsets = [0] * len(entries)
    for _ in range(2):  # the second pass knows where every entry starts
        out = bytearray()
        for i, e in enumerate(entries):
            start = len(out)
            offsets[i] = start
            out += entry_bytes(e, i, start, offsets, eh, addr)
    return bytes(out)


def entry_bytes(e, i, start, offsets, eh, addr):
    if isinstance(e, Raw):
        return e.data
    head = 12 if e.dwarf64 else 4
    idsize = 8 if e.dwarf64 else 4
    if isinstance(e, Cie):
        ident = e.cie_id if e.cie_id is not None else (
            0 if eh else (0xffffffffffffffff if e.dwarf64 else 0xffffffff))
        payload = e.payload()
    else:
        if e.body is not None:
            payload = e.body
        else:
            field = start + head + idsize
            pc = u32(TEXT_ADDR + 16 * i - (addr + field)) if e.pc is None else e.pc
            rng = u32(16) if e.rng is None else e.rng
            payload = pc + rng
            if e.aug:
                payload += uleb(len(e.augdata)) + e.augdata
            payload += e.insns
        if e.cie_ptr is not None:
            ident = e.cie_ptr
        elif eh:
            ident = (start + head - offsets[e.cie]) & ((1 << (8 * idsize)) - 1)
        else:
            ident = offsets[e.cie]
    body = (u64(ident) if e.dwarf64 else u32(ident)) + payload
    if e.pad:
        while (len(body) + head) % 8:
            body += b'\0'
    length = len(body) if e.length is None else e.length
    return ((b'\xff\xff\xff\xff' + u64(length)) if e.dwarf64 else u32(length)) + body


# --- ELF images -----------------------------------------------------------------------------

SHT_PROGBITS, SHT_NOBITS, SHT_STRTAB, SHT_NULL = 1, 8, 3, 0


class Sec:
    def __init__(self, name, data=b'', type=SHT_PROGBITS, flags=2, addr=0, offset=None,
                 size=None, name_off=None, link=0, info=0, entsize=0):
        self.name, self.data, self.type, self.flags, self.addr = name, data, type, flags, addr
        self.offset, self.size, self.name_off = offset, size, name_off
        self.link, self.info, self.entsize = link, info, entsize


def elf(sections, shstrtab_type=SHT_STRTAB, shstrndx=None, e_type=3, shentsize=64, no_shdrs=False,
        shstrtab_size=None):
    """An ELF64 x86_64 image: header, section contents, .shstrtab, section header table."""
    names = bytearray(b'\0')
    name_offs = []
    all_secs = list(sections) + [Sec('.shstrtab', type=shstrtab_type, flags=0)]
    for s in all_secs:
        name_offs.append(len(names) if s.name_off is None else s.name_off)
        names += s.name.encode() + b'\0'
    all_secs[-1].data = bytes(names)
    if shstrtab_size is not None:
        all_secs[-1].size = shstrtab_size
    body = bytearray(b'\0' * 64)
    places = []
    for s in all_secs:
        while len(body) % 8:
            body += b'\0'
        places.append(len(body))
        body += s.data
    while len(body) % 8:
        body += b'\0'
    shoff = len(body)
    shdrs = bytearray(b'\0' * 64)  # the null section
    for s, place, noff in zip(all_secs, places, name_offs):
        off = place if s.offset is None else s.offset
        size = len(s.data) if s.size is None else s.size
        shdrs += struct.pack('<IIQQQQIIQQ', noff, s.type, s.flags, s.addr, off, size, s.link,
                             s.info, 8 if s.type != SHT_STRTAB else 1, s.entsize)
    shnum = len(all_secs) + 1
    if shstrndx is None:
        shstrndx = shnum - 1
    if no_shdrs:
        shoff, shnum, shstrndx = 0, 0, 0
    else:
        body += shdrs
    hdr = b'\x7fELF' + bytes([2, 1, 1, 0]) + b'\0' * 8
    hdr += struct.pack('<HHIQQQIHHHHHH', e_type, 62, 1, TEXT_ADDR, 0, shoff, 0, 64, 56, 0,
                       shentsize, shnum, shstrndx)
    body[0:64] = hdr
    return bytes(body)


def image(entries, eh=True, name=None, frame_addr=FRAME_ADDR, extra=()):
    """A file holding .text, .got and one frame section built from `entries` (or raw bytes)."""
    data = entries if isinstance(entries, bytes) else frame_section(entries, eh, frame_addr)
    name = name or ('.eh_frame' if eh else '.debug_frame')
    secs = [Sec('.text', b'\xc3' * 64, flags=6, addr=TEXT_ADDR),
            Sec(name, data, addr=frame_addr if eh else 0, flags=2 if eh else 0),
            Sec('.got', b'\0' * 16, flags=3, addr=GOT_ADDR)]
    return elf(secs + list(extra))


# --- the cases ------------------------------------------------------------------------------

CASES = {}


def case(name, data):
    assert name not in CASES, name
    CASES[name] = data


def fde_program(insns, eh=True, cie=None, n=1, **fde_kw):
    """A CIE and `n` FDEs running `insns` (insns may be a list, one per FDE)."""
    cie = cie or (Cie() if eh else Cie(aug=b''))
    progs = insns if isinstance(insns, list) else [insns] * n
    entries = [cie] + [Fde(0, insns=p, aug=cie.aug.startswith(b'z'), **fde_kw) for p in progs]
    return image(entries, eh)


def register_cases():
    """Register operands in and out of readelf's table (0..126), past 32 bits, wrapping to -1."""
    regs = [0, 16, 17, 63, 125, 126, 127, 128, 200, 1000, 0x7fffffff, 0x80000000, 0xfffffffe,
            0xffffffff, 0x100000000, 0x100000003, 0x1000000010, (1 << 64) - 1]
    ops = {
        'offset_extended': lambda r: bytes([OFFSET_EXT]) + uleb(r) + uleb(2),
        'offset_extended_sf': lambda r: bytes([OFFSET_EXT_SF]) + uleb(r) + sleb(-3),
        'val_offset': lambda r: bytes([VAL_OFFSET]) + uleb(r) + uleb(2),
        'val_offset_sf': lambda r: bytes([VAL_OFFSET_SF]) + uleb(r) + sleb(-2),
        'neg_offset_extended': lambda r: bytes([NEG_OFFSET_EXT]) + uleb(r) + uleb(1),
        'restore_extended': lambda r: bytes([RESTORE_EXT]) + uleb(r),
        'undefined': lambda r: bytes([UNDEFINED]) + uleb(r),
        'same_value': lambda r: bytes([SAME_VALUE]) + uleb(r),
        'register': lambda r: bytes([REGISTER]) + uleb(r) + uleb(3),
        'register_target': lambda r: bytes([REGISTER, 3]) + uleb(r),
        'expression': lambda r: bytes([EXPRESSION]) + uleb(r) + b'\x02\x77\x08',
        'val_expression': lambda r: bytes([VAL_EXPRESSION]) + uleb(r) + b'\x01\x30',
        'def_cfa': lambda r: bytes([DEF_CFA]) + uleb(r) + uleb(24),
        'def_cfa_sf': lambda r: bytes([DEF_CFA_SF]) + uleb(r) + sleb(-2),
        'def_cfa_register': lambda r: bytes([DEF_CFA_REG]) + uleb(r),
    }
    for opname, make in ops.items():
        for r in regs:
            prog = bytes([0x41]) + make(r) + bytes([0x41, 0x80 | 3, 1])
            case(f'reg_{opname}_{r:x}', fde_program(prog))
    # In the CIE too, and as the CIE's return-address column.
    for r in [16, 126, 127, 200, 0xffffffff, 0x100000010]:
        case(f'reg_cie_offset_extended_{r:x}',
             image([Cie(insns=bytes([DEF_CFA, 7, 8, OFFSET_EXT]) + uleb(r) + uleb(1)), Fde(0)]))
        case(f'reg_cie_ra_{r:x}', image([Cie(version=3, ra=r), Fde(0, insns=b'\x41'), Cie(),
                                         Fde(2, insns=b'\x41')]))
    case('reg_cie_ra_v1_255', image([Cie(version=1, ra=255), Fde(0, insns=b'\x41')]))
    # Several bad registers in one FDE, then good ones; every DW_CFA_offset short form.
    case('reg_many_bad', fde_program(b''.join(
        bytes([OFFSET_EXT]) + uleb(r) + uleb(1) for r in (127, 300, 0xffffffff, 5)) + b'\x41'))
    case('reg_all_short_offsets', fde_program(b''.join(
        bytes([0x80 | r, 1]) for r in range(64)) + b'\x41' + b''.join(
        bytes([0xc0 | r]) for r in range(64))))


def encoding_cases():
    """Every DW_EH_PE format and application for FDE pointers, set_loc and the personality."""
    def sized(fmt, v):
        low = fmt & 0x0f
        if low in (0x02, 0x0a):
            return u16(v)
        if low in (0x03, 0x0b):
            return u32(v)
        if low in (0x01, 0x09):
            return uleb(v & 0xffffffffffffffff) if low == 0x01 else sleb(v)
        return u64(v)
    values = {'pos': 0x1234, 'neg2': 0x8010, 'neg4': 0xfffffff0, 'neg8': -16}
    for fmt in range(16):
        for app in (0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70):
            for ind in (0, 0x80):
                enc = fmt | app | ind
                if app not in (0x00, 0x10) and fmt not in (0x03, 0x0b):
                    continue  # the other applications once per 4-byte format
                if ind and fmt not in (0x00, 0x0b):
                    continue
                for vname, v in values.items():
                    if vname != 'pos' and fmt not in (0x02, 0x0a, 0x03, 0x0b, 0x04, 0x0c, 0x00):
                        continue
                    pc = sized(enc, v)
                    rng = sized(enc, 0xfff0 if vname == 'neg2' else 0x20)
                    prog = b'\x41' + bytes([SET_LOC]) + sized(enc, v + 8) + b'\x41'
                    case(f'enc_{enc:02x}_{vname}', image([
                        Cie(augdata=bytes([enc])),
                        Fde(0, pc=pc, rng=rng, insns=prog),
                        Fde(0, pc=pc, rng=rng, insns=b'\x41\x0e\x10')]))
    case('enc_omit', image([Cie(augdata=b'\xff'), Fde(0, pc=u64(0x1000), rng=u64(8),
                                                        insns=b'\x41')]))
    # Ranges: zero, negative, wrapping past 2^64, and the pc at the top of the address space.
    for name, pc, rng in [('zero', 0x401000, 0), ('neg', 0x401000, -16),
                          ('wrap', 0xfffffffffffffff0, 0x20), ('top', -1, 1),
                          ('huge', 0, 0x7fffffffffffffff)]:
        case(f'range_abs8_{name}', image([Cie(augdata=b'\x00'),
                                          Fde(0, pc=u64(pc), rng=u64(rng), insns=b'\x41')]))
        case(f'range_sdata4_{name}', image([Cie(augdata=b'\x0b'),
                                            Fde(0, pc=u32(pc), rng=u32(rng), insns=b'\x41')]))
        case(f'range_sdata2_{name}', image([Cie(augdata=b'\x0a'),
                                            Fde(0, pc=u16(pc), rng=u16(rng), insns=b'\x41')]))
    # Personality encodings in zPLR / zP (the 'P' data is skipped by its encoding's size).
    for penc in (0x00, 0x02, 0x03, 0x04, 0x09, 0x0b, 0x1b, 0x50, 0x9b, 0xff):
        data = bytes([penc]) + u64(0x403000)[:{0x02: 2, 0x03: 4, 0x0b: 4, 0x1b: 4,
                                                0x9b: 4}.get(penc, 8)] + b'\x1b\x1b'
        case(f'pers_zPLR_{penc:02x}', image([Cie(aug=b'zPLR', augdata=data),
                                             Fde(0, augdata=u32(0x10), insns=b'\x41')]))
    # An LSDA pointer in the FDE's data; the data longer than the FDE.
    case('lsda_ok', image([Cie(aug=b'zLR', augdata=b'\x1b\x1b'),
                           Fde(0, augdata=u32(0), insns=b'\x41\x0e\x10')]))
    case('fde_augdata_too_long', image([Cie(), Fde(0, augdata=b'', insns=b'\x7f\x41\x0e\x10')]))


def cie_cases():
    """CIE versions, address and segment sizes, augmentations, factors and ra columns."""
    for v in (0, 1, 2, 3, 4, 5, 255):
        case(f'cie_version_{v}', image([Cie(version=v) if v != 4 else
                                        RawHeaderCie(b'\x08\x00'), Fde(0, insns=b'\x41')]))
        case(f'cie_version_{v}_debug', image([Cie(version=v, aug=b'') if v != 4 else
                                              RawHeaderCie(b'\x08\x00', aug=b''),
                                              Fde(0, pc=u64(0x401000), rng=u64(16), aug=False,
                                                  insns=b'\x41')], eh=False))
    for ptr, seg in [(0, 0), (1, 0), (2, 0), (4, 0), (8, 0), (9, 0), (4, 2), (4, 4), (4, 5),
                     (8, 1), (2, 6), (1, 7), (0x80, 0)]:
        for enc in (None, 0x03, 0x00):
            aug = b'' if enc is None else b'zR'
            augdata = b'' if enc is None else bytes([enc])
            sel = u64(0xab)[:seg] if seg <= 8 else b''
            fde_body_pc = sel + u64(0x2000)[:ptr if 0 < ptr <= 8 else 8] + u64(0x100)
            for eh in (True, False):
                case(f'cie_v4_ptr{ptr}_seg{seg}_{"none" if enc is None else hex(enc)}_'
                     f'{"eh" if eh else "debug"}',
                     image([RawHeaderCie(bytes([ptr, seg]), aug=aug, augdata=augdata),
                            Fde(0, pc=fde_body_pc, rng=b'', aug=bool(aug),
                                insns=b'\x41\x0e\x10\x41'),
                            Cie(aug=b'zR' if eh else b''),
                            Fde(2, pc=u32(0x10) if eh else u64(0x401000),
                                rng=u32(16) if eh else u64(16), aug=eh, insns=b'\x41')],
                           eh))
    augs = [b'', b'z', b'zR', b'zP', b'zL', b'zS', b'zRS', b'zSR', b'S', b'R', b'zB', b'zG',
            b'zX', b'zXR', b'zRX', b'eh', b'ehzR', b'zPLR', b'zLRP', b'zzR', b'x', b'z\xff',
            b'zR\x01']
    for aug in augs:
        augdata = {b'zR': b'\x1b', b'zP': b'\x00' + u64(0x403000), b'zL': b'\x1b',
                   b'zRS': b'\x1b', b'zSR': b'\x1b', b'zXR': b'\x03', b'zRX': b'\x03',
                   b'zPLR': b'\x9b' + u32(0x1000) + b'\x1b\x1b',
                   b'zLRP': b'\x1b\x03\x00' + u64(1), b'zzR': b'\x1b',
                   b'ehzR': b'\x1b'}.get(aug, b'')
        tag = aug.decode('latin-1').encode('unicode_escape').decode().replace('\\', 'x')
        for dl in (None, 0, 40):
            c = Cie(aug=aug, augdata=augdata)
            if dl is not None and aug.startswith(b'z'):
                c = Cie(aug=aug, augdata=augdata, insns=b'')
                c.body = (bytes([1]) + aug + b'\0' + uleb(1) + sleb(-8) + u8(16) + uleb(dl) +
                          augdata + bytes([DEF_CFA, 7, 8, 0x90, 1]))
            elif dl is not None:
                continue
            case(f'cie_aug_{tag}_{"std" if dl is None else dl}',
                 image([c, Fde(0, pc=u32(0x10), rng=u32(0x10), aug=aug.startswith(b'z'),
                               augdata=b'\0\0\0\0' if b'L' in aug else b'',
                               insns=b'\x41\x0e\x10')]))
    for cf in (0, 1, 4, 0x7fffffff, 0x80000001, 0xffffffff, 0x100000001):
        for df in (-8, 0, 1, 0x7fffffff, -0x80000000, 0x80000000, -0x100000008):
            if cf not in (1, 0x80000001) and df not in (-8, -0x100000008):
                continue
            prog = bytes([0x43, ADV1, 3, 0x83, 2, OFFSET_EXT_SF, 6, 0x7f, DEF_CFA_SF, 7, 0x7e,
                          DEF_CFA_OFF_SF, 3, ADV2, 1, 0, 0x41])
            case(f'cie_factors_{cf:x}_{df & 0xffffffffffffffff:x}',
                 image([Cie(cf=cf, df=df), Fde(0, insns=prog)]))
    # Augmentation strings without a terminator, with it as the entry's last byte.
    case('cie_aug_unterminated', image([Cie(body=b'\x01zRzRzR'), Fde(0, insns=b'\x41')]))
    case('cie_aug_nul_last', image([Cie(body=b'\x01zR\0', pad=False), Fde(0, insns=b'\x41')]))
    case('cie_cut_after_factors', image([Cie(body=b'\x01\0\x01\x78', pad=False),
                                         Fde(0, aug=False, insns=b'\x41')]))
    case('cie_cut_after_ra', image([Cie(body=b'\x01zR\0\x01\x78\x10', pad=False),
                                    Fde(0, insns=b'\x41')]))
    case('cie_eh_cut', image([Cie(body=b'\x01eh\0\x01\x02', pad=False), Fde(0, aug=False)]))
    case('cie_instructions_only_nops', image([Cie(insns=b'\0\0\0'),
                                              Fde(0, insns=b'\0\0')]))
    case('cie_restore_in_cie', image([Cie(insns=bytes([DEF_CFA, 7, 8, 0x86, 2, 0xc6, 0xc3,
                                                       REMEMBER, 0x83, 3, RESTORE_STATE])),
                                      Fde(0, insns=b'\x41\xc6\x41\xc3')]))
    case('cie_def_cfa_expression', image([Cie(insns=bytes([DEF_CFA_EXPR, 2, 0x77, 8, 0x90, 1])),
                                          Fde(0, insns=b'\x41\x0e\x20\x41\x0d\x06')]))
    case('cie_set_loc_and_advance', image([Cie(insns=bytes([DEF_CFA, 7, 8, 0x90, 1, 0x42,
                                                            SET_LOC]) + u32(0x100) + b'\x41'),
                                           Fde(0, insns=b'\x41')]))


def program_cases():
    """Instructions cut by the FDE's end, unknown opcodes, advances past the end, state stacks."""
    whole = {
        'set_loc': bytes([SET_LOC]) + u32(0x40),
        'advance_loc1': bytes([ADV1, 0x20]),
        'advance_loc2': bytes([ADV2]) + u16(0x300),
        'advance_loc4': bytes([ADV4]) + u32(0x40000),
        'mips_advance_loc8': bytes([MIPS_ADV8]) + u64(0x500000000),
        'offset': bytes([0x86]) + uleb(0x81),
        'offset_extended': bytes([OFFSET_EXT, 6]) + uleb(0x82),
        'offset_extended_sf': bytes([OFFSET_EXT_SF, 6]) + sleb(-300),
        'val_offset': bytes([VAL_OFFSET, 6]) + uleb(0x83),
        'val_offset_sf': bytes([VAL_OFFSET_SF, 6]) + sleb(-200),
        'neg_offset_extended': bytes([NEG_OFFSET_EXT, 6]) + sleb(-300),
        'restore_extended': bytes([RESTORE_EXT]) + uleb(0x86),
        'undefined': bytes([UNDEFINED]) + uleb(0x83),
        'same_value': bytes([SAME_VALUE]) + uleb(0x83),
        'register': bytes([REGISTER, 6]) + uleb(0x83),
        'def_cfa': bytes([DEF_CFA, 6]) + uleb(0x90),
        'def_cfa_sf': bytes([DEF_CFA_SF, 6]) + sleb(-300),
        'def_cfa_register': bytes([DEF_CFA_REG]) + uleb(0x86),
        'def_cfa_offset': bytes([DEF_CFA_OFF]) + uleb(0x90),
        'def_cfa_offset_sf': bytes([DEF_CFA_OFF_SF]) + sleb(-300),
        'def_cfa_expression': bytes([DEF_CFA_EXPR, 3, 0x77, 8, 0x06]),
        'expression': bytes([EXPRESSION, 6, 2, 0x76, 0x10]),
        'val_expression': bytes([VAL_EXPRESSION, 6, 2, 0x77, 0x10]),
        'args_size': bytes([ARGS_SIZE]) + uleb(0x100),
    }
    for opname, ins in whole.items():
        for cut in range(1, len(ins)):
            # The FDE ends inside the instruction (no padding), then a good FDE follows.
            case(f'cut_{opname}_{cut}', image([
                Cie(), Fde(0, insns=b'\x41' + ins[:cut], pad=False), Fde(0, insns=b'\x41\x0e\x10')]))
        case(f'whole_{opname}', fde_program(b'\x41' + ins + b'\x41'))
    # An unterminated LEB runs to the FDE's end; a LEB longer than 10 bytes still ends.
    case('leb_unterminated', image([Cie(), Fde(0, insns=b'\x41\x0e' + b'\xff' * 7, pad=False),
                                    Fde(0, insns=b'\x41')]))
    case('leb_long', fde_program(b'\x41\x0e' + b'\x80' * 14 + b'\x01\x41\x0e' + b'\xff' * 12 +
                                 b'\x00\x41'))
    case('leb_huge_offset', fde_program(b'\x41\x86' + b'\xff' * 9 + b'\x7f\x41'))
    for op in range(0x00, 0x40):
        case(f'opcode_{op:02x}', fde_program(bytes([0x41, op, 0x07, 0x08, 0x10, 0x02, 0x77, 0x08,
                                                    0x41])))
    for op in (0x1c, 0x2c, 0x30, 0x3f, 0x17, 0x1b):
        case(f'opcode_{op:02x}_in_cie', image([Cie(insns=bytes([DEF_CFA, 7, 8, op, 0x90, 1])),
                                               Fde(0, insns=b'\x41\x86\x02')]))
    # Advances beyond the FDE's range and far past it; advances with code factor 0.
    case('advance_past_end', fde_program(b'\x41' + bytes([ADV4]) + u32(0x100000) + b'\x0e\x10' +
                                         bytes([MIPS_ADV8]) + u64(0xffffffffffffff00) + b'\x41'))
    case('advance_wraps', image([Cie(cf=0x80000001),
                                 Fde(0, insns=b'\x7f' + bytes([ADV4]) + u32(0xffffffff) + b'\x41')]))
    case('advance_zero', fde_program(b'\x40\x40' + bytes([ADV1, 0]) + b'\x0e\x10\x40'))
    case('set_loc_backwards', fde_program(b'\x42' + bytes([SET_LOC]) + u32(0xffff0000) + b'\x41'))
    # remember/restore: underflow, leaks across FDEs and CIEs, many levels, empty columns.
    case('restore_underflow', fde_program(b'\x41\x0b\x41\x0b\x0b'))
    case('restore_underflow_first', fde_program(b'\x0b\x41'))
    case('remember_leaks', fde_program([b'\x41\x0a\x83\x02\x0e\x20\x41',
                                        b'\x41\x0b\x41', b'\x0b\x41']))
    case('remember_leaks_other_cie', image([
        Cie(), Fde(0, insns=b'\x41\x0a\x83\x02\x98\x03\x41'),
        Cie(version=3, ra=30, insns=bytes([DEF_CFA, 6, 16])),
        Fde(2, insns=b'\x41\x0b\x41'), Fde(0, insns=b'\x0b\x41')]))
    case('remember_deep', fde_program(b'\x0a' * 40 + b'\x41' + b'\x0b' * 42 + b'\x41'))
    # Many remembered states (alike, then each different), popped again: no quadratic time.
    case('remember_100k', fde_program(b'\x0a' * 100000 + b'\x41' + b'\x0b' * 100001 + b'\x41'))
    case('remember_distinct', fde_program(b''.join(bytes([0x0a, DEF_CFA_OFF]) + uleb(i)
                                                   for i in range(20000)) + b'\x41' +
                                          b'\x0b\x41' * 20000))
    case('remember_in_cie', image([Cie(insns=bytes([DEF_CFA, 7, 8, 0x90, 1, REMEMBER, 0x83, 2])),
                                   Fde(0, insns=b'\x41\x0b\x41'), Fde(0, insns=b'\x0b\x41')]))
    case('remember_no_cie', image([Cie(), Fde(0, cie_ptr=0x12345, insns=b'\x0a\x41'),
                                   Fde(0, insns=b'\x41\x0b\x41')]))
    # Expressions: unknown and DWARF 5 ops, blocks past the end, in good and bad registers.
    exprs = {'unknown': b'\xfa', 'unknown_mid': b'\x77\x08\xfa\x06', 'lit': b'\x30',
             'breg_deref': b'\x77\x08\x06', 'skip': b'\x2f\x01\x00\x30',
             'bra_bad': b'\x28\x05\x00', 'cut_const4u': b'\x0c\x01\x02',
             'entry_value': b'\xa3\x01\x57', 'implicit_value': b'\x9e\x02\x01\x02',
             'regx': b'\x90\x80\x01', 'bregx': b'\x92\x07\x08', 'addr': b'\x03' + u64(0x1234),
             'call_ref': b'\x9a\x00\x00\x00\x00', 'constx': b'\xa2\x01', 'empty': b'',
             'const_type': b'\xa4\x01\x02\x03\x04', 'deref_size': b'\x94\x04',
             'gnu_push_tls': b'\xe0', 'piece': b'\x93\x08'}
    for ename, e in exprs.items():
        for reg in (6, 200):
            case(f'expr_{ename}_r{reg}', fde_program(
                b'\x41' + bytes([EXPRESSION]) + uleb(reg) + uleb(len(e)) + e +
                bytes([VAL_EXPRESSION]) + uleb(reg + 1) + uleb(len(e)) + e + b'\x41'))
        case(f'expr_{ename}_cfa', fde_program(b'\x41' + bytes([DEF_CFA_EXPR]) + uleb(len(e)) + e +
                                              b'\x41\x0e\x20\x41'))
    for name, op in (('def_cfa_expression', b'\x0f'), ('expression', b'\x10\x06'),
                     ('val_expression', b'\x16\x06')):
        case(f'expr_corrupt_len_{name}', fde_program(b'\x41' + op + b'\x05\x0e\x20\x41'))
        case(f'expr_corrupt_len_huge_{name}', fde_program(b'\x41' + op + uleb(1 << 63) +
                                                          b'\x0e\x20\x41'))
    # Every opcode as the expression of a bad register (readelf then lists it): with operands,
    # and cut after one byte; nested entry values.
    for tail, tag in ((bytes([0x81, 0x82, 0x03, 0x04, 0x85, 0x06, 0x07, 0x08, 0x09]), 'full'),
                      (b'\x81', 'cut')):
        progs = []
        for op in range(256):
            e = bytes([op]) + tail
            progs.append(bytes([EXPRESSION]) + uleb(200) + uleb(len(e)) + e)
        case(f'expr_every_op_{tag}', fde_program(progs))
    nested = b'\x30'
    for _ in range(6):
        nested = bytes([0xa3]) + uleb(len(nested) + 1) + nested + b'\x31'
    case('expr_nested_entry_values', fde_program(
        b'\x41' + bytes([EXPRESSION]) + uleb(300) + uleb(len(nested)) + nested + b'\x41'))
    case('expr_encoded_addr', fde_program(b''.join(
        bytes([EXPRESSION]) + uleb(300) + uleb(len(e)) + e for e in (
            b'\xf1\x1b' + u32(0x100), b'\xf1\x0a\xff\xff', b'\xf1\x03\x01', b'\xf1\x00' + u64(5),
            b'\xf1\x13\x01\x02\x03\x04\x30'))))
    case('expr_bad_register_corrupt', fde_program(b'\x41\x10\xc8\x01\x09\x41'))


def entry_cases():
    """Lengths, terminators, CIE pointers and 64-bit DWARF."""
    good = [Cie(), Fde(0, insns=b'\x41\x0e\x10')]
    case('len_past_end', image([Cie(), Fde(0, insns=b'\x41', length=0x7ffffff0)]))
    case('len_past_end_cie', image([Cie(length=0x100)]))
    for n in (1, 2, 3):
        case(f'len_cut_{n}', image(frame_section(good) + b'\x10\x00\x00'[:n]))
        case(f'len64_cut_{n}', image(frame_section(good) + b'\xff\xff\xff\xff' + b'\x08' * n))
    case('len_zero_run', image(good + [Raw(b'\0' * 12)] + [Cie(), Fde(2, insns=b'\x41')]))
    case('len_zero_then_len', image(good + [Raw(b'\0\0\0\0\x00\x14\0\0\0')]))
    case('len_reserved', image(good + [Raw(u32(0xfffffff0) + b'\0' * 12)]))
    case('len_short_entry', image(good + [Raw(u32(2) + b'\0\0'), Cie(), Fde(3)]))
    case('len_one', image(good + [Raw(u32(1) + b'\0'), Raw(b'\0\0\0')]))
    for eh in (True, False):
        tag = 'eh' if eh else 'debug'
        base = Cie() if eh else Cie(aug=b'')
        fk = {} if eh else {'pc': u64(0x401000), 'rng': u64(0x10), 'aug': False}
        case(f'dwarf64_{tag}', image([Cie(dwarf64=True, aug=base.aug),
                                      Fde(0, dwarf64=True, insns=b'\x41\x0e\x10', **fk),
                                      Fde(0, insns=b'\x41', **fk)], eh))
        case(f'cieptr_outside_{tag}', image([base, Fde(0, cie_ptr=0x7fff0000, insns=b'\x41', **fk),
                                             Fde(0, insns=b'\x41', **fk)], eh))
        case(f'cieptr_to_fde_{tag}', image([base, Fde(0, insns=b'\x41', **fk),
                                            Fde(1, insns=b'\x42\x0e\x10', **fk)], eh))
        case(f'cieptr_mid_entry_{tag}', image([base, Fde(0, cie_ptr=(2 if not eh else 0x1e),
                                                         insns=b'\x41', **fk)], eh))
        case(f'cieptr_self_{tag}', image([base, Fde(0, cie_ptr=(0x18 if not eh else 4),
                                                    insns=b'\x41', **fk)], eh))
        case(f'cieptr_negative_{tag}', image([base, Fde(0, cie_ptr=0xfffffff0, insns=b'\x41',
                                                        **fk)], eh))
        # Forward references: to a CIE (read, never run; its length shown in the FDE line), to
        # one read twice, then reached, then referred to backwards; to an FDE, a zero
        # terminator, a cut entry, a CIE that fails, a v4 CIE, a 64-bit one.
        fwd = Cie(aug=base.aug, insns=bytes([DEF_CFA, 7, 8, 0x90, 1, 0x86, 2]))
        case(f'forward_cie_{tag}', image([Fde(2, insns=b'\x41\x83\x03\x41', **fk),
                                          Fde(2, insns=b'\x42', **fk), fwd,
                                          Fde(2, insns=b'\x41', **fk)], eh))
        case(f'forward_to_fde_{tag}', image([Fde(1, insns=b'\x41', **fk),
                                             Fde(0, insns=b'\x41', **fk), base], eh))
        case(f'forward_to_zero_{tag}', image([Fde(1, insns=b'\x41', **fk), Raw(b'\0' * 8), base,
                                              Fde(2, insns=b'\x41', **fk)], eh))
        case(f'forward_to_cut_{tag}', image([Fde(1, insns=b'\x41', **fk), Raw(b'\x40\0')], eh))
        case(f'forward_to_long_{tag}', image([Fde(1, insns=b'\x41', **fk),
                                              Cie(aug=base.aug, length=0x400)], eh))
        case(f'forward_cie_fails_{tag}', image([Fde(1, insns=b'\x41', **fk),
                                                Cie(body=b'\x01zRzR', pad=False), base,
                                                Fde(2, insns=b'\x41', **fk)], eh))
        case(f'forward_cie_bad_ra_{tag}', image([Fde(1, insns=b'\x41', **fk),
                                                 Cie(aug=base.aug, version=3, ra=200), base,
                                                 Fde(2, insns=b'\x41', **fk)], eh))
        case(f'forward_cie_v4_{tag}', image([Fde(1, pc=u32(0x2000), rng=u64(0x10), aug=False,
                                                 insns=b'\x41'),
                                             RawHeaderCie(b'\x04\x00', aug=b''),
                                             Fde(1, insns=b'\x41', pc=u32(0x3000), rng=u32(4),
                                                 aug=False)], eh))
        case(f'forward_cie_64_{tag}', image([Fde(1, insns=b'\x41', **fk),
                                             Cie(aug=base.aug, dwarf64=True),
                                             Fde(1, insns=b'\x41', **fk)], eh))
    # Many CIEs, each with FDEs naming it and the first one: lookups stay fast.
    many = []
    for i in range(5000):
        many += [Cie(ra=16 + i % 3), Fde(len(many), insns=b'\x41'), Fde(0, insns=b'\x42')]
    case('many_cies', image(many))
    # The .eh_frame CIE pointer of an FDE in 64-bit DWARF (readelf subtracts 4, not 12).
    case('dwarf64_cieptr_quirk', image([Cie(), Fde(0, dwarf64=True, cie_ptr=0x14, insns=b'\x41'),
                                        Fde(0, dwarf64=True, cie_ptr=0x1c, insns=b'\x41')]))
    case('fde_without_cie_first', image([Fde(0, cie_ptr=0x99, insns=b'\x41\x86\x02\x41'),
                                         Cie(), Fde(1, insns=b'\x41')]))
    case('fde_no_fields', image([Cie(), Fde(0, body=b'', pad=False), Fde(0, insns=b'\x41')]))
    case('fde_pc_only', image([Cie(), Fde(0, body=u32(0x20), pad=False), Fde(0, insns=b'\x41')]))
    case('fde_pc_cut', image([Cie(), Fde(0, body=b'\x20\x00', pad=False), Fde(0)]))
    case('fde_pc_range_only', image([Cie(), Fde(0, body=u32(0x20) + u32(8), pad=False)]))
    case('cie_only_id', image([Cie(body=b'', pad=False), Fde(0)]))
    case('cie_only_version', image([Cie(body=b'\x01', pad=False), Fde(0)]))
    case('trailing_garbage', image(frame_section(good) + b'\x08\x00\x00\x00\xde\xad\xbe\xef'
                                   b'\x01\x02\x03\x04'))


def section_cases():
    """Frame sections with odd headers: types, sizes, names, places, several of them."""
    data = frame_section([Cie(), Fde(0, insns=b'\x41\x0e\x10')])
    ddata = frame_section([Cie(aug=b''), Fde(0, pc=u64(0x401000), rng=u64(16), aug=False,
                                             insns=b'\x41\x0e\x10')], eh=False)
    text = Sec('.text', b'\xc3' * 64, flags=6, addr=TEXT_ADDR)
    for tname, t in (('null', SHT_NULL), ('nobits', SHT_NOBITS), ('strtab', SHT_STRTAB),
                     ('note', 7), ('unknown', 0x6fffffff), ('rela', 4)):
        case(f'sec_type_{tname}', elf([text, Sec('.eh_frame', data, type=t, addr=FRAME_ADDR)]))
        case(f'sec_type_{tname}_debug', elf([text, Sec('.debug_frame', ddata, type=t, flags=0)]))
    case('sec_empty', elf([text, Sec('.eh_frame', b'', addr=FRAME_ADDR)]))
    case('sec_empty_nobits', elf([text, Sec('.eh_frame', b'', type=SHT_NOBITS, addr=FRAME_ADDR)]))
    case('sec_past_eof', elf([text, Sec('.eh_frame', data, addr=FRAME_ADDR, offset=0x100000)]))
    case('sec_size_past_eof', elf([text, Sec('.eh_frame', data, addr=FRAME_ADDR, size=0x100000)]))
    case('sec_size_short', elf([text, Sec('.eh_frame', data, addr=FRAME_ADDR, size=30)]))
    for n in ('.eh_frame_hdr', '.eh_frame.foo', '.eh_framex', '.debug_frame.foo', '.debug_framex',
              '.zdebug_frame', '.zdebug_frame.x', '.debug_frames', '.EH_FRAME', '.debug_frame_hdr'):
        case(f'sec_name_{n.strip(".")}', elf([text, Sec(n, data if 'eh' in n else ddata,
                                                        addr=FRAME_ADDR)]))
    case('sec_two_eh_frames', elf([text, Sec('.eh_frame', data, addr=FRAME_ADDR),
                                   Sec('.eh_frame', frame_section([Cie(ra=3)]), addr=0x404000)]))
    case('sec_both', elf([text, Sec('.debug_frame', ddata, flags=0),
                          Sec('.eh_frame', data, addr=FRAME_ADDR)]))
    case('sec_shstrtab_nobits', elf([text, Sec('.eh_frame', data, addr=FRAME_ADDR)],
                                    shstrtab_type=SHT_NOBITS))
    case('sec_shstrtab_null', elf([text, Sec('.eh_frame', data, addr=FRAME_ADDR)],
                                  shstrtab_type=SHT_NULL))
    case('sec_shstrndx_zero', elf([text, Sec('.eh_frame', data, addr=FRAME_ADDR)], shstrndx=0))
    case('sec_shstrndx_big', elf([text, Sec('.eh_frame', data, addr=FRAME_ADDR)], shstrndx=99))
    case('sec_shstrndx_text', elf([text, Sec('.eh_frame', data, addr=FRAME_ADDR)], shstrndx=1))
    case('sec_shstrtab_short', elf([text, Sec('.eh_frame', data, addr=FRAME_ADDR)],
                                   shstrtab_size=12))
    case('sec_name_past_strtab', elf([text, Sec('.eh_frame', data, addr=FRAME_ADDR,
                                                name_off=0x4000)]))
    case('sec_no_headers', elf([text, Sec('.eh_frame', data, addr=FRAME_ADDR)], no_shdrs=True))
    case('sec_addr_zero', elf([text, Sec('.eh_frame', data, addr=0)]))
    case('sec_addr_high', elf([text, Sec('.eh_frame', data, addr=0xfffffffffffffff0)]))
    # Compressed frame sections: ELF compression headers (zlib; on .eh_frame too), the old GNU
    # "ZLIB" prefix, each also cut or lying about the size.
    import zlib
    def chdr(data, size=None, ctype=1):
        return struct.pack('<IIQQ', ctype, 0, len(data) if size is None else size, 1) + \
            zlib.compress(data)
    def gnu(data, size=None):
        return b'ZLIB' + struct.pack('>Q', len(data) if size is None else size) + zlib.compress(data)
    for tag, name, payload in (('debug', '.debug_frame', ddata), ('eh', '.eh_frame', data)):
        case(f'sec_zlib_{tag}', elf([text, Sec(name, chdr(payload), flags=0x800, addr=FRAME_ADDR)]))
        case(f'sec_zlib_size_short_{tag}', elf([text, Sec(name, chdr(payload, len(payload) - 8),
                                                          flags=0x800, addr=FRAME_ADDR)]))
        case(f'sec_zlib_size_long_{tag}', elf([text, Sec(name, chdr(payload, len(payload) + 8),
                                                         flags=0x800, addr=FRAME_ADDR)]))
        case(f'sec_zlib_cut_{tag}', elf([text, Sec(name, chdr(payload)[:-6], flags=0x800,
                                                   addr=FRAME_ADDR)]))
        case(f'sec_gnu_zlib_{tag}', elf([text, Sec(name, gnu(payload), addr=FRAME_ADDR)]))
    case('sec_gnu_zlib_zdebug', elf([text, Sec('.zdebug_frame', gnu(ddata))]))
    case('sec_gnu_zlib_zdebug_short', elf([text, Sec('.zdebug_frame', gnu(ddata, 8))]))
    case('sec_gnu_zlib_zdebug_cut', elf([text, Sec('.zdebug_frame', gnu(ddata)[:-5])]))
    case('sec_zdebug_plain', elf([text, Sec('.zdebug_frame', ddata)]))
    # File headers: section header table past the end, entry size wrong, counts too large.
    good = elf([text, Sec('.eh_frame', data, addr=FRAME_ADDR)])
    shoff = struct.unpack_from('<Q', good, 0x28)[0]
    def patched(off, fmt, value, base=good):
        b = bytearray(base)
        struct.pack_into(fmt, b, off, value)
        return bytes(b)
    case('file_shoff_past_eof', patched(0x28, '<Q', len(good) + 64))
    case('file_shoff_cut', good[:shoff + 100])
    case('file_shentsize_small', patched(0x3a, '<H', 40))
    case('file_shentsize_big', patched(0x3a, '<H', 80))
    case('file_shentsize_big_fits', patched(0x3a, '<H', 80) + b'\0' * 128)
    case('file_phnum_huge', patched(0x38, '<H', 0xff00, patched(0x20, '<Q', 0x40)))
    case('file_shnum_huge', patched(0x3c, '<H', 0xff00))
    case('file_shnum_zero', patched(0x3c, '<H', 0))
    case('file_shstrndx_xindex', patched(0x3e, '<H', 0xffff))
    case('file_phoff_junk', patched(0x36, '<H', 3, patched(0x20, '<Q', 0x10)))
    case('file_type_core', patched(0x10, '<H', 4))
    case('file_type_unknown', patched(0x10, '<H', 0x1234))
    # A v4 CIE that sets the address size to 4 and then fails leaves it so for the sections after.
    bad_v4 = frame_section([RawHeaderCie(b'\x04\x00', aug=b'z', augdata=b'', insns=b'')],
                           eh=False)
    bad_v4 = bad_v4[:16] + b'\x40' + bad_v4[17:]  # the 'z' data length, far too long
    case('sec_addr_size_leak', elf([text, Sec('.debug_frame', bad_v4, flags=0),
                                    Sec('.eh_frame', data, addr=FRAME_ADDR),
                                    Sec('.debug_frame', ddata, flags=0)]))
    fwd_v4 = frame_section([Fde(1, pc=u32(0x2000), rng=u32(16), aug=False), Raw(bad_v4)],
                           eh=False)
    case('sec_addr_size_leak_forward', elf([text, Sec('.debug_frame', fwd_v4, flags=0),
                                            Sec('.eh_frame', data, addr=FRAME_ADDR)]))
    case('sec_compressed_bad', elf([text, Sec('.debug_frame', b'\x01\0\0\0\0\0\0\0' +
                                              u64(0x100) + u64(1) + b'garbage', flags=0x800)]))
    case('sec_compressed_unknown', elf([text, Sec('.debug_frame', u32(7) + b'\0' * 20,
                                                  flags=0x800)]))


def sym(name_off, info, shndx, value, size=0):
    return struct.pack('<IBBHQQ', name_off, info, 0, shndx, value, size)


def rela(offset, symidx, rtype, addend):
    return struct.pack('<QQq', offset, (symidx << 32) | rtype, addend)


def rel(offset, symidx, rtype):
    return struct.pack('<QQ', offset, (symidx << 32) | rtype)


def relocation_cases():
    """Relocatable objects: readelf applies the frame section's relocations before the dump."""
    SHT_RELA, SHT_REL, SHT_SYMTAB = 4, 9, 2
    # Sections: 1 .text, 2 .eh_frame/.debug_frame, 3 .symtab, 4 .strtab, 5.. relocations.
    syms = (sym(0, 0, 0, 0) + sym(0, 3, 1, 0) +                  # null, section .text
            sym(1, 0x12, 1, 0x20, 8) + sym(3, 0x11, 1, 0x30) +    # FUNC f, OBJECT o
            sym(5, 0x10, 1, 0x40) + sym(7, 0x14, 1, 0x50) +       # NOTYPE n, FILE
            sym(9, 0x15, 0xfff2, 0x60) + sym(11, 0x16, 1, 0x70))  # COMMON, TLS
    strtab = b'\0f\0o\0n\0x\0c\0t\0'
    eh = frame_section([Cie(), Fde(0, pc=u32(0), rng=u32(16), insns=b'\x41\x0e\x10'),
                        Fde(0, pc=u32(0), rng=u32(16), insns=b'\x41')])
    dbg = frame_section([Cie(aug=b''), Fde(0, pc=u64(0), rng=u64(16), aug=False, insns=b'\x41'),
                         Fde(0, pc=u64(0), rng=u64(16), aug=False, insns=b'\x42')], eh=False)

    def obj(frame, name, relocs, rtype=SHT_RELA, link=3, info=2, extra=(), entsize=24):
        secs = [Sec('.text', b'\xc3' * 128, flags=6),
                Sec(name, frame, flags=2 if name == '.eh_frame' else 0),
                Sec('.symtab', syms, type=SHT_SYMTAB, flags=0, link=4, info=2, entsize=24),
                Sec('.strtab', strtab, type=SHT_STRTAB, flags=0),
                Sec('.rela' + name if rtype == SHT_RELA else '.rel' + name, relocs, type=rtype,
                    flags=0x40, link=link, info=info, entsize=entsize)]
        return elf(secs + list(extra), e_type=1)

    # .eh_frame pcs at 0x20 and 0x38 (FDE at 0x18 and 0x30, pc field 8 bytes in).
    for t in (0, 1, 2, 3, 4, 9, 10, 11, 24, 26, 41, 42, 0xff):
        case(f'reloc_eh_type_{t}', obj(eh, '.eh_frame', rela(0x20, 1, t, 0x10) +
                                       rela(0x38, 2, t, -4)))
    for si, tag in ((1, 'section'), (2, 'func'), (3, 'object'), (4, 'notype'), (5, 'file'),
                    (6, 'common'), (7, 'tls'), (8, 'outside'), (0, 'null')):
        case(f'reloc_eh_sym_{tag}', obj(eh, '.eh_frame', rela(0x20, si, 2, 4)))
    case('reloc_eh_offset_past', obj(eh, '.eh_frame', rela(len(eh) - 2, 1, 2, 4) +
                                     rela(len(eh) + 8, 1, 1, 4) + rela(0x20, 1, 2, 8)))
    case('reloc_eh_two_sections', obj(eh, '.eh_frame', rela(0x20, 1, 2, 0x10), extra=[
        Sec('.rela.other', rela(0x38, 1, 2, 0x40), type=SHT_RELA, flags=0x40, link=3, info=2,
            entsize=24)]))
    case('reloc_eh_rel', obj(eh, '.eh_frame', rel(0x20, 1, 2) + rel(0x38, 3, 2), rtype=SHT_REL,
                             entsize=16))
    case('reloc_eh_bad_link', obj(eh, '.eh_frame', rela(0x20, 1, 2, 4), link=99))
    case('reloc_eh_link_strtab', obj(eh, '.eh_frame', rela(0x20, 1, 2, 4), link=4))
    case('reloc_eh_empty_first', obj(eh, '.eh_frame', b'', extra=[
        Sec('.rela.other', rela(0x38, 1, 2, 0x40), type=SHT_RELA, flags=0x40, link=3, info=2,
            entsize=24)]))
    case('reloc_eh_bad_link_first', obj(eh, '.eh_frame', rela(0x20, 1, 2, 4), link=99, extra=[
        Sec('.rela.other', rela(0x38, 1, 2, 0x40), type=SHT_RELA, flags=0x40, link=3, info=2,
            entsize=24)]))
    case('reloc_eh_past_eof', elf([Sec('.text', b'\xc3' * 16, flags=6), Sec('.eh_frame', eh),
                                   Sec('.symtab', syms, type=SHT_SYMTAB, flags=0, link=4, info=2,
                                       entsize=24),
                                   Sec('.strtab', strtab, type=SHT_STRTAB, flags=0),
                                   Sec('.rela.eh_frame', b'', type=SHT_RELA, link=3, info=2,
                                       offset=0x10000, size=48, entsize=24)], e_type=1))
    case('reloc_eh_symtab_past_eof', elf([Sec('.text', b'\xc3' * 16, flags=6), Sec('.eh_frame', eh),
                                          Sec('.symtab', b'', type=SHT_SYMTAB, flags=0, link=4,
                                              info=2, entsize=24, offset=0x10000, size=96),
                                          Sec('.strtab', strtab, type=SHT_STRTAB, flags=0),
                                          Sec('.rela.eh_frame', rela(0x20, 1, 2, 4), type=SHT_RELA,
                                              link=3, info=2, entsize=24)], e_type=1))
    case('reloc_eh_symtab_odd', elf([Sec('.text', b'\xc3' * 16, flags=6), Sec('.eh_frame', eh),
                                     Sec('.symtab', syms[:24 * 2 + 20], type=SHT_SYMTAB, flags=0,
                                         link=4, info=2, entsize=24),
                                     Sec('.strtab', strtab, type=SHT_STRTAB, flags=0),
                                     Sec('.rela.eh_frame', rela(0x20, 2, 2, 4) + rela(0x38, 1, 2, 4),
                                         type=SHT_RELA, link=3, info=2, entsize=24)], e_type=1))
    case('reloc_eh_odd_size', obj(eh, '.eh_frame', rela(0x20, 1, 2, 4) + b'\x01\x02\x03'))
    case('reloc_eh_entsize_0', obj(eh, '.eh_frame', rela(0x20, 1, 2, 4), entsize=0))
    # .debug_frame: CIE pointers (R_X86_64_32 against the section) and pcs (R_X86_64_64).
    case('reloc_debug', obj(dbg, '.debug_frame', rela(0x1c, 1, 1, 0x40) + rela(0x34, 1, 1, 0x60) +
                            rela(0x18, 0, 10, 0)))
    for t in (1, 2, 10, 11, 24):
        case(f'reloc_debug_type_{t}', obj(dbg, '.debug_frame', rela(0x1c, 2, t, 0x1000)))


def mutation_cases(count):
    """Seeded random damage to rich sections: bytes overwritten, inserted, deleted, cut."""
    import random
    rnd = random.Random(15)
    prog = (bytes([0x41, 0x0e, 0x10, 0x86, 0x02, 0x0a, 0x41, 0x0d, 0x06, 0x83, 0x03, 0x0b,
                   ADV2, 0x10, 0x00, 0x10, 0x07, 0x02, 0x77, 0x08, 0x16, 0x0c, 0x01, 0x30,
                   0x09, 0x0c, 0x05, 0x2e, 0x10, 0x11, 0x0d, 0x7c, 0x0f, 0x03, 0x77, 0x08, 0x06,
                   ADV1, 0x05, 0x14, 0x0e, 0x02, 0x0b, 0x41, 0x08, 0x03, 0xc6, 0x41]))
    bases = []
    for eh in (True, False):
        aug = b'zR' if eh else b''
        fk = {} if eh else {'pc': u64(0x401000), 'rng': u64(0x40), 'aug': False}
        bases.append((eh, frame_section([
            Cie(aug=aug), Fde(0, insns=prog, **fk), Fde(0, insns=prog[:20], **fk),
            Cie(aug=b'zPLR' if eh else b'', augdata=b'\x9b' + u32(0x1000) + b'\x1b\x1b' if eh
                else b'', insns=bytes([DEF_CFA, 7, 8, 0x90, 1, REMEMBER])),
            Fde(3, insns=prog[10:], augdata=u32(0) if eh else b'', **fk),
            Fde(0, insns=b'\x41', **fk), Raw(b'\0' * 4)], eh)))
    for i in range(count):
        eh, data = bases[i % 2]
        b = bytearray(data)
        for _ in range(rnd.randint(1, 4)):
            if not b:
                b = bytearray(b'\x01')
            kind = rnd.randrange(5)
            at = rnd.randrange(len(b))
            if kind == 0:
                b[at] = rnd.randrange(256)
            elif kind == 1:
                b[at] = rnd.choice((0x00, 0xff, 0x80, 0x7f, 0x40, 0xc0))
            elif kind == 2:
                b[at:at] = bytes(rnd.randrange(256) for _ in range(rnd.randint(1, 3)))
            elif kind == 3:
                del b[at:at + rnd.randint(1, 3)]
            else:
                del b[at:]
        case(f'mutant_{i:04d}_{"eh" if eh else "debug"}', image(bytes(b) or b'\x01', eh))


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    register_cases()
    encoding_cases()
    cie_cases()
    program_cases()
    entry_cases()
    section_cases()
    relocation_cases()
    mutation_cases(int(sys.argv[2]) if len(sys.argv) > 2 else 300)
    for name, data in CASES.items():
        with open(os.path.join(out, name), 'wb') as f:
            f.write(data)
    print(len(CASES))


if __name__ == '__main__':
    main()
