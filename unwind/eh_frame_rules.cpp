// See eh_frame_rules.h. The reader of .eh_frame records (pointer encodings, CIE and FDE), the CFA program's
// interpreter for the registers the walk needs (the CFA, rbp and the return address), and the lookup of a
// code address's FDE through its module's .eh_frame_hdr.
#include "unwind/eh_frame_rules.h"

#if defined(__x86_64__) && defined(__linux__)

#include <link.h>

#include <cstring>

#include "unwind/module_ranges.h"

namespace gmt::unwind::rules {
namespace {

// ---- reading .eh_frame ---------------------------------------------------------------------------------------

// DWARF register numbers on x86-64 (System V psABI) and the encodings and opcodes used below (DWARF 4, LSB
// "Exception Frames").
constexpr unsigned kRegRbp = 6, kRegRsp = 7;
enum : uint8_t {
  kPeOmit = 0xff,
  kPeAbsptr = 0x00,
  kPeUleb = 0x01,
  kPeUdata2 = 0x02,
  kPeUdata4 = 0x03,
  kPeUdata8 = 0x04,
  kPeSleb = 0x09,
  kPeSdata2 = 0x0a,
  kPeSdata4 = 0x0b,
  kPeSdata8 = 0x0c,
  kPePcrel = 0x10,
  kPeDatarel = 0x30,
  kPeIndirect = 0x80,
};

struct Reader {
  const uint8_t* p;
  const uint8_t* end;
  bool ok = true;

