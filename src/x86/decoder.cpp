// x86::Decoder: Zydis instructions to arch-neutral stack and control-flow facts.
#include "x86/decoder.hpp"

#include <Zydis/Zydis.h>
#include <fmt/format.h>

#include <algorithm>

#include "x86/zydis_registers.hpp"

namespace ehelf::x86 {
namespace {

constexpr ZydisMachineMode kMode = ZYDIS_MACHINE_MODE_LONG_64;

// A 64-bit general-purpose register operand (not eax, not ax).
Reg gpr64(const ZydisDecodedOperand& op) {
  if (op.type != ZYDIS_OPERAND_TYPE_REGISTER || op.size != 64) return Reg::none;
  return gpr(op.reg.value);
}

bool is_frame_reg(Reg r) {
  return r == Reg::rsp || r == Reg::rbp;
}

// A memory operand of the plain form disp(base): no index, no fs/gs, no rip. Returns the base.
Reg plain_memory_base(const ZydisDecodedOperand& op) {
  if (op.type != ZYDIS_OPERAND_TYPE_MEMORY || op.mem.index != ZYDIS_REGISTER_NONE) return Reg::none;
  if (op.mem.segment == ZYDIS_REGISTER_FS || op.mem.segment == ZYDIS_REGISTER_GS) return Reg::none;
  return gpr(op.mem.base); // rip and eip-relative forms give none
}

// Displacements beyond int32 cannot be encoded in 64-bit code; clamp defensively anyway.
int32_t disp32(int64_t v) {
  return int32_t(std::clamp<int64_t>(v, INT32_MIN, INT32_MAX));
}

bool is_power_of_two(uint64_t v) {
  return v != 0 && (v & (v - 1)) == 0;
}

class OpList {
public:
  explicit OpList(Instruction& insn) : insn_(insn) {}
  void add(StackOp::Kind kind, Reg reg = Reg::none, Reg base = Reg::none, int32_t disp = 0) {
    if (insn_.op_count < insn_.ops.size()) insn_.ops[insn_.op_count++] = {kind, reg, base, disp};
  }
  // Whether some op says what rsp (or rbp) becomes.
  bool defines(Reg r) const {
    for (unsigned i = 0; i < insn_.op_count; ++i) {
      const StackOp& op = insn_.ops[i];
      switch (op.kind) {
      case StackOp::Kind::rsp_add:
      case StackOp::Kind::rsp_align:
        if (r == Reg::rsp) return true;
        break;
      case StackOp::Kind::copy:
      case StackOp::Kind::load:
      case StackOp::Kind::unmodelled:
        if (op.reg == r) return true;
        break;
      case StackOp::Kind::store:
      case StackOp::Kind::push_memory:
        break;
      }
    }
    return false;
  }

private:
  Instruction& insn_;
};

Flow classify_flow(const ZydisDecodedInstruction& d, const ZydisDecodedOperand* ops,
                   Instruction& insn) {
  const bool far = d.meta.branch_type == ZYDIS_BRANCH_TYPE_FAR;
  auto direct_target = [&]() -> bool {
    if (d.operand_count_visible == 0) return false;
    const ZydisDecodedOperand& op = ops[0];
    if (op.type != ZYDIS_OPERAND_TYPE_IMMEDIATE || !op.imm.is_relative) return false;
    ZyanU64 target = 0;
    if (!ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&d, &op, insn.address, &target))) return false;
    insn.target = target;
    return true;
  };
  switch (d.mnemonic) {
  case ZYDIS_MNEMONIC_HLT:
  case ZYDIS_MNEMONIC_UD0:
  case ZYDIS_MNEMONIC_UD1:
  case ZYDIS_MNEMONIC_UD2:
  case ZYDIS_MNEMONIC_INT3:
  case ZYDIS_MNEMONIC_INT1:
    return Flow::trap;
  case ZYDIS_MNEMONIC_SYSCALL:
  case ZYDIS_MNEMONIC_SYSENTER:
    return Flow::syscall;
  case ZYDIS_MNEMONIC_INT:
    return d.operand_count_visible == 1 && ops[0].type == ZYDIS_OPERAND_TYPE_IMMEDIATE &&
                   ops[0].imm.value.u == 0x80
               ? Flow::syscall
               : Flow::other;
  case ZYDIS_MNEMONIC_XBEGIN:
    return direct_target() ? Flow::jump_conditional : Flow::other;
  default:
    break;
  }
  switch (d.meta.category) {
  case ZYDIS_CATEGORY_CALL:
    if (far) return Flow::other;
    return direct_target() ? Flow::call : Flow::call_indirect;
  case ZYDIS_CATEGORY_UNCOND_BR:
    if (far) return Flow::other;
    return direct_target() ? Flow::jump : Flow::jump_indirect;
  case ZYDIS_CATEGORY_COND_BR:
    return direct_target() ? Flow::jump_conditional : Flow::other;
  case ZYDIS_CATEGORY_RET:
    return d.mnemonic == ZYDIS_MNEMONIC_RET && !far ? Flow::ret : Flow::other;
  case ZYDIS_CATEGORY_SYSRET:
  case ZYDIS_CATEGORY_SYSCALL:
  case ZYDIS_CATEGORY_INTERRUPT:
    return Flow::other;
  default:
    return Flow::next;
  }
}

