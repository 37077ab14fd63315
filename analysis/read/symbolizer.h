// Offline symbolization: turns the raw return addresses in stack_frames into function / file / line rows
// in the symbols table, after the profiled process has exited. Doing it here rather than in the process
// keeps the recorder cheap (it only stores PCs and the module map) and lets us use full DWARF with libdw.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "analysis/read/stacks.h"
#include "analysis/read/trace_file.h"

namespace gmt::analysis {

struct SymbolizeStats {
  size_t pcs = 0;                 // distinct pcs symbolized by this call (those that had no symbols row yet)
  size_t resolved_functions = 0;  // of those, rows written with a function name
  size_t resolved_lines = 0;      // of those, rows written with a source file and line
  size_t modules = 0;             // module rows that contained at least one of those pcs (usable or not)
  // Paths of modules that held pcs but could not be used: the file is missing, not a readable ELF file,
  // or its build-id differs from the recorded one. Their pcs get rows with function NULL and module_id set.
  std::vector<std::string> missing_modules;
};

// Called with (pcs done, pcs to do): every ~1000 pcs and once at the end (also when there was nothing to do).
using SymbolizeProgress = std::function<void(size_t done, size_t total)>;

// Fills the symbols table for every distinct pc in stack_frames that has no symbols row yet, then sets
// meta 'symbolized' = '1', all in one transaction. Opens nothing itself: takes a TraceFile opened ReadWrite.
// Idempotent: a second call finds nothing left to do. Throws TraceError when the trace cannot be written
// (read-only, locked, damaged); missing or odd module files are never an error, only reported in the stats.
SymbolizeStats symbolize_trace(const TraceFile& trace, const SymbolizeProgress& progress = {});

// Symbolization in memory, for a trace still being written (`gpumemtrace top`): the same answers as
// symbolize_trace, written nowhere (the process's writer owns the file), kept per pc between refreshes so that
// a refresh symbolizes only the pcs it has not seen.
class PcSymbolizer {
 public:
  struct Answer {
    std::optional<std::string> function;
    std::optional<std::string> file;
    std::optional<int64_t> line;
    bool module_known = false;
  };

  PcSymbolizer();
  ~PcSymbolizer();
  PcSymbolizer(const PcSymbolizer&) = delete;
  PcSymbolizer& operator=(const PcSymbolizer&) = delete;

  // Reads the trace's modules table (again when it grew: a library loaded since).
  void update_modules(const TraceFile& trace);
  const Answer& symbolize(uint64_t pc);
  // Fills the native frames that the trace's symbols table left without a function.
  void fill(Stack& stack);

 private:
  struct Modules;
  std::unique_ptr<Modules> modules_;
  size_t module_rows_ = 0;
  std::unordered_map<uint64_t, Answer> cache_;
};

}  // namespace gmt::analysis
