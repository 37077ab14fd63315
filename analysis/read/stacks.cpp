#include "analysis/read/stacks.h"

#include <algorithm>
#include <cctype>

namespace gmt::analysis {
namespace {

using ModuleRange = StackLoader::ModuleRange;

// Python frames (v5) name a python_frames row instead of a pc; older traces have none. A table the trace lacks
// (trace_tables.h) reads as NULL columns: symbols give names, python_frames and strings Python frames.
std::string frames_sql(const TraceFile& trace) {
  const bool symbols = trace.has_table("symbols");
  const bool python = trace.schema_version() >= 5 && trace.has_table("python_frames");
  const bool strings = python && trace.has_table("strings");
  std::string sql = "SELECT f.level, f.pc, ";
  sql += symbols ? "s.function, s.file, s.line, s.module_id, " : "NULL, NULL, NULL, NULL, ";
  sql += python ? "f.python_frame_id, " : "0, ";
  sql += strings ? "pfn.text, pfl.text, " : "NULL, NULL, ";
  sql += python ? "p.line FROM stack_frames f " : "NULL FROM stack_frames f ";
  if (symbols) {
    sql += python ? "LEFT JOIN symbols s ON s.pc = f.pc AND f.python_frame_id = 0 "
                  : "LEFT JOIN symbols s ON s.pc = f.pc ";
  }
  if (python) sql += "LEFT JOIN python_frames p ON p.id = f.python_frame_id ";
  if (strings) {
    sql += "LEFT JOIN strings pfn ON pfn.id = p.function_id LEFT JOIN strings pfl ON pfl.id = p.file_id ";
  }
  return sql + "WHERE f.stack_id = ?1 ORDER BY f.level";
}

// A statically linked CUDA runtime lives inside the app's own binary, so the recorder cannot cut its
// frames by module as it does for libcudart.so: the innermost frames of a driver-level event are then
// cudart's (cudart::cudaApiMalloc, cudaMalloc, ...). The reader wants the app's call site first.
bool is_cuda_runtime_function(const std::string& name) {
  auto starts = [&](const char* prefix) { return name.rfind(prefix, 0) == 0; };
  if (starts("cudart::") || starts("__cudart") || starts("libcudart")) return true;
  // Exported runtime and driver entry points: cudaMalloc, cudaMallocAsync_ptsz, cuMemAlloc_v2, ...
  bool api_name = (starts("cuda") && name.size() > 4 && std::isupper(static_cast<unsigned char>(name[4]))) ||
                  (starts("cu") && name.size() > 2 && std::isupper(static_cast<unsigned char>(name[2])));
  return api_name && name.find_first_of(":( ") == std::string::npos;
}

void drop_leading_runtime_frames(Stack& stack) {
  size_t first = 0;
  while (first + 1 < stack.frames.size() && !stack.frames[first].python && stack.frames[first].function &&
         is_cuda_runtime_function(*stack.frames[first].function)) {
    ++first;
  }
  if (first > 0) stack.frames.erase(stack.frames.begin(), stack.frames.begin() + static_cast<long>(first));
}

std::optional<std::string> non_empty(std::optional<std::string> text) {
  if (text && text->empty()) return std::nullopt;
  return text;
}

void set_module(Frame& frame, const ModuleRange& range) {
  frame.module = range.path;
  frame.module_offset = frame.pc - range.base;  // wraps for a damaged trace, never UB
}

}  // namespace

StackLoader::StackLoader(const TraceFile& trace) {
  // Without stacks or stack_frames every stack is missing (trace_tables.h says so in the report).
  if (trace.has_table("stacks") && trace.has_table("stack_frames")) {
    exists_.emplace(trace, "SELECT 1 FROM stacks WHERE id = ?1");
    frames_.emplace(trace, frames_sql(trace).c_str());
  }
  if (!trace.has_table("modules")) return;
  Statement modules(trace, "SELECT id, path, base, size FROM modules");
  while (modules.step()) {
    ModuleRange range{static_cast<uint64_t>(modules.column_int(2)), static_cast<uint64_t>(modules.column_int(3)),
                      modules.column_text(1).value_or("")};
    modules_by_id_[modules.column_int(0)] = range;
    ranges_.push_back(std::move(range));
  }
  std::sort(ranges_.begin(), ranges_.end(), [](const auto& a, const auto& b) { return a.base < b.base; });
}

const Stack& StackLoader::load(int64_t stack_id) {
  auto cached = cache_.find(stack_id);
  if (cached != cache_.end()) return cached->second;
  Stack stack;
  stack.id = stack_id;
  if (stack_id != 0) {
    stack.missing = !exists_;
    if (exists_) {
      exists_->reset();
      exists_->bind(1, stack_id);
      stack.missing = !exists_->step();
    }
    if (!stack.missing) read_frames(stack);
  }
  return cache_.emplace(stack_id, std::move(stack)).first->second;
}

void StackLoader::read_frames(Stack& stack) {
  Statement& rows = *frames_;  // present whenever a stack is not missing
  rows.reset();
  rows.bind(1, stack.id);
  while (rows.step()) {
    Frame frame;
    frame.level = rows.column_int(0);
    frame.pc = static_cast<uint64_t>(rows.column_int(1));
    if (rows.column_int(6) != 0) {
      frame.python = true;
      frame.module = std::string(kPythonModule);
      frame.function = non_empty(rows.column_text(7));
      frame.file = non_empty(rows.column_text(8));
      if (!rows.column_is_null(9) && rows.column_int(9) > 0) frame.line = rows.column_int(9);
      stack.frames.push_back(std::move(frame));
      continue;
    }
    // The symbolizer may store "" or line 0 for "unknown"; the report shows both as unknown.
    frame.function = non_empty(rows.column_text(2));
    frame.file = non_empty(rows.column_text(3));
    if (!rows.column_is_null(4) && rows.column_int(4) > 0) frame.line = rows.column_int(4);
    if (!rows.column_is_null(5)) {
      auto module = modules_by_id_.find(rows.column_int(5));
      if (module != modules_by_id_.end()) set_module(frame, module->second);
    }
    if (!frame.module) {
      if (const ModuleRange* range = module_containing(frame.pc)) set_module(frame, *range);
    }
    stack.frames.push_back(std::move(frame));
  }
  drop_leading_runtime_frames(stack);
}

const ModuleRange* StackLoader::module_containing(uint64_t pc) const {
  // pc is a return address: pc - 1 is inside the call instruction, which is in the module even when the
  // call is the module's last instruction.
  uint64_t address = pc == 0 ? 0 : pc - 1;
  auto after = std::upper_bound(ranges_.begin(), ranges_.end(), address,
                                [](uint64_t a, const ModuleRange& m) { return a < m.base; });
  // Ranges should not overlap, but walk back over all candidates in case a damaged trace has them.
  while (after != ranges_.begin()) {
    --after;
    if (address - after->base < after->size) return &*after;
  }
  return nullptr;
}

}  // namespace gmt::analysis
