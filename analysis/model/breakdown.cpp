#include "analysis/model/breakdown.h"

#include <algorithm>
#include <map>

#include "analysis/format.h"

namespace gmt::analysis {
namespace {

bool starts_with(const std::string& text, std::string_view prefix) { return text.rfind(prefix, 0) == 0; }

struct Label {
  std::string_view prefix;
  std::string_view label;
};
// File-name prefixes of the libraries that allocate GPU memory on an application's behalf.
constexpr Label kLabels[] = {
    {"libnccl", "NCCL"},
    {"libtorch", "PyTorch"},
    {"libc10", "PyTorch"},
    {"libcublas", "cuBLAS"},
    {"libcudnn", "cuDNN"},
    {"libcufft", "cuFFT"},
    {"libcusparse", "cuSPARSE"},
    {"libcusolver", "cuSOLVER"},
    {"libcurand", "cuRAND"},
    {"libnvshmem", "NVSHMEM"},
    {"libpython", "Python"},
    {"xla_extension", "JAX/XLA"},
    {"libtensorflow", "TensorFlow"},
    {"cupy", "CuPy"},
    {"libcupy", "CuPy"},
};

struct ModuleName {
  std::string file_name;
  std::string path;
};

// The allocating module of a stack: the innermost frame whose module is known and not a CUDA library.
ModuleName allocating_module(const Stack& stack) {
  if (stack.id == 0 || stack.frames.empty()) return {"(no stack)", ""};
  for (const Frame& frame : stack.frames) {
    if (!frame.module) continue;
    std::string file_name = path_basename(*frame.module);
    if (!is_cuda_library(file_name)) return {std::move(file_name), *frame.module};
  }
  return {"(unknown)", ""};
}

void add(BreakdownRow& row, uint64_t allocations, uint64_t allocated, uint64_t peak) {
  row.allocations += allocations;
  row.allocated_bytes += allocated;
  row.peak_bytes += peak;
}

std::vector<BreakdownRow> sorted(std::vector<BreakdownRow> rows) {
  std::sort(rows.begin(), rows.end(), [](const BreakdownRow& a, const BreakdownRow& b) {
    if (a.peak_bytes != b.peak_bytes) return a.peak_bytes > b.peak_bytes;
    if (a.allocated_bytes != b.allocated_bytes) return a.allocated_bytes > b.allocated_bytes;
    if (a.leaked_bytes != b.leaked_bytes) return a.leaked_bytes > b.leaked_bytes;
    if (a.id != b.id) return a.id < b.id;
    return a.module < b.module;
  });
  return rows;
}

template <typename Map>
std::vector<BreakdownRow> values(Map& map) {
  std::vector<BreakdownRow> rows;
  rows.reserve(map.size());
  for (auto& [key, row] : map) rows.push_back(std::move(row));
  return sorted(std::move(rows));
}

}  // namespace

std::string module_label(const std::string& module_file_name) {
  for (const Label& label : kLabels) {
    if (starts_with(module_file_name, label.prefix)) return std::string(label.label);
  }
  return {};
}

bool is_cuda_library(const std::string& module_file_name) {
  return starts_with(module_file_name, "libcuda") || starts_with(module_file_name, "libcupti") ||
         starts_with(module_file_name, "libgpumemtrace");
}

BreakdownTracker::BreakdownTracker(LiveObserver* next) : next_(next) { slots_.emplace_back(); }

uint32_t BreakdownTracker::on_alloc(int64_t thread_id, int64_t stream, int64_t stack_id, uint64_t size) {
  const Key key{thread_id, stream, stack_id};
  if (last_slot_ == 0 || !(slots_[last_slot_].key == key)) {
    auto [it, inserted] = slot_ids_.try_emplace(key, static_cast<uint32_t>(slots_.size()));
    if (inserted) slots_.push_back(Slot{key});
    last_slot_ = it->second;
  }
  Slot& slot = slots_[last_slot_];
  ++slot.allocations;
  slot.allocated_bytes += size;
  return last_slot_;
}

void BreakdownTracker::on_live_change(const LiveAllocation& allocation, uint64_t address, bool added, int64_t time_ns) {
  const uint32_t index = allocation.attribution < slots_.size() ? allocation.attribution : 0;
  Slot& slot = slots_[index];
  if (!slot.changed) {
    slot.changed = true;
    changed_.push_back(index);
  }
  if (added) {
    slot.live_bytes += allocation.size;
    total_ += allocation.size;
    if (total_ > peak_) {  // the same rule as LiveBytes: the first moment of the highest total
      peak_ = total_;
      for (uint32_t changed : changed_) {
        slots_[changed].peak_bytes = slots_[changed].live_bytes;
        slots_[changed].changed = false;
      }
      changed_.clear();
    }
  } else {
    slot.live_bytes -= allocation.size;
    total_ -= allocation.size;
  }
  if (next_) next_->on_live_change(allocation, address, added, time_ns);
}

Breakdown BreakdownTracker::finish(const std::unordered_map<uint64_t, LiveAllocation>& live,
                                   const StackLoadFn& load_stack,
                                   const std::function<bool(int64_t stack_id)>& suppressed) const {
  std::vector<uint64_t> leaked(slots_.size(), 0);
  for (const auto& [address, allocation] : live) {
    if (allocation.attribution >= slots_.size() || suppressed(allocation.stack_id)) continue;
    leaked[allocation.attribution] += allocation.size;
  }

  std::map<int64_t, BreakdownRow> threads;
  std::map<int64_t, BreakdownRow> streams;
  std::map<std::string, BreakdownRow> modules;  // by path, so two modules of one file name stay apart
  std::unordered_map<int64_t, ModuleName> module_of_stack;
  for (size_t i = 1; i < slots_.size(); ++i) {
    const Slot& slot = slots_[i];
    auto found = module_of_stack.find(slot.key.stack_id);
    if (found == module_of_stack.end()) {
      found = module_of_stack.emplace(slot.key.stack_id, allocating_module(load_stack(slot.key.stack_id))).first;
    }
    const ModuleName& module = found->second;

    BreakdownRow& thread = threads[slot.key.thread_id];
    BreakdownRow& stream = streams[slot.key.stream];
    BreakdownRow& by_module = modules[module.path.empty() ? module.file_name : module.path];
    thread.id = slot.key.thread_id;
    stream.id = slot.key.stream;
    if (by_module.module.empty()) {
      by_module.module = module.file_name;
      by_module.module_path = module.path;
      std::string label = module_label(module.file_name);
      if (!label.empty()) by_module.label = std::move(label);
    }
    for (BreakdownRow* row : {&thread, &stream, &by_module}) {
      add(*row, slot.allocations, slot.allocated_bytes, slot.peak_bytes);
      row->leaked_bytes += leaked[i];
    }
  }
  return Breakdown{values(threads), values(streams), values(modules)};
}

}  // namespace gmt::analysis
