#include "analysis/model/pools.h"

#include <algorithm>
#include <set>

#include "analysis/model/timeline.h"
#include "analysis/read/pools.h"

namespace gmt::analysis {
namespace {

using schema::Api;

bool from_pool(Api api) { return api == Api::cudaMallocFromPoolAsync || api == Api::cuMemAllocFromPoolAsync; }
bool from_current_pool(Api api) { return api == Api::cudaMallocAsync || api == Api::cuMemAllocAsync; }

// The used bytes after the last change at or before `time` (a sample shares its allocation's time stamp and is
// taken after it).
uint64_t used_at(const std::vector<std::pair<int64_t, uint64_t>>& steps, int64_t time) {
  auto after = std::upper_bound(steps.begin(), steps.end(), time,
                                [](int64_t t, const std::pair<int64_t, uint64_t>& step) { return t < step.first; });
  return after == steps.begin() ? 0 : std::prev(after)->second;
}

// A pool no PoolCreate or FromPool call named: 0 or a sampled handle is a device's current pool.
std::string kind_of(uint64_t pool) {
  if (pool == schema::kGraphMemoryPool) return "graph";
  if (pool == kUnrecordedPool) return "unrecorded";
  return "default";
}

}  // namespace

PoolTracker::State& PoolTracker::state(const Key& key) { return pools_[key]; }

void PoolTracker::on_pool_create(uint64_t pool, int64_t device) {
  if (pool == 0) return;
  auto [it, inserted] = created_.try_emplace(pool, device);
  state(Key{it->second, pool});
}

void PoolTracker::on_alloc(Api api, uint64_t handle, int64_t device, uint64_t address, uint64_t size, int64_t time_ns) {
  if (address == 0) return;
  on_free(address, time_ns);  // an address handed out again without its free recorded
  Key key;
  if (api == Api::graphMemAlloc) {
    key = Key{device, schema::kGraphMemoryPool};
  } else if (handle != 0 && (from_pool(api) || from_current_pool(api))) {
    key = Key{created_.try_emplace(handle, device).first->second, handle};
  } else if (from_current_pool(api)) {
    key = Key{device, 0};
  } else if (from_pool(api)) {
    key = Key{device, kUnrecordedPool};
  } else {
    return;  // not a pool's allocation
  }
  State& pool = state(key);
  pool.used += size;
  ++pool.allocations;
  ++pool.live;
  if (pool.used > pool.peak) {
    pool.peak = pool.used;
    pool.peak_time = time_ns;
  }
  pool.steps.emplace_back(time_ns, pool.used);
  live_[address] = Live{key, size};
}

void PoolTracker::on_free(uint64_t address, int64_t time_ns) {
  auto it = live_.find(address);
  if (it == live_.end()) return;
  State& pool = state(it->second.key);
  pool.used -= it->second.size;
  --pool.live;
  pool.steps.emplace_back(time_ns, pool.used);
  live_.erase(it);
}

std::optional<std::vector<PoolUsage>> PoolTracker::finish(const TraceFile& trace, int64_t origin) const {
  const std::optional<std::vector<PoolUsageSample>> samples = read_pool_usage(trace);
  if (!samples && pools_.empty()) return std::nullopt;
  auto relative = [origin](int64_t absolute) { return relative_to(origin, absolute); };

  // Each sample's pool: a created pool by its handle, the graph pool by its device; a handle no event names is a
  // device's current pool, joined with that device's cudaMallocAsync allocations when it is the only such handle.
  std::map<int64_t, std::set<uint64_t>> unnamed;  // device -> sampled handles no event names
  if (samples) {
    for (const PoolUsageSample& sample : *samples) {
      if (sample.pool != schema::kGraphMemoryPool && !created_.count(sample.pool)) {
        unnamed[sample.device].insert(sample.pool);
      }
    }
  }
  auto key_of = [&](const PoolUsageSample& sample) -> Key {
    if (sample.pool == schema::kGraphMemoryPool) return Key{sample.device, sample.pool};
    if (auto created = created_.find(sample.pool); created != created_.end()) return Key{created->second, sample.pool};
    if (unnamed[sample.device].size() == 1 && pools_.count(Key{sample.device, 0})) return Key{sample.device, 0};
    return Key{sample.device, sample.pool};
  };
  std::map<Key, std::vector<const PoolUsageSample*>> sampled;
  if (samples) {
    for (const PoolUsageSample& sample : *samples) sampled[key_of(sample)].push_back(&sample);
  }

  std::map<Key, PoolUsage> result;
  for (const auto& [key, state] : pools_) {
    PoolUsage& pool = result[key];
    pool.used_from_events = state.allocations > 0;
    pool.peak_used_bytes = state.peak;
    pool.peak_used_time_ns = state.peak == 0 ? 0 : relative(state.peak_time);
    pool.last_used_bytes = state.used;
    pool.allocations = state.allocations;
    pool.live_allocations = state.live;
  }
  for (const auto& [key, rows] : sampled) {
    PoolUsage& pool = result[key];
    auto state = pools_.find(key);
    const bool exact = state != pools_.end() && state->second.allocations > 0;
    for (const PoolUsageSample* sample : rows) {
      const uint64_t used = exact ? used_at(state->second.steps, sample->time_ns) : sample->used;
      const uint64_t unused = sample->reserved > used ? sample->reserved - used : 0;
      if (pool.samples == 0 || unused > pool.max_unused_bytes) {
        pool.max_unused_bytes = unused;
        pool.max_unused_time_ns = relative(sample->time_ns);
      }
      ++pool.samples;
      pool.sampled_peak_reserved_bytes = std::max(pool.sampled_peak_reserved_bytes, sample->reserved);
      pool.last_reserved_bytes = sample->reserved;
      pool.last_sample_time_ns = relative(sample->time_ns);
      if (!exact) {
        pool.peak_used_bytes = std::max(pool.peak_used_bytes, sample->used);
        pool.last_used_bytes = sample->used;
      }
      if (key.second == 0) pool.pool = static_cast<int64_t>(sample->pool);  // the handle the driver resolved
    }
    // At most kMaxPoolSeries samples, evenly picked, the first and the last always.
    const size_t n = rows.size();
    const size_t kept = std::min(n, kMaxPoolSeries);
    for (size_t i = 0; i < kept; ++i) {
      const PoolUsageSample* sample = rows[kept == 1 ? n - 1 : i * (n - 1) / (kept - 1)];
      const uint64_t used = exact ? used_at(state->second.steps, sample->time_ns) : sample->used;
      pool.series.push_back(PoolSample{relative(sample->time_ns), sample->reserved, used});
    }
  }

  std::vector<PoolUsage> pools;
  pools.reserve(result.size());
  for (auto& [key, pool] : result) {
    // Reserved is read only at samples, so its peak is a lower bound; a pool holds at least what it handed out.
    pool.peak_reserved_bytes = pool.sampled_peak_reserved_bytes;
    if (pool.samples > 0 && pool.peak_used_bytes > pool.peak_reserved_bytes) {
      pool.peak_reserved_bytes = pool.peak_used_bytes;
      pool.peak_reserved_from_used = true;
    }
    pool.device = key.first;
    if (key.second != 0) pool.pool = static_cast<int64_t>(key.second);
    pool.kind = created_.count(key.second) ? "created" : kind_of(key.second);
    pools.push_back(std::move(pool));
  }
  return pools;
}

}  // namespace gmt::analysis
