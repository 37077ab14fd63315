// Folded stacks (flamegraph.pl, speedscope, inferno): "outer;...;inner 4096" per line.
#include <fmt/core.h>

#include <map>
#include <string>
#include <vector>

#include "analysis/format.h"
#include "analysis/model/stack_view.h"
#include "analysis/render/render_export.h"

namespace gmt::analysis {
namespace {

// The folded format has no quoting: ';' would split a frame in two and a line break would end the stack.
std::string escape_frame(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == ';') {
      out += "%3B";
    } else if (c == '\n') {
      out += "%0A";
    } else if (c == '\r') {
      out += "%0D";
    } else {
      out += c;
    }
  }
  return out;
}

std::string folded_stack(const Stack& stack) {
  if (stack.id == 0) return "(no call stack recorded)";
  if (stack.missing) return fmt::format("(call stack {} missing from the trace)", stack.id);
  if (stack.frames.empty()) return "(empty call stack)";
  std::string line;  // outermost first, start frames dropped and C++ names shortened (analysis/model/stack_view.h)
  for (const std::string& name : folded_frame_names(stack, /*full_names=*/false)) {
    if (!line.empty()) line += ';';
    line += escape_frame(name);
  }
  return line;
}

// Lines in first-seen order with identical stacks merged: two leak groups differ by source line, which
// the folded format does not show.
class FoldedLines {
 public:
  void add(const std::string& stack, uint64_t bytes) {
    if (bytes == 0) return;
    auto [it, inserted] = index_.try_emplace(stack, lines_.size());
    if (inserted) {
      lines_.push_back({stack, bytes});
    } else {
      lines_[it->second].second += bytes;
    }
  }
  std::string text() const {
    std::string out;
    for (const auto& [stack, bytes] : lines_) out += fmt::format("{} {}\n", stack, bytes);
    return out;
  }

 private:
  std::vector<std::pair<std::string, uint64_t>> lines_;
  std::map<std::string, size_t> index_;
};

std::string device_root(int64_t device) {
  return device >= 0 ? fmt::format("device {}", device) : std::string("host memory");
}

}  // namespace

std::string render_folded(const Report& report, FoldedOf of) {
  FoldedLines lines;
  if (of == FoldedOf::Leaks) {
    for (const LeakGroup& group : report.leaks) lines.add(folded_stack(group.stack), group.bytes);
    return lines.text();
  }
  for (const DevicePeak& peak : report.peaks) {
    const std::string root = device_root(peak.device);
    uint64_t shown = 0;
    for (const StackBytes& held : peak.stacks) {
      lines.add(root + ";" + folded_stack(held.stack), held.bytes);
      shown += held.bytes;
    }
    // The stacks beyond --top still held memory at the peak: one line keeps the device's total right.
    if (peak.bytes > shown) lines.add(root + ";(other call stacks)", peak.bytes - shown);
  }
  return lines.text();
}

}  // namespace gmt::analysis
