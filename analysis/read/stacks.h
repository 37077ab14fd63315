// Call stacks as the report shows them: stack ids turned into frames (stack_frames LEFT JOIN symbols, Python
// frames, modules), once per stack.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "analysis/model.h"
#include "analysis/read/trace_file.h"

namespace gmt::analysis {

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