void stack_ops(const ZydisDecodedInstruction& d, const ZydisDecodedOperand* ops,
               Instruction& insn) {
  using K = StackOp::Kind;
  OpList out(insn);
  const unsigned n = d.operand_count_visible;
  const int width = d.operand_width / 8; // bytes moved by push/pop
  switch (d.mnemonic) {
  case ZYDIS_MNEMONIC_PUSH:
    if (n < 1) break;
    out.add(K::rsp_add, Reg::none, Reg::none, -width);
    if (width == 8) {
      Reg src = gpr64(ops[0]);
      Reg base = plain_memory_base(ops[0]);
      if (src != Reg::none && src != Reg::rsp) // push %rsp stores the value before the push
        out.add(K::store, src, Reg::rsp, 0);
      else if (base != Reg::none)
        // The address was computed before rsp moved: rebase rsp-relative forms.
        out.add(K::push_memory, Reg::none, base,
                disp32(ops[0].mem.disp.value + (base == Reg::rsp ? 8 : 0)));
      else
        out.add(K::store, Reg::none, Reg::rsp, 0);
    }
    break;
  case ZYDIS_MNEMONIC_PUSHF:
  case ZYDIS_MNEMONIC_PUSHFQ:
    out.add(K::rsp_add, Reg::none, Reg::none, -width);
    if (width == 8) out.add(K::store, Reg::none, Reg::rsp, 0);
    break;
  case ZYDIS_MNEMONIC_POP:
    if (n < 1) break;
    if (Reg dst = gpr64(ops[0]); dst == Reg::rsp) {
      out.add(K::unmodelled, Reg::rsp); // pop %rsp: rsp = the loaded value
      break;
    } else if (dst != Reg::none) {
      out.add(K::load, dst, Reg::rsp, 0);
    }
    out.add(K::rsp_add, Reg::none, Reg::none, width);
    break;
  case ZYDIS_MNEMONIC_POPF:
  case ZYDIS_MNEMONIC_POPFQ:
    out.add(K::rsp_add, Reg::none, Reg::none, width);
    break;
  case ZYDIS_MNEMONIC_LEAVE:
    out.add(K::copy, Reg::rsp, Reg::rbp, 0);
    out.add(K::load, Reg::rbp, Reg::rsp, 0);
    out.add(K::rsp_add, Reg::none, Reg::none, 8);
    break;
  case ZYDIS_MNEMONIC_ENTER:
    // enter $N,$0 is push %rbp; mov %rsp,%rbp; sub $N,%rsp. A nesting level copies frame
    // pointers: left unmodelled.
    if (n == 2 && ops[1].imm.value.u == 0) {
      out.add(K::rsp_add, Reg::none, Reg::none, -8);
      out.add(K::store, Reg::rbp, Reg::rsp, 0);
      out.add(K::copy, Reg::rbp, Reg::rsp, 0);
      out.add(K::rsp_add, Reg::none, Reg::none, -int32_t(ops[0].imm.value.u & 0xffff));
    }
    break;
  case ZYDIS_MNEMONIC_RET:
    if (insn.flow == Flow::ret && n == 1 && ops[0].type == ZYDIS_OPERAND_TYPE_IMMEDIATE)
      out.add(K::rsp_add, Reg::none, Reg::none, int32_t(ops[0].imm.value.u & 0xffff));
    break;
  case ZYDIS_MNEMONIC_ADD:
  case ZYDIS_MNEMONIC_SUB:
    // add/sub $imm,%rsp
    if (n == 2 && gpr64(ops[0]) == Reg::rsp && ops[1].type == ZYDIS_OPERAND_TYPE_IMMEDIATE) {
      int64_t v = ops[1].imm.value.s;
      out.add(K::rsp_add, Reg::none, Reg::none, disp32(d.mnemonic == ZYDIS_MNEMONIC_ADD ? v : -v));
    }
    break;
  case ZYDIS_MNEMONIC_AND:
    // and $-16,%rsp: realignment
    if (n == 2 && gpr64(ops[0]) == Reg::rsp && ops[1].type == ZYDIS_OPERAND_TYPE_IMMEDIATE &&
        ops[1].imm.value.s < 0 && is_power_of_two(uint64_t(-ops[1].imm.value.s)))
      out.add(K::rsp_align, Reg::none, Reg::none, disp32(-ops[1].imm.value.s));
    break;
  case ZYDIS_MNEMONIC_LEA:
    if (n == 2) {
      Reg dst = gpr64(ops[0]);
      Reg base = plain_memory_base(ops[1]);
      if (dst == Reg::none || base == Reg::none || d.address_width != 64) break;
      int32_t disp = disp32(ops[1].mem.disp.value);
      if (dst == Reg::rsp && base == Reg::rsp)
        out.add(K::rsp_add, Reg::none, Reg::none, disp); // lea disp(%rsp),%rsp
      else if (is_frame_reg(dst) || is_frame_reg(base))
        out.add(K::copy, dst, base, disp); // lea 8(%rsp),%r10; lea -8(%rbp),%rsp
    }
    break;
  case ZYDIS_MNEMONIC_MOV:
    if (n == 2) {
      Reg dst = gpr64(ops[0]);
      Reg src = gpr64(ops[1]);
      if (dst != Reg::none && src != Reg::none) {
        if (is_frame_reg(dst) || is_frame_reg(src)) out.add(K::copy, dst, src, 0);
      } else if (src != Reg::none && ops[0].size == 64) {
        Reg base = plain_memory_base(ops[0]);
        if (is_frame_reg(base)) out.add(K::store, src, base, disp32(ops[0].mem.disp.value));
      } else if (dst != Reg::none && ops[1].size == 64) {
        Reg base = plain_memory_base(ops[1]);
        if (is_frame_reg(base)) out.add(K::load, dst, base, disp32(ops[1].mem.disp.value));
      }
    }
    break;
  default:
    break;
  }
  // Calls and returns move rsp by the return address, which Flow says; anything else that
  // writes rsp or rbp without an op describing it is unmodelled.
  const bool moves_return_address =
      insn.flow == Flow::call || insn.flow == Flow::call_indirect || insn.flow == Flow::ret;
  if (insn.writes_reg(Reg::rsp) && !moves_return_address && !out.defines(Reg::rsp))
    out.add(K::unmodelled, Reg::rsp);
  if (insn.writes_reg(Reg::rbp) && !out.defines(Reg::rbp)) out.add(K::unmodelled, Reg::rbp);
}

