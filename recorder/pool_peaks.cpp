#include "recorder/pool_peaks.h"

#include "recorder/backend.h"

namespace gmt::recorder {
namespace {

using schema::Api;

bool from_pool(Api api) { return api == Api::cudaMallocFromPoolAsync || api == Api::cuMemAllocFromPoolAsync; }
bool from_current_pool(Api api) { return api == Api::cudaMallocAsync || api == Api::cuMemAllocAsync; }

}  // namespace

void PoolPeaks::on_event(const EventRecord& e) {
  // A framework heap's blocks may lie inside a pool allocation, at its address: never the pool's own frees.
  if (e.source == schema::Source::TorchAllocator || e.source == schema::Source::NvtxMemory ||
      e.source == schema::Source::CupyAllocator) {
    return;
  }
  if (e.kind == schema::EventKind::Free) {
    auto it = live_.find(e.call.address);
    if (it == live_.end()) return;
    pools_[it->second.first].used -= it->second.second;
    live_.erase(it);
    return;
  }
  if (e.kind != schema::EventKind::Alloc || e.call.address == 0 || is_cross_check_source(e.source)) return;
  if (!from_pool(e.api) && !from_current_pool(e.api)) return;
  const Pool pool{e.device, e.call.handle};  // cudaMallocAsync's handle is 0 unless the hooks resolved it
  if (auto old = live_.find(e.call.address); old != live_.end()) {  // handed out again: its free was not recorded
    pools_[old->second.first].used -= old->second.second;
  }
  State& state = pools_[pool];
  state.used += e.call.size;
  if (state.used > state.peak) {
    state.peak = state.used;
    state.new_peak = true;
  }
  live_[e.call.address] = {pool, e.call.size};
}

std::vector<PoolPeaks::Pool> PoolPeaks::take_new_peaks() {
  std::vector<Pool> peaked;
  for (auto& [pool, state] : pools_) {
    if (!state.new_peak) continue;
    state.new_peak = false;
    peaked.push_back(pool);
  }
  return peaked;
}

std::vector<PoolPeaks::Pool> PoolPeaks::pools() const {
  std::vector<Pool> all;
  for (const auto& [pool, state] : pools_) all.push_back(pool);
  return all;
}

}  // namespace gmt::recorder
