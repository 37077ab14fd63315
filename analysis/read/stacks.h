// Call stacks as the report shows them: stack ids turned into frames (stack_frames LEFT JOIN symbols, Python
// frames, modules), once per stack.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "analysis/read/trace_file.h"

namespace gmt::analysis {

// The module shown for Python frames: file, function and line are the Python source's.
inline constexpr std::string_view kPythonModule = "python";

struct Frame {
  int64_t level = 0;                    // 0 is the innermost frame (the caller of the CUDA function)
  uint64_t pc = 0;                      // return address as captured
  std::optional<std::string> function;  // nullopt when the pc is not symbolized (or has no symbol)
  std::optional<std::string> file;
  std::optional<int64_t> line;
  std::optional<std::string> module;      // full path of the module holding the pc, when known; kPythonModule
  bool python = false;                    // a Python frame (schema v5): pc is 0, module is kPythonModule
  std::optional<uint64_t> module_offset;  // pc - the module's load base, when the module is known
};

struct Stack {
  int64_t id = 0;             // 0: no stack was taken for the event
  bool missing = false;       // id != 0 but the trace has no such row in `stacks`: frames stay empty
  std::vector<Frame> frames;  // innermost first
};

// Turns stack ids into frames: stack_frames LEFT JOIN symbols, modules from symbols.module_id or, for pcs
// without one, from the module whose mapped range holds the pc. Caches, since leaks and failures share
// stacks.
class StackLoader {
 public:
  explicit StackLoader(const TraceFile& trace);

  const Stack& load(int64_t stack_id);

  struct ModuleRange {
    uint64_t base = 0;
    uint64_t size = 0;
    std::string path;
  };

 private:
  void read_frames(Stack& stack);
  const ModuleRange* module_containing(uint64_t pc) const;

  std::optional<Statement> exists_;
  std::optional<Statement> frames_;
  std::unordered_map<int64_t, ModuleRange> modules_by_id_;
  std::vector<ModuleRange> ranges_;
  std::unordered_map<int64_t, Stack> cache_;
};

}  // namespace gmt::analysis