void address_value(const ZydisDecodedInstruction& d, const ZydisDecodedOperand* ops,
                   Instruction& insn) {
  if (d.operand_count_visible != 2 || ops[0].type != ZYDIS_OPERAND_TYPE_REGISTER ||
      gpr(ops[0].reg.value) == Reg::none)
    return;
  const ZydisDecodedOperand& src = ops[1];
  if (d.mnemonic == ZYDIS_MNEMONIC_LEA && src.type == ZYDIS_OPERAND_TYPE_MEMORY &&
      src.mem.base == ZYDIS_REGISTER_RIP && src.mem.index == ZYDIS_REGISTER_NONE) {
    ZyanU64 value = 0;
    if (ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&d, &src, insn.address, &value))) {
      insn.address_value = value;
      insn.value_register = gpr(ops[0].reg.value);
    }
  } else if (d.mnemonic == ZYDIS_MNEMONIC_MOV && src.type == ZYDIS_OPERAND_TYPE_IMMEDIATE) {
    // A 32-bit destination zero-extends; a 64-bit one holds the (sign-extended) immediate.
    insn.address_value = ops[0].size == 64 ? src.imm.value.u : src.imm.value.u & 0xffffffffu;
    insn.address_value_immediate = true; // even for 0 (`mov $0,%edi`: a known argument)
    insn.value_register = gpr(ops[0].reg.value);
  }
}

