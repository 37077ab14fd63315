#include "analysis/read/symbolizer.h"

#include <cxxabi.h>
#include <dwarf.h>
#include <elfutils/libdwfl.h>
#include <fmt/core.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "analysis/read/symbols.h"

namespace gmt::analysis {
namespace {

constexpr size_t kProgressEvery = 1000;

// Offline mode: modules are opened by the paths the trace recorded, and separate debug info is looked up
// the standard way (build-id under /usr/lib/debug, .gnu_debuglink, and debuginfod when the user has set
// DEBUGINFOD_URLS). A null search path means libdw's default. Nothing is read from a live process.
char* g_debuginfo_path = nullptr;
const Dwfl_Callbacks kOfflineCallbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = &g_debuginfo_path,
};

struct DwflEnd {
  void operator()(Dwfl* dwfl) const { dwfl_end(dwfl); }
};

// One row of the modules table, plus its libdw session once a pc has needed it. Each module gets its own
// Dwfl: rows may overlap (a library unloaded and another loaded at the same address), which a single
// Dwfl address space could not hold, and one bad file cannot disturb the others.
struct Module {
  int64_t id = 0;
  std::string path;
  uint64_t base = 0;
  uint64_t end = 0;      // base + size, saturated
  std::string build_id;  // lower-case hex; empty when the trace recorded none
  enum class State { Unopened, Ready, Unusable } state = State::Unopened;
  std::unique_ptr<Dwfl, DwflEnd> dwfl;
  Dwfl_Module* dwfl_module = nullptr;
  // The line-lookup fallback's index (see cu_line), built on first need.
  struct CuRange {
    Dwarf_Addr low, high;  // DWARF addresses, i.e. without the bias
    Dwarf_Die cu;
  };
  bool cu_ranges_built = false;
  std::vector<CuRange> cu_ranges;
  Dwarf_Addr dwarf_bias = 0;
  // Per CU (by its DIE offset), the address ranges of its outermost inlined call sites (see
  // outermost_inline_call_site), sorted by start, collected on first need.
  struct InlineSite {
    Dwarf_Addr low, high;  // DWARF addresses
    std::string file;      // DW_AT_call_file, as the line table names it
    int64_t line;          // DW_AT_call_line
  };
  std::unordered_map<Dwarf_Off, std::vector<InlineSite>> inline_sites;
  // The function-name reuse (see function_name), built on first need.
  bool symbol_bounds_built = false;
  std::vector<uint64_t> symbol_bounds;  // every symbol's start and end address, sorted
  struct LastName {
    uint64_t address = 0;         // the address it was looked up for
    uint64_t begin = 0, end = 0;  // the sized symbol libdw chose: [begin, end) holds `address`
    std::optional<std::string> name;
    bool valid = false;
  } last;
};

std::string to_hex(const unsigned char* bytes, int length) {
  std::string hex;
  hex.reserve(static_cast<size_t>(length) * 2);
  for (int i = 0; i < length; ++i) hex += fmt::format("{:02x}", bytes[i]);
  return hex;
}

std::string lower(std::string text) {
  for (char& c : text) {
    if (c >= 'A' && c <= 'F') c = static_cast<char>(c - 'A' + 'a');
  }
  return text;
}

// Reports the file to libdw and checks that it is the very file the process had mapped. Returns false
// (never throws) for anything unusable, so a missing or damaged file costs only its own symbols.
bool open_module(Module& module) {
  // stat first: a FIFO or device named by a damaged trace would block or mislead libelf.
  struct stat st {};
  if (stat(module.path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;

  std::unique_ptr<Dwfl, DwflEnd> dwfl(dwfl_begin(&kOfflineCallbacks));
  if (!dwfl) return false;
  dwfl_report_begin(dwfl.get());
  // The recorded base is dl_iterate_phdr's dlpi_addr, the load bias (runtime address - file vaddr).
  // add_p_vaddr = true makes libdw take BASE as exactly that bias: for ET_DYN it places the first PT_LOAD at
  // base + p_vaddr. With false, libdw would take BASE as the address of the first PT_LOAD itself, which only
  // agrees when that segment's p_vaddr is 0 (true of most PIEs and libraries, not of prelinked or
  // -Ttext-segment ones). For ET_EXEC libdw ignores BASE and uses bias 0, matching dlpi_addr == 0.
  Dwfl_Module* mod = dwfl_report_elf(dwfl.get(), module.path.c_str(), module.path.c_str(), -1, module.base,
                                     /*add_p_vaddr=*/true);
  if (dwfl_report_end(dwfl.get(), nullptr, nullptr) != 0 || mod == nullptr) return false;

  // The bias libdw settled on must be the recorded one; otherwise (e.g. an ET_EXEC file recorded with a
  // nonzero base, so not the file that ran) every address would resolve to the wrong code.
  GElf_Addr bias = 0;
  if (dwfl_module_getelf(mod, &bias) == nullptr || bias != module.base) return false;

  // Same build-id, or no build-id on either side: a rebuilt binary at the same path must not lend its
  // symbols to the old one's pcs.
  const unsigned char* bits = nullptr;
  GElf_Addr bits_vaddr = 0;
  int length = dwfl_module_build_id(mod, &bits, &bits_vaddr);
  std::string file_build_id = length > 0 ? to_hex(bits, length) : std::string();
  if (file_build_id != module.build_id) return false;

  module.dwfl = std::move(dwfl);
  module.dwfl_module = mod;
  return true;
}

// The modules table sorted by base, with the largest end so far, so that a lookup can stop early even
// when ranges overlap.
class ModuleMap {
 public:
  explicit ModuleMap(std::vector<ModuleRow> rows) {
    for (ModuleRow& row : rows) {
      Module module;
      module.id = row.id;
      module.path = std::move(row.path);
      module.base = row.base;
      module.end = row.size > std::numeric_limits<uint64_t>::max() - module.base ? std::numeric_limits<uint64_t>::max()
                                                                                 : module.base + row.size;
      module.build_id = lower(std::move(row.build_id));
      modules_.push_back(std::move(module));
    }
    std::sort(modules_.begin(), modules_.end(),
              [](const Module& a, const Module& b) { return a.base != b.base ? a.base < b.base : a.id < b.id; });
    uint64_t max_end = 0;
    for (const Module& module : modules_) {
      max_end = std::max(max_end, module.end);
      max_end_.push_back(max_end);
    }
  }

  // The module containing address. Where recorded ranges overlap, the one with the highest base wins;
  // the trace has no load/unload times to do better.
  Module* find(uint64_t address) {
    auto it = std::upper_bound(modules_.begin(), modules_.end(), address,
                               [](uint64_t value, const Module& module) { return value < module.base; });
    for (size_t i = static_cast<size_t>(it - modules_.begin()); i-- > 0;) {
      if (max_end_[i] <= address) break;
      if (address < modules_[i].end) return &modules_[i];
    }
    return nullptr;
  }

 private:
  std::vector<Module> modules_;
  std::vector<uint64_t> max_end_;
};

std::string demangle(const char* name) {
  // Only Itanium-mangled names: C symbols stay as they are, and a name that merely starts with _Z but
  // does not demangle is kept raw rather than dropped.
  if (name[0] == '_' && name[1] == 'Z') {
    int status = 0;
    std::unique_ptr<char, decltype(&std::free)> out(abi::__cxa_demangle(name, nullptr, nullptr, &status), &std::free);
    if (status == 0 && out) return out.get();
  }
  return name;
}

// dwfl_module_getsrc finds the CU through .debug_aranges only (so in elfutils 0.188; newer releases may
// fall back themselves), and clang emits no .debug_aranges unless given -gdwarf-aranges: clang-built code
// would get no lines at all. So, when it finds nothing, look the CU up by its own DW_AT_low_pc/high_pc or
// DW_AT_ranges, indexed once per module. Returns the CU's DIE and sets *dwarf_address (address without the bias);
// nullptr when no CU holds the address.
Dwarf_Die* cu_holding(Module& module, uint64_t address, Dwarf_Addr* dwarf_address) {
  if (!module.cu_ranges_built) {
    module.cu_ranges_built = true;
    Dwarf* dwarf = dwfl_module_getdwarf(module.dwfl_module, &module.dwarf_bias);
    Dwarf_CU* cu = nullptr;
    Dwarf_Die cu_die;
    Dwarf_Half version = 0;
    uint8_t unit_type = 0;
    while (dwarf != nullptr && dwarf_get_units(dwarf, cu, &cu, &version, &unit_type, &cu_die, nullptr) == 0) {
      if (unit_type != DW_UT_compile) continue;
      Dwarf_Addr base = 0, low = 0, high = 0;
      for (ptrdiff_t offset = 0; (offset = dwarf_ranges(&cu_die, offset, &base, &low, &high)) > 0;) {
        if (low < high) module.cu_ranges.push_back({low, high, cu_die});
      }
    }
    std::sort(module.cu_ranges.begin(), module.cu_ranges.end(),
              [](const Module::CuRange& a, const Module::CuRange& b) { return a.low < b.low; });
  }
  *dwarf_address = address - module.dwarf_bias;
  auto it = std::upper_bound(module.cu_ranges.begin(), module.cu_ranges.end(), *dwarf_address,
                             [](Dwarf_Addr value, const Module::CuRange& range) { return value < range.low; });
  if (it == module.cu_ranges.begin() || *dwarf_address >= std::prev(it)->high) return nullptr;
  return &std::prev(it)->cu;
}

Dwarf_Line* cu_line(Module& module, uint64_t address) {
  Dwarf_Addr dwarf_address = 0;
  Dwarf_Die* cu = cu_holding(module, address, &dwarf_address);
  return cu != nullptr ? dwarf_getsrc_die(cu, dwarf_address) : nullptr;
}

// The code at an address may be inlined from another function (a header's, a library template's): the line
// table then gives the innermost inlined code's line, e.g. a line of nvtxExtImplMem_v1.h, while `function` is
// the ELF symbol, the physical function it was inlined into. The frame is the physical function's, so its line
// is the outermost inlined call site's (DW_AT_call_file/DW_AT_call_line of the outermost
// DW_TAG_inlined_subroutine holding the address): where that function's own code made the call.
//
// dwarf_getscopes answers that per address by walking the CU's DIE tree each time (4 ms per pc in a large test
// binary), so each CU's outermost inlined call sites are collected once, in one walk, and looked up by address.
void collect_inline_sites(Dwarf_Die* die, Dwarf_Files* files, size_t file_count,
                          std::vector<Module::InlineSite>& sites) {
  Dwarf_Die child;
  if (dwarf_child(die, &child) != 0) return;
  do {
    if (dwarf_tag(&child) != DW_TAG_inlined_subroutine) {
      collect_inline_sites(&child, files, file_count, sites);  // functions, lexical blocks: look inside
      continue;
    }
    // An outermost one: the ones inside it are further from the physical function, not looked at.
    Dwarf_Attribute attribute;
    Dwarf_Word file_index = 0, line = 0;
    if (dwarf_attr(&child, DW_AT_call_file, &attribute) == nullptr || dwarf_formudata(&attribute, &file_index) != 0 ||
        dwarf_attr(&child, DW_AT_call_line, &attribute) == nullptr || dwarf_formudata(&attribute, &line) != 0 ||
        line == 0 || file_index >= file_count) {
      continue;
    }
    const char* file = dwarf_filesrc(files, file_index, nullptr, nullptr);
    if (file == nullptr || *file == '\0') continue;
    Dwarf_Addr base = 0, low = 0, high = 0;
    for (ptrdiff_t offset = 0; (offset = dwarf_ranges(&child, offset, &base, &low, &high)) > 0;) {
      if (low < high) sites.push_back({low, high, file, static_cast<int64_t>(line)});
    }
  } while (dwarf_siblingof(&child, &child) == 0);
}

std::optional<std::pair<std::string, int64_t>> outermost_inline_call_site(Module& module, uint64_t address) {
  Dwarf_Addr bias = 0;
  Dwarf_Addr dwarf_address = 0;
  Dwarf_Die* cu = dwfl_module_addrdie(module.dwfl_module, address, &bias);
  if (cu != nullptr) {
    dwarf_address = address - bias;
  } else {
    cu = cu_holding(module, address, &dwarf_address);
    if (cu == nullptr) return std::nullopt;
  }
  auto [entry, inserted] = module.inline_sites.try_emplace(dwarf_dieoffset(cu));
  std::vector<Module::InlineSite>& sites = entry->second;
  if (inserted) {
    Dwarf_Files* files = nullptr;
    size_t file_count = 0;
    if (dwarf_getsrcfiles(cu, &files, &file_count) == 0) collect_inline_sites(cu, files, file_count, sites);
    std::sort(sites.begin(), sites.end(),
              [](const Module::InlineSite& a, const Module::InlineSite& b) { return a.low < b.low; });
  }
  auto it = std::upper_bound(sites.begin(), sites.end(), dwarf_address,
                             [](Dwarf_Addr value, const Module::InlineSite& site) { return value < site.low; });
  if (it == sites.begin() || dwarf_address >= std::prev(it)->high) return std::nullopt;
  return std::make_pair(std::prev(it)->file, std::prev(it)->line);
}

struct Symbol {
  std::optional<std::string> function;
  std::optional<std::string> file;
  std::optional<int64_t> line;
};

// Every symbol's start and end (the addresses libdw compares, i.e. with the module's bias): the points where the
// set of symbols holding an address can change.
void build_symbol_bounds(Module& module) {
  module.symbol_bounds_built = true;
  int count = dwfl_module_getsymtab(module.dwfl_module);
  for (int i = 0; i < count; ++i) {
    GElf_Sym sym{};
    GElf_Addr value = 0;
    if (dwfl_module_getsym_info(module.dwfl_module, i, &sym, &value, nullptr, nullptr, nullptr) == nullptr) continue;
    module.symbol_bounds.push_back(value);
    module.symbol_bounds.push_back(value + sym.st_size);
  }
  std::sort(module.symbol_bounds.begin(), module.symbol_bounds.end());
}

// The function at address, as dwfl_module_addrinfo names it. dwfl_module_addrinfo walks the whole symbol table
// for every address (~50 us per pc in a large binary, 84% of symbolizing: docs/benchmarks.md). Its answer
// depends only on the set of symbols at or below the address and which of them hold it (and on the table's
// order, which is fixed), so when no symbol starts or ends between the previous address and this one, the
// answer is the same: reused when the previous answer was a sized symbol that also holds this address. Pcs
// come sorted, so the pcs of one function follow each other. tests/unit/symbol_reuse_test.cpp checks every
// name against libdw's own answer.
std::optional<std::string> function_name(Module& module, uint64_t address) {
  if (!module.symbol_bounds_built) build_symbol_bounds(module);
  Module::LastName& last = module.last;
  if (last.valid && address >= last.begin && address < last.end) {
    uint64_t low = std::min(address, last.address), high = std::max(address, last.address);
    auto bound = std::upper_bound(module.symbol_bounds.begin(), module.symbol_bounds.end(), low);
    if (bound == module.symbol_bounds.end() || *bound > high) return last.name;
  }
  GElf_Off offset = 0;
  GElf_Sym sym{};
  const char* name = dwfl_module_addrinfo(module.dwfl_module, address, &offset, &sym, nullptr, nullptr, nullptr);
  last = {};
  if (name == nullptr || *name == '\0') return std::nullopt;
  last.name = demangle(name);
  if (sym.st_size > 0 && offset < sym.st_size) {
    last.address = address;
    last.begin = address - offset;
    last.end = last.begin + sym.st_size;
    last.valid = true;
  }
  return last.name;
}

// address is already pc - 1: a return address points after the call, possibly into the next line or
// even the next function, while pc - 1 lies inside the call instruction.
Symbol lookup(Module& module, uint64_t address) {
  Dwfl_Module* mod = module.dwfl_module;
  Symbol symbol;
  symbol.function = function_name(module, address);

  const char* file = nullptr;
  int line_number = 0;
  if (Dwfl_Line* line = dwfl_module_getsrc(mod, address)) {
    file = dwfl_lineinfo(line, nullptr, &line_number, nullptr, nullptr, nullptr);
  } else if (Dwarf_Line* line = cu_line(module, address)) {
    file = dwarf_linesrc(line, nullptr, nullptr);
    if (dwarf_lineno(line, &line_number) != 0) line_number = 0;
  }
  // Line 0 is DWARF for "no source line" (compiler-generated code): no file either, rather than a file
  // with a meaningless line. libdw has already joined the name with its include directory and the CU's
  // comp_dir; a name that is still relative comes from a relative comp_dir (-fdebug-prefix-map builds such
  // as distro packages), and there is nothing truer to join it with.
  if (file != nullptr && *file != '\0' && line_number > 0) {
    symbol.file = file;
    symbol.line = line_number;
    // One symbols row per pc has room for one frame: the physical function's, at its own line (the inline chain
    // in between is not kept).
    if (auto site = outermost_inline_call_site(module, address)) {
      symbol.file = std::move(site->first);
      symbol.line = site->second;
    }
  }
  return symbol;
}

// One pc's symbol, the module that holds it (nullptr when none) counted in `stats` the first time it is opened.
Symbol symbolize_pc(ModuleMap& modules, uint64_t pc, Module*& module, SymbolizeStats& stats) {
  // The module is chosen by pc - 1 as well: a call that is the last instruction of a module (a call to a
  // noreturn function) has its return address one past the module's end.
  uint64_t address = pc - 1;
  module = pc == 0 ? nullptr : modules.find(address);
  Symbol symbol;
  if (module == nullptr) return symbol;
  if (module->state == Module::State::Unopened) {
    ++stats.modules;
    module->state = open_module(*module) ? Module::State::Ready : Module::State::Unusable;
    if (module->state == Module::State::Unusable &&
        std::find(stats.missing_modules.begin(), stats.missing_modules.end(), module->path) ==
            stats.missing_modules.end()) {
      stats.missing_modules.push_back(module->path);
    }
  }
  if (module->state == Module::State::Ready) symbol = lookup(*module, address);
  return symbol;
}

}  // namespace

SymbolizeStats symbolize_trace(const TraceFile& trace, const SymbolizeProgress& progress) {
  SymbolsTransaction transaction(trace);  // read/symbols.h: before reading, so that the pending pcs stay pending
  std::vector<uint64_t> pcs = pending_pcs(trace);
  ModuleMap modules(read_modules(trace));
  SymbolWriter symbols(trace);

  SymbolizeStats stats;
  stats.pcs = pcs.size();
  for (size_t i = 0; i < pcs.size(); ++i) {
    uint64_t pc = pcs[i];
    Module* module = nullptr;
    Symbol symbol = symbolize_pc(modules, pc, module, stats);
    if (symbol.function) ++stats.resolved_functions;
    if (symbol.line) ++stats.resolved_lines;

    symbols.write(pc, symbol.function, symbol.file, symbol.line,
                  module != nullptr ? std::optional<int64_t>(module->id) : std::nullopt);

    size_t done = i + 1;
    if (progress && done % kProgressEvery == 0 && done != pcs.size()) progress(done, pcs.size());
  }

  transaction.commit_symbolized();
  // The last call comes after the commit, so "done == total" means the rows are in the file.
  if (progress) progress(pcs.size(), pcs.size());
  return stats;
}

struct PcSymbolizer::Modules {
  ModuleMap map;
  SymbolizeStats stats;  // unused: open failures cost only their own symbols here
};

PcSymbolizer::PcSymbolizer() = default;
PcSymbolizer::~PcSymbolizer() = default;

void PcSymbolizer::update_modules(const TraceFile& trace) {
  std::vector<ModuleRow> rows = read_modules(trace);
  if (modules_ && rows.size() == module_rows_) return;  // the module map only grows (append-only rows)
  module_rows_ = rows.size();
  modules_ = std::make_unique<Modules>(Modules{ModuleMap(std::move(rows)), {}});
  // Pcs that found no module may lie in one loaded since: asked again. Resolved pcs keep their answer.
  for (auto it = cache_.begin(); it != cache_.end();) {
    it = it->second.module_known ? std::next(it) : cache_.erase(it);
  }
}

const PcSymbolizer::Answer& PcSymbolizer::symbolize(uint64_t pc) {
  auto [it, fresh] = cache_.try_emplace(pc);
  if (!fresh || !modules_) return it->second;
  Module* module = nullptr;
  Symbol symbol = symbolize_pc(modules_->map, pc, module, modules_->stats);
  it->second = Answer{std::move(symbol.function), std::move(symbol.file), symbol.line, module != nullptr};
  return it->second;
}

void PcSymbolizer::fill(Stack& stack) {
  for (Frame& frame : stack.frames) {
    if (frame.python || frame.function || frame.pc == 0) continue;
    const Answer& answer = symbolize(frame.pc);
    frame.function = answer.function;
    frame.file = answer.file;
    frame.line = answer.line;
  }
}

}  // namespace gmt::analysis
