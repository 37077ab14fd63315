// Offline symbolization: turns the raw return addresses in stack_frames into function / file / line rows
// in the symbols table, after the profiled process has exited. Doing it here rather than in the process
// keeps the recorder cheap (it only stores PCs and the module map) and lets us use full DWARF with libdw.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

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

}  // namespace gmt::analysis