// The GOT-style slot an indirect call or jump reads its target from, when the instruction
// names it by address (`call *disp(%rip)`, a PLT stub's `jmp *disp(%rip)`).
void indirect_slot(const ZydisDecodedInstruction& d, const ZydisDecodedOperand* ops,
                   Instruction& insn) {
  if (insn.flow != Flow::call_indirect && insn.flow != Flow::jump_indirect) return;
  if (d.operand_count_visible < 1 || ops[0].type != ZYDIS_OPERAND_TYPE_MEMORY ||
      ops[0].mem.base != ZYDIS_REGISTER_RIP || ops[0].mem.index != ZYDIS_REGISTER_NONE)
    return;
  ZyanU64 slot = 0;
  if (ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&d, &ops[0], insn.address, &slot)))
    insn.indirect_slot = slot;
}

std::string status_text(ZyanStatus s) {
  switch (s) {
  case ZYDIS_STATUS_NO_MORE_DATA:
    return "the instruction runs past the end of the code";
  case ZYDIS_STATUS_DECODING_ERROR:
    return "invalid instruction encoding";
  case ZYDIS_STATUS_INSTRUCTION_TOO_LONG:
    return "instruction longer than 15 bytes";
  case ZYDIS_STATUS_BAD_REGISTER:
    return "invalid register in the encoding";
  case ZYDIS_STATUS_ILLEGAL_LOCK:
    return "lock prefix not allowed on this instruction";
  case ZYDIS_STATUS_ILLEGAL_LEGACY_PFX:
    return "legacy prefix not allowed with this encoding";
  case ZYDIS_STATUS_ILLEGAL_REX:
    return "REX prefix not allowed with this encoding";
  case ZYDIS_STATUS_INVALID_MAP:
    return "invalid opcode map";
  case ZYDIS_STATUS_MALFORMED_EVEX:
  case ZYDIS_STATUS_MALFORMED_MVEX:
    return "malformed EVEX/MVEX prefix";
  case ZYDIS_STATUS_INVALID_MASK:
    return "invalid mask register";
  default:
    return fmt::format("Zydis status {:#x}", s);
  }
}

} // namespace

std::string_view reg_name(Reg r) {
  static constexpr std::string_view names[] = {"rax", "rcx", "rdx", "rbx", "rsp", "rbp",
                                               "rsi", "rdi", "r8",  "r9",  "r10", "r11",
                                               "r12", "r13", "r14", "r15", "none"};
  return names[std::min<unsigned>(unsigned(r), kGprCount)];
}