  bool has(size_t n) {
    if (static_cast<size_t>(end - p) < n) ok = false;
    return ok;
  }
  template <typename T>
  T fixed() {
    T value{};
    if (!has(sizeof(T))) return value;
    std::memcpy(&value, p, sizeof(T));
    p += sizeof(T);
    return value;
  }
  uint64_t uleb() {
    uint64_t value = 0;
    for (unsigned shift = 0; has(1); shift += 7) {
      uint8_t byte = *p++;
      if (shift < 64) value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if (!(byte & 0x80)) return value;
    }
    return value;
  }
  int64_t sleb() {
    int64_t value = 0;
    unsigned shift = 0;
    for (uint8_t byte = 0x80; (byte & 0x80) && has(1); shift += 7) {
      byte = *p++;
      if (shift < 64) value |= static_cast<int64_t>(byte & 0x7f) << shift;
      if (!(byte & 0x80) && (byte & 0x40) && shift + 7 < 64) value |= -(int64_t{1} << (shift + 7));
    }
    return value;
  }
  // A pointer in the encoding `encoding`; `data_base` is what DW_EH_PE_datarel is relative to.
  uint64_t pointer(uint8_t encoding, uint64_t data_base = 0) {
    if (encoding == kPeOmit) return 0;
    const auto field = reinterpret_cast<uint64_t>(p);
    uint64_t value = 0;
    switch (encoding & 0x0f) {
      case kPeAbsptr: value = fixed<uint64_t>(); break;
      case kPeUleb: value = uleb(); break;
      case kPeUdata2: value = fixed<uint16_t>(); break;
      case kPeUdata4: value = fixed<uint32_t>(); break;
      case kPeUdata8: value = fixed<uint64_t>(); break;
      case kPeSleb: value = static_cast<uint64_t>(sleb()); break;
      case kPeSdata2: value = static_cast<uint64_t>(int64_t{fixed<int16_t>()}); break;
      case kPeSdata4: value = static_cast<uint64_t>(int64_t{fixed<int32_t>()}); break;
      case kPeSdata8: value = fixed<uint64_t>(); break;
      default: ok = false; return 0;
    }
    switch (encoding & 0x70) {
      case 0: break;
      case kPePcrel: value += field; break;
      case kPeDatarel: value += data_base; break;
      default: ok = false; return 0;  // textrel, funcrel, aligned: not used on x86-64 Linux
    }
    if (encoding & kPeIndirect) {
      if (value == 0)
        ok = false;
      else
        std::memcpy(&value, reinterpret_cast<const void*>(value), sizeof(value));
    }
    return value;
  }
};

// A length-prefixed .eh_frame record (CIE or FDE): its body and where the next one starts.
bool record_at(const uint8_t* at, Reader& body) {
  Reader r{at, at + 12};
  uint64_t length = r.fixed<uint32_t>();
  if (length == 0xffffffffu) length = r.fixed<uint64_t>();
  if (!r.ok || length == 0) return false;
  body = Reader{r.p, r.p + length};
  return true;
}

// The register rules the walk needs, while a CFA program runs.
struct RegisterRule {
  enum Kind : uint8_t { SameValue, Undefined, Offset, BpExpression, Other } kind = SameValue;
  int64_t offset = 0;
};
struct CfiState {
  CfaKind cfa = CfaKind::Unsupported;
  unsigned cfa_register = kRegRsp;
  int64_t cfa_offset = 0;
  RegisterRule bp;
  RegisterRule ra;
};

// DW_OP_breg6 (rbp) <sleb offset>, optionally followed by DW_OP_deref, and nothing else.
bool parse_bp_expression(Reader& r, bool want_deref, int64_t& offset) {
  uint64_t length = r.uleb();
  if (!r.has(length)) return false;
  Reader e{r.p, r.p + length};
  r.p += length;
  if (e.fixed<uint8_t>() != 0x70 + kRegRbp) return false;
  offset = e.sleb();
  if (want_deref && e.fixed<uint8_t>() != 0x06) return false;
  return e.ok && e.p == e.end;
}

struct Cie {
  uint64_t code_align = 1;
  int64_t data_align = -8;
  unsigned ra_register = 16;
  uint8_t fde_encoding = kPeAbsptr;
  bool augmented = false;     // 'z': FDEs carry an augmentation-data length
  bool signal_frame = false;  // 'S'
  Reader instructions{nullptr, nullptr};
};

bool parse_cie(Reader body, Cie& cie) {
  if (body.fixed<uint32_t>() != 0) return false;  // CIE id: 0 in .eh_frame
  uint8_t version = body.fixed<uint8_t>();
  if (version != 1 && version != 3) return false;
  const char* augmentation = reinterpret_cast<const char*>(body.p);
  size_t aug_length = strnlen(augmentation, static_cast<size_t>(body.end - body.p));
  if (!body.has(aug_length + 1)) return false;
  body.p += aug_length + 1;
  cie.code_align = body.uleb();
  cie.data_align = body.sleb();
  cie.ra_register = version == 1 ? body.fixed<uint8_t>() : static_cast<unsigned>(body.uleb());
  if (augmentation[0] == 'z') {
    cie.augmented = true;
    uint64_t data_length = body.uleb();
    if (!body.has(data_length)) return false;
    Reader data{body.p, body.p + data_length};
    body.p += data_length;
    for (size_t i = 1; i < aug_length; ++i) {
      switch (augmentation[i]) {
        case 'R': cie.fde_encoding = data.fixed<uint8_t>(); break;
        case 'P': data.pointer(data.fixed<uint8_t>() & ~kPeIndirect); break;  // personality: skipped
        case 'L': data.fixed<uint8_t>(); break;
        case 'S': cie.signal_frame = true; break;
        default: return false;  // an augmentation we do not know changes the layout: give up
      }
    }
    if (!data.ok) return false;
  } else if (aug_length != 0) {
    return false;
  }
  cie.instructions = body;
  return body.ok;
}

// Runs a CFA program until the location passes `target`. `initial` is the state after the CIE's
// instructions (what DW_CFA_restore returns to). Returns false on anything this walker does not handle.
bool run_cfa_program(Reader r, const Cie& cie, uint64_t location, uint64_t target, CfiState& state,
                     const CfiState& initial) {
  constexpr int kMaxRemembered = 8;
  CfiState remembered[kMaxRemembered];
  int depth = 0;
  auto rule_of = [&](uint64_t reg) -> RegisterRule* {
    if (reg == kRegRbp) return &state.bp;
    if (reg == cie.ra_register) return &state.ra;
    return nullptr;  // a register the walk does not need
  };
  auto initial_rule_of = [&](uint64_t reg) -> RegisterRule { return reg == kRegRbp ? initial.bp : initial.ra; };
  while (r.ok && r.p < r.end) {
    uint8_t op = r.fixed<uint8_t>();
    uint8_t low = op & 0x3f;
    switch (op >> 6) {
      case 1:  // DW_CFA_advance_loc
        location += low * cie.code_align;
        if (location > target) return true;
        continue;
      case 2:  // DW_CFA_offset
        if (RegisterRule* rule = rule_of(low)) {
          *rule = {RegisterRule::Offset, static_cast<int64_t>(r.uleb()) * cie.data_align};
        } else {
          r.uleb();
        }
        continue;
      case 3:  // DW_CFA_restore
        if (RegisterRule* rule = rule_of(low)) *rule = initial_rule_of(low);
        continue;
      default: break;
    }
    switch (op) {
      case 0x00: break;  // DW_CFA_nop
      case 0x01:         // DW_CFA_set_loc
        location = r.pointer(cie.fde_encoding);
        if (location > target) return true;
        break;
      case 0x02:
      case 0x03:
      case 0x04: {  // DW_CFA_advance_loc1/2/4
        uint64_t delta = op == 0x02 ? r.fixed<uint8_t>() : op == 0x03 ? r.fixed<uint16_t>() : r.fixed<uint32_t>();
        location += delta * cie.code_align;
        if (location > target) return true;
        break;
      }
      case 0x05: {  // DW_CFA_offset_extended
        uint64_t reg = r.uleb();
        int64_t offset = static_cast<int64_t>(r.uleb()) * cie.data_align;
        if (RegisterRule* rule = rule_of(reg)) *rule = {RegisterRule::Offset, offset};
        break;
      }
      case 0x11: {  // DW_CFA_offset_extended_sf
        uint64_t reg = r.uleb();
        int64_t offset = r.sleb() * cie.data_align;
        if (RegisterRule* rule = rule_of(reg)) *rule = {RegisterRule::Offset, offset};
        break;
      }
      case 0x2f: {  // DW_CFA_GNU_negative_offset_extended
        uint64_t reg = r.uleb();
        int64_t offset = -static_cast<int64_t>(r.uleb()) * cie.data_align;
        if (RegisterRule* rule = rule_of(reg)) *rule = {RegisterRule::Offset, offset};
        break;
      }
      case 0x06: {  // DW_CFA_restore_extended
        uint64_t reg = r.uleb();
        if (RegisterRule* rule = rule_of(reg)) *rule = initial_rule_of(reg);
        break;
      }
      case 0x07: {  // DW_CFA_undefined
        if (RegisterRule* rule = rule_of(r.uleb())) *rule = {RegisterRule::Undefined, 0};
        break;
      }
      case 0x08: {  // DW_CFA_same_value
        if (RegisterRule* rule = rule_of(r.uleb())) *rule = {RegisterRule::SameValue, 0};
        break;
      }
      case 0x09: {  // DW_CFA_register: a value kept in another register
        uint64_t reg = r.uleb();
        r.uleb();
        if (RegisterRule* rule = rule_of(reg)) *rule = {RegisterRule::Other, 0};
        break;
      }
      case 0x0a:  // DW_CFA_remember_state
        if (depth == kMaxRemembered) return false;
        remembered[depth++] = state;
        break;
      case 0x0b:  // DW_CFA_restore_state
        if (depth == 0) return false;
        state = remembered[--depth];
        break;
      case 0x0c:  // DW_CFA_def_cfa
        state.cfa_register = static_cast<unsigned>(r.uleb());
        state.cfa_offset = static_cast<int64_t>(r.uleb());
        state.cfa = CfaKind::SpPlus;  // resolved from cfa_register at the end
        break;
      case 0x12:  // DW_CFA_def_cfa_sf
        state.cfa_register = static_cast<unsigned>(r.uleb());
        state.cfa_offset = r.sleb() * cie.data_align;
        state.cfa = CfaKind::SpPlus;
        break;
      case 0x0d:  // DW_CFA_def_cfa_register
        state.cfa_register = static_cast<unsigned>(r.uleb());
        if (state.cfa == CfaKind::DerefBp) state.cfa = CfaKind::Unsupported;  // undefined by DWARF
        break;
      case 0x0e:  // DW_CFA_def_cfa_offset (only meaningful after a register rule, DWARF 5 6.4.2.2)
        state.cfa_offset = static_cast<int64_t>(r.uleb());
        if (state.cfa == CfaKind::DerefBp) state.cfa = CfaKind::Unsupported;
        break;
      case 0x13:  // DW_CFA_def_cfa_offset_sf
        state.cfa_offset = r.sleb() * cie.data_align;
        if (state.cfa == CfaKind::DerefBp) state.cfa = CfaKind::Unsupported;
        break;
      case 0x0f: {  // DW_CFA_def_cfa_expression
        int64_t offset = 0;
        if (!parse_bp_expression(r, /*want_deref=*/true, offset)) return false;
        state.cfa = CfaKind::DerefBp;
        state.cfa_offset = offset;
        break;
      }
      case 0x10: {  // DW_CFA_expression: the register is saved at the address the expression computes
        uint64_t reg = r.uleb();
        if (reg == kRegRbp) {
          int64_t offset = 0;
          if (!parse_bp_expression(r, /*want_deref=*/false, offset)) return false;
          state.bp = {RegisterRule::BpExpression, offset};
        } else {
          uint64_t length = r.uleb();
          if (!r.has(length)) return false;
          r.p += length;
          if (RegisterRule* rule = rule_of(reg)) *rule = {RegisterRule::Other, 0};
        }
        break;
      }
      case 0x14:
      case 0x15:
      case 0x16: {  // DW_CFA_val_offset(_sf), DW_CFA_val_expression
        uint64_t reg = r.uleb();
        if (op == 0x16) {
          uint64_t length = r.uleb();
          if (!r.has(length)) return false;
          r.p += length;
        } else if (op == 0x14) {
          r.uleb();
        } else {
          r.sleb();
        }
        if (RegisterRule* rule = rule_of(reg)) *rule = {RegisterRule::Other, 0};
        break;
      }
      case 0x2e:  // DW_CFA_GNU_args_size: only matters to exception handling
        r.uleb();
        break;
      default: return false;
    }
  }
  return r.ok;
}

// The frame-description entry of `pc` through the module's .eh_frame_hdr search table.
struct FdeSearch {
  uintptr_t pc;
  const uint8_t* hdr = nullptr;  // the module's PT_GNU_EH_FRAME
  bool in_module = false;
};

const uint8_t* find_fde(uintptr_t pc) {
  FdeSearch search{pc};
  for_each_module([&search](const LoadedModule& module) {
    if (!module.range.contains(search.pc)) return false;
    // A segment of the module holds pc (not a gap between two of them): its .eh_frame_hdr describes pc.
    const dl_phdr_info& info = *module.info;
    const uint8_t* hdr = nullptr;
    bool holds = false;
    for (int i = 0; i < info.dlpi_phnum; ++i) {
      const ElfW(Phdr)& ph = info.dlpi_phdr[i];
      uintptr_t start = info.dlpi_addr + ph.p_vaddr;
      if (ph.p_type == PT_LOAD && search.pc >= start && search.pc < start + ph.p_memsz) holds = true;
      if (ph.p_type == PT_GNU_EH_FRAME) hdr = reinterpret_cast<const uint8_t*>(start);
    }
    if (!holds) return false;
    search.in_module = true;
    search.hdr = hdr;
    return true;
  });
  if (!search.hdr) return nullptr;
  const uint8_t* hdr = search.hdr;
  const auto hdr_base = reinterpret_cast<uint64_t>(hdr);
  Reader r{hdr, hdr + 4 + 8 + 8};
  uint8_t version = r.fixed<uint8_t>();
  uint8_t frame_ptr_encoding = r.fixed<uint8_t>();
  uint8_t count_encoding = r.fixed<uint8_t>();
  uint8_t table_encoding = r.fixed<uint8_t>();
  if (version != 1 || table_encoding != (kPeDatarel | kPeSdata4)) return nullptr;
  r.pointer(frame_ptr_encoding, hdr_base);
  uint64_t count = r.pointer(count_encoding, hdr_base);
  if (!r.ok || count == 0) return nullptr;
  // Sorted pairs of (initial location, FDE address), both relative to the header.
  const auto* table = reinterpret_cast<const int32_t*>(r.p);
  uint64_t low = 0, high = count;  // the answer is the last entry whose location <= pc
  while (high - low > 1) {
    uint64_t mid = low + (high - low) / 2;
    if (hdr_base + static_cast<int64_t>(table[2 * mid]) <= pc)
      low = mid;
    else
      high = mid;
  }
  if (hdr_base + static_cast<int64_t>(table[2 * low]) > pc) return nullptr;
  return reinterpret_cast<const uint8_t*>(hdr_base + static_cast<int64_t>(table[2 * low + 1]));
}

}  // namespace

Rule rule_from_eh_frame(uintptr_t pc) {
  const uint8_t* fde_at = find_fde(pc);
  Reader fde{nullptr, nullptr};
  if (!fde_at || !record_at(fde_at, fde)) return unsupported();
  const uint8_t* id_field = fde.p;
  uint32_t cie_offset = fde.fixed<uint32_t>();
  Reader cie_body{nullptr, nullptr};
  Cie cie;
  if (cie_offset == 0 || !record_at(id_field - cie_offset, cie_body) || !parse_cie(cie_body, cie)) return unsupported();
  if (cie.signal_frame) return unsupported();
  uint64_t pc_begin = fde.pointer(cie.fde_encoding);
  uint64_t pc_range = fde.pointer(cie.fde_encoding & 0x0f);
  if (!fde.ok || pc < pc_begin || pc >= pc_begin + pc_range) return unsupported();
  if (cie.augmented) {
    uint64_t data_length = fde.uleb();
    if (!fde.has(data_length)) return unsupported();
    fde.p += data_length;
  }
  CfiState state;
  state.ra = {RegisterRule::SameValue, 0};
  if (!run_cfa_program(cie.instructions, cie, pc_begin, UINT64_MAX, state, state)) return unsupported();
  const CfiState initial = state;
  if (!run_cfa_program(fde, cie, pc_begin, pc, state, initial)) return unsupported();

  if (state.ra.kind == RegisterRule::Undefined) return make_rule(CfaKind::EndOfStack, 0, BpKind::Unchanged, 0);
  if (state.ra.kind != RegisterRule::Offset || state.ra.offset != -8) return unsupported();
  CfaKind cfa = state.cfa;
  if (cfa == CfaKind::SpPlus) {
    if (state.cfa_register == kRegRbp)
      cfa = CfaKind::BpPlus;
    else if (state.cfa_register != kRegRsp)
      return unsupported();
  }
  if (cfa == CfaKind::Unsupported) return unsupported();
  BpKind bp = BpKind::Unchanged;
  switch (state.bp.kind) {
    case RegisterRule::SameValue: break;
    case RegisterRule::Offset: bp = BpKind::AtCfa; break;
    case RegisterRule::BpExpression: bp = BpKind::AtBp; break;
    default: return unsupported();  // undefined or elsewhere: frames above might need it
  }
  return make_rule(cfa, state.cfa_offset, bp, state.bp.offset);
}

}  // namespace gmt::unwind::rules

#endif
