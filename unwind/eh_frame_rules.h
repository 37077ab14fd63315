// The call-frame rule of one code address on x86-64, as unwind/fast_unwind.h uses it, and where it comes
// from: the module's .eh_frame (found through .eh_frame_hdr's search table), run through a CFA interpreter that
// knows the rules gcc and clang emit for ordinary code and nothing more. Anything else is Unsupported, and the
// walk then leaves the stack to libunwind.
#pragma once

#include <cstdint>

namespace gmt::unwind::rules {

enum class CfaKind : uint8_t {
  SpPlus,       // CFA = rsp + offset
  BpPlus,       // CFA = rbp + offset
  DerefBp,      // CFA = *(rbp + offset): gcc's stack realignment (DW_OP_breg6 offset; DW_OP_deref)
  EndOfStack,   // the return address is undefined: the outermost frame (_start, clone3)
  Unsupported,  // anything else: the walk gives up
};
enum class BpKind : uint8_t {
  Unchanged,  // the caller's rbp is this frame's rbp
  AtCfa,      // saved at CFA + offset
  AtBp,       // saved at rbp + offset (DW_CFA_expression: DW_OP_breg6 offset), with stack realignment
};

// One 64-bit word, so that a table slot is a key and a rule, read without decoding work on the hot path:
// bits 0-31 the CFA offset, 32-47 the rbp offset, 48-51 the CfaKind, 52-55 the BpKind. The return address is
// always at CFA - 8 (x86-64 psABI; anything else is Unsupported).
using Rule = uint64_t;
inline int32_t cfa_offset_of(Rule rule) { return static_cast<int32_t>(rule); }
inline int16_t bp_offset_of(Rule rule) { return static_cast<int16_t>(rule >> 32); }
inline CfaKind cfa_kind_of(Rule rule) { return static_cast<CfaKind>((rule >> 48) & 0xf); }
inline BpKind bp_kind_of(Rule rule) { return static_cast<BpKind>((rule >> 52) & 0xf); }

inline Rule make_rule(CfaKind cfa, int64_t cfa_offset, BpKind bp, int64_t bp_offset) {
  if (cfa_offset != static_cast<int32_t>(cfa_offset) || bp_offset != static_cast<int16_t>(bp_offset)) {
    cfa = CfaKind::Unsupported;
  }
  return static_cast<uint32_t>(static_cast<int32_t>(cfa_offset)) |
         (static_cast<uint64_t>(static_cast<uint16_t>(static_cast<int16_t>(bp_offset))) << 32) |
         (static_cast<uint64_t>(cfa) << 48) | (static_cast<uint64_t>(bp) << 52);
}

inline Rule unsupported() { return make_rule(CfaKind::Unsupported, 0, BpKind::Unchanged, 0); }

// The rule of the frame whose code is at `pc` (an exact instruction address: the return address minus one for
// calling frames). Reads the loader's module list (dl_iterate_phdr) and the module's unwind tables: for a
// cache miss, never per frame.
Rule rule_from_eh_frame(uintptr_t pc);

}  // namespace gmt::unwind::rules