std::string_view flow_name(Flow f) {
  static constexpr std::string_view names[] = {
      "next",          "call", "call_indirect", "jump", "jump_conditional",
      "jump_indirect", "ret",  "syscall",       "trap", "other"};
  return names[unsigned(f)];
}

int32_t Instruction::rsp_delta() const {
  int32_t delta = 0;
  for (unsigned i = 0; i < op_count; ++i)
    if (ops[i].kind == StackOp::Kind::rsp_add) delta += ops[i].disp;
  return delta;
}

struct Decoder::State {
  ZydisDecoder decoder;
  ZydisFormatter formatter;
};

Decoder::Decoder() : state_(std::make_unique<State>()) {
  ZydisDecoderInit(&state_->decoder, kMode, ZYDIS_STACK_WIDTH_64);
  ZydisFormatterInit(&state_->formatter, ZYDIS_FORMATTER_STYLE_ATT);
  // objdump's look: lower-case hex, no zero padding ("call 0x401020", "-0x8(%rbp)", "$0x28").
  ZydisFormatter* f = &state_->formatter;
  ZydisFormatterSetProperty(f, ZYDIS_FORMATTER_PROP_HEX_UPPERCASE, ZYAN_FALSE);
  for (ZydisFormatterProperty p :
       {ZYDIS_FORMATTER_PROP_ADDR_PADDING_ABSOLUTE, ZYDIS_FORMATTER_PROP_ADDR_PADDING_RELATIVE,
        ZYDIS_FORMATTER_PROP_DISP_PADDING, ZYDIS_FORMATTER_PROP_IMM_PADDING})
    ZydisFormatterSetProperty(f, p, ZYDIS_PADDING_DISABLED);
}

Decoder::~Decoder() = default;

Result<Instruction> Decoder::decode(std::span<const uint8_t> code, uint64_t address) const {
  ZydisDecodedInstruction d;
  ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
  ZyanStatus status =
      ZydisDecoderDecodeFull(&state_->decoder, code.data(),
                             std::min<size_t>(code.size(), ZYDIS_MAX_INSTRUCTION_LENGTH), &d, ops);
  if (!ZYAN_SUCCESS(status))
    return Error::at("", address,
                     fmt::format("cannot decode the instruction: {}", status_text(status)));
  Instruction insn;
  insn.address = address;
  insn.length = d.length;
  for (unsigned i = 0; i < d.operand_count; ++i) {
    const ZydisDecodedOperand& op = ops[i];
    if (op.type != ZYDIS_OPERAND_TYPE_REGISTER || !(op.actions & ZYDIS_OPERAND_ACTION_MASK_WRITE))
      continue;
    if (Reg r = gpr(op.reg.value); r != Reg::none) insn.writes |= uint16_t(1u << unsigned(r));
  }
  insn.flow = classify_flow(d, ops, insn);
  insn.padding = d.mnemonic == ZYDIS_MNEMONIC_NOP || d.mnemonic == ZYDIS_MNEMONIC_INT3;
  // The kernel returns the system call's result in rax (Zydis lists rax as read only).
  if (insn.flow == Flow::syscall) insn.writes |= uint16_t(1u << unsigned(Reg::rax));
  stack_ops(d, ops, insn);
  address_value(d, ops, insn);
  indirect_slot(d, ops, insn);
  return insn;
}

std::string Decoder::format(std::span<const uint8_t> code, uint64_t address) const {
  ZydisDecodedInstruction d;
  ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
  if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(
          &state_->decoder, code.data(),
          std::min<size_t>(code.size(), ZYDIS_MAX_INSTRUCTION_LENGTH), &d, ops)))
    return "(bad)";
  char text[256];
  if (!ZYAN_SUCCESS(ZydisFormatterFormatInstruction(&state_->formatter, &d, ops,
                                                    d.operand_count_visible, text, sizeof text,
                                                    address, nullptr)))
    return "(bad)";
  return text;
}

} // namespace ehelf::x86
