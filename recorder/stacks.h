// Call stacks as raw return addresses, captured cheaply in the hook and deduplicated into ids.
// Symbolization happens after the run (analysis/symbolizer), so the app never pays for DWARF.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace gmt::recorder {

inline constexpr int kMaxStackDepth = 64;

struct RawStack {
  uintptr_t pcs[kMaxStackDepth];
  int depth = 0;
};

// Fills `stack` with the return addresses of the current thread, innermost first, starting at the first
// frame outside this library (the caller of the hooked CUDA function). Uses libunwind's unw_backtrace,
// which caches unwind info per thread (FACTS.md: ~0.1-0.3 us; glibc's backtrace() costs ~10 us per event).
void capture_stack(RawStack& stack);

// Also cut frames inside the CUDA driver, CUPTI and the shared CUDA runtime from the top of every stack from
// now on (the libraries loaded at the time of the call). Called when a driver-level backend starts; may be
// called again later (e.g. a runtime loaded afterwards). Not thread-safe against itself.
void skip_cuda_library_frames();

// A stack that was interned for the first time and must still be written to the trace.
struct NewStack {
  uint32_t id;
  std::vector<uintptr_t> pcs;
};

// Interns stacks: equal PC sequences get equal ids (1, 2, ...). Not thread-safe: the recorder calls it
// under its lock. New stacks are queued for the writer.
class StackTable {
 public:
  uint32_t intern(const RawStack& stack);
  std::vector<NewStack> take_new_stacks();
  size_t size() const { return stacks_.size(); }

 private:
  std::unordered_multimap<uint64_t, uint32_t> ids_by_hash_;
  std::vector<std::vector<uintptr_t>> stacks_;  // index id - 1
  std::vector<NewStack> new_stacks_;
};

}  // namespace gmt::recorder
