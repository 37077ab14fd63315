#include "analysis/model/imported.h"

#include <algorithm>

namespace gmt::analysis {

void ImportedTracker::add(int64_t device, uint64_t bytes, int64_t time_ns) {
  PerDevice& d = devices_[device];
  d.current += bytes;
  ++d.opens;
  if (d.current > d.peak) {
    d.peak = d.current;
    d.peak_time_ns = time_ns;
  }
  current_ += bytes;
  if (current_ > peak_) {
    peak_ = current_;
    peak_time_ns_ = time_ns;
  }
}

void ImportedTracker::remove(int64_t device, uint64_t bytes) {
  PerDevice& d = devices_[device];
  d.current -= std::min(d.current, bytes);
  current_ -= std::min(current_, bytes);
}

void ImportedTracker::on_open(uint64_t address, uint64_t size, int64_t device, int64_t stack_id, schema::Api api,
                              int64_t time_ns) {
  ++opens_;
  if (address == 0) return;
  auto [it, inserted] = ipc_.try_emplace(address, Opened{size, device, stack_id, api});
  if (!inserted) {  // the close of the earlier open was not seen
    remove(it->second.device, it->second.bytes);
    it->second = Opened{size, device, stack_id, api};
  }
  add(device, size, time_ns);
}

bool ImportedTracker::on_close(uint64_t address, int64_t /*time_ns*/) {
  auto it = ipc_.find(address);
  if (it == ipc_.end()) return false;
  ++closes_;
  remove(it->second.device, it->second.bytes);
  ipc_.erase(it);
  return true;
}

void ImportedTracker::on_vmm_import(uint64_t handle, int64_t device, int64_t stack_id, schema::Api api) {
  ++opens_;
  handles_[handle] = Opened{0, device, stack_id, api};
}

bool ImportedTracker::on_vmm_map(uint64_t handle, uint64_t address, uint64_t size, int64_t time_ns) {
  auto it = handles_.find(handle);
  if (it == handles_.end()) return false;
  it->second.bytes += size;
  mappings_[address] = Mapping{handle, size, it->second.device};
  add(it->second.device, size, time_ns);
  return true;
}

bool ImportedTracker::on_vmm_unmap(uint64_t address, int64_t /*time_ns*/) {
  auto mapping = mappings_.find(address);
  if (mapping == mappings_.end()) return false;
  const Mapping m = mapping->second;
  mappings_.erase(mapping);
  if (auto it = handles_.find(m.handle); it != handles_.end()) it->second.bytes -= std::min(it->second.bytes, m.size);
  remove(m.device, m.size);
  return true;
}

bool ImportedTracker::on_vmm_release(uint64_t handle) {
  auto it = handles_.find(handle);
  if (it == handles_.end()) return false;
  ++closes_;
  handles_.erase(it);  // its mappings stay counted until they are unmapped, as the driver keeps the memory mapped
  return true;
}

ImportedMemory ImportedTracker::finish(int64_t origin, const StackLoadFn& load_stack,
                                       const StackKeyFn& stack_key) const {
  auto relative = [origin](int64_t absolute) {
    return static_cast<int64_t>(static_cast<uint64_t>(absolute) - static_cast<uint64_t>(origin));
  };
  ImportedMemory result;
  result.opens = opens_;
  result.closes = closes_;
  result.peak_bytes = peak_;
  result.peak_time_ns = peak_ == 0 ? 0 : relative(peak_time_ns_);
  for (const auto& [device, d] : devices_) {
    ImportedDevice row;
    row.device = device;
    row.peak_bytes = d.peak;
    row.peak_time_ns = d.peak == 0 ? 0 : relative(d.peak_time_ns);
    row.opens = d.opens;
    row.open_at_end_bytes = d.current;
    result.devices.push_back(row);
  }
  // Handles left open, grouped by the stack that opened them as a reader sees it (same functions and lines).
  std::map<std::string, OpenImportGroup> groups;
  auto group = [&](const Opened& o) {
    OpenImportGroup& g = groups[stack_key(load_stack(o.stack_id))];
    if (g.count == 0 || o.stack_id < g.stack.id) g.stack.id = o.stack_id;
    if (std::find(g.stack_ids.begin(), g.stack_ids.end(), o.stack_id) == g.stack_ids.end()) {
      g.stack_ids.insert(std::lower_bound(g.stack_ids.begin(), g.stack_ids.end(), o.stack_id), o.stack_id);
    }
    g.bytes += o.bytes;
    ++g.count;
    if (std::find(g.apis.begin(), g.apis.end(), o.api) == g.apis.end()) {
      g.apis.insert(std::lower_bound(g.apis.begin(), g.apis.end(), o.api), o.api);
    }
    if (std::find(g.devices.begin(), g.devices.end(), o.device) == g.devices.end()) {
      g.devices.insert(std::lower_bound(g.devices.begin(), g.devices.end(), o.device), o.device);
    }
    result.left_open_bytes += o.bytes;
    ++result.left_open_handles;
  };
  for (const auto& [address, o] : ipc_) group(o);
  for (const auto& [handle, o] : handles_) group(o);
  for (auto& [key, g] : groups) {
    g.stack = load_stack(g.stack.id);
    result.left_open.push_back(std::move(g));
  }
  std::sort(result.left_open.begin(), result.left_open.end(), [](const OpenImportGroup& a, const OpenImportGroup& b) {
    if (a.bytes != b.bytes) return a.bytes > b.bytes;
    if (a.count != b.count) return a.count > b.count;
    return a.stack.id < b.stack.id;
  });
  return result;
}

}  // namespace gmt::analysis
