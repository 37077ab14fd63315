// How fast the what-if replay (analysis/replay/) goes through PyTorch allocator actions, on one core: a synthetic
// training loop's request stream (activations of mixed sizes on two streams, freed in reverse, a few kept), its
// segment actions written by the replay's own default policy, then replayed from memory as the self-check and under
// each setting of the sweep. Prints actions per second per setting; the target is >= 2 million (issue 37).
//
//   replay_speed [--actions N] [--smoke] [--write-trace PATH] [--final-request-mib N]
// --write-trace also writes the stream as a trace (source torch_allocator, schema v10), ending in an OOM that
// expandable segments avoid, for timing `report` with and without its what-if sweep (docs/benchmarks.md).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "analysis/replay/replay_run.h"
#include "schema/trace_init.h"
#include "schema/trace_schema.h"

namespace {

using gmt::analysis::TorchAction;
using gmt::analysis::TorchActionKind;
using namespace gmt::replay;

// Writes the segment actions the default policy makes into the action list, as the tracker records them.
class WritingMemory : public DeviceMemory {
 public:
  explicit WritingMemory(std::vector<TorchAction>& out) : out_(out) {}
  std::optional<uint64_t> capacity;  // set for the final request only
  uint64_t used = 0;
  std::optional<uint64_t> malloc(uint64_t size, uint64_t stream) override {
    if (capacity && used + size > *capacity) return std::nullopt;
    used += size;
    const uint64_t address = next_;
    next_ += (size + kSmallBuffer - 1) / kSmallBuffer * kSmallBuffer;
    out_.push_back({0, TorchActionKind::SegmentAlloc, address, size, stream, 0});
    return address;
  }
  void free(uint64_t address, uint64_t size, uint64_t stream) override {
    used -= size;
    out_.push_back({0, TorchActionKind::SegmentFree, address, size, stream, 0});
  }
  uint64_t reserve(uint64_t size, uint64_t) override {
    const uint64_t address = next_;
    next_ += size;
    return address;
  }
  void release_reservation(uint64_t, uint64_t) override {}
  bool map(uint64_t address, uint64_t size, uint64_t stream) override {
    out_.push_back({0, TorchActionKind::SegmentMap, address, size, stream, 0});
    return true;
  }
  void unmap(uint64_t address, uint64_t size, uint64_t stream) override {
    out_.push_back({0, TorchActionKind::SegmentUnmap, address, size, stream, 0});
  }

 private:
  std::vector<TorchAction>& out_;
  uint64_t next_ = 0x7f0000000000;
};

std::vector<TorchAction> training_loop(size_t target_actions, uint64_t final_request) {
  std::vector<TorchAction> actions;
  actions.reserve(target_actions + 1024);
  WritingMemory memory(actions);
  CachingAllocatorReplay writer({}, memory, uint64_t{80} << 30);
  std::mt19937_64 random(37);
  std::uniform_real_distribution<double> unit(0, 1);
  auto size = [&] {
    const double u = unit(random);
    if (u < 0.4) return static_cast<uint64_t>(512 + unit(random) * (1 << 20));         // small pool
    if (u < 0.85) return static_cast<uint64_t>((1 << 20) + unit(random) * (9 << 20));  // 1-10 MiB
    return static_cast<uint64_t>((10 << 20) + unit(random) * (190 << 20));             // 10-200 MiB
  };
  struct Live {
    uint64_t key, address, stream;
  };
  std::vector<Live> kept;
  uint64_t key = 0;
  auto release = [&](const Live& live) {
    writer.free_completed(live.key);
    actions.push_back({0, TorchActionKind::FreeCompleted, live.address, 0, live.stream, 0});
  };
  while (actions.size() < target_actions) {
    std::vector<Live> step;
    for (int i = 0; i < 200; ++i) {
      const uint64_t stream = unit(random) < 0.9 ? 0 : 0x5a5a00;
      const uint64_t bytes = size();
      auto got = writer.malloc(++key, bytes, stream);
      actions.push_back({0, TorchActionKind::Alloc, got.address, bytes, stream, 0});
      step.push_back({key, got.address, stream});
      if (unit(random) < 0.3) {  // a temporary freed at once
        release(step.back());
        step.pop_back();
      }
    }
    if (unit(random) < 0.5 && !step.empty()) {  // a tensor kept for a while
      kept.push_back(step.back());
      step.pop_back();
    }
    for (auto it = step.rbegin(); it != step.rend(); ++it) release(*it);
    if (kept.size() > 8) {
      release(kept.front());
      kept.erase(kept.begin());
    }
  }
  // The end: a device with 64 MiB free beyond what is reserved, and a request (by default 1.5x what is reserved)
  // that cudaMalloc refuses: PyTorch frees its whole cached segments, tries again, and raises OutOfMemoryError
  // when that is still not enough (device free then: the capacity less what stays reserved).
  const uint64_t reserved = writer.stats().reserved;
  memory.capacity = reserved + (uint64_t{64} << 20);
  const uint64_t request = final_request ? final_request : (reserved + reserved / 2) / kRoundLarge * kRoundLarge;
  auto last = writer.malloc(++key, request, 0);
  if (last.ok) {
    actions.push_back({0, TorchActionKind::Alloc, last.address, request, 0, 0});
  } else {
    const int64_t device_free = static_cast<int64_t>(*memory.capacity - writer.stats().reserved);
    actions.push_back({0, TorchActionKind::Oom, 0, last.rounded, 0, device_free});
  }
  int64_t id = 0;
  for (TorchAction& a : actions) a.event_id = ++id;
  return actions;
}

// The stream as the recorder writes it (the OOM's address: the device's free bytes, v10).
bool write_trace(const std::string& path, const std::vector<TorchAction>& actions) {
  using gmt::schema::Api;
  using gmt::schema::EventKind;
  std::string error;
  sqlite3* db = gmt::schema::create_trace_file(path, error);
  if (!db) {
    std::fprintf(stderr, "replay_speed: %s\n", error.c_str());
    return false;
  }
  sqlite3_exec(db, "PRAGMA synchronous = OFF; BEGIN", nullptr, nullptr, nullptr);
  for (auto [key, value] : {std::pair<const char*, std::string>{gmt::schema::meta::kTensorBlocks, "1"},
                            {gmt::schema::meta::kTorchAllocConf, ""},
                            {gmt::schema::meta::kComplete, "1"},
                            {gmt::schema::meta::kDroppedEvents, "0"},
                            {gmt::schema::meta::kEventsTimeOrdered, "1"},
                            {gmt::schema::meta::kStartMonotonicNs, "1000"},
                            {gmt::schema::meta::kPid, "1"},
                            {gmt::schema::meta::kDevices, "0"}}) {
    gmt::schema::set_meta(db, key, value);
  }
  sqlite3_stmt* insert = nullptr;
  sqlite3_prepare_v2(db,
                     "INSERT INTO events(time_ns, kind, api, source, memory_kind, thread_id, device, stream, address, "
                     "size, stack_id, error) VALUES (?1, ?2, ?3, 4, 6, 1, 0, ?4, ?5, ?6, 0, ?7)",
                     -1, &insert, nullptr);
  int64_t time = 1000;
  auto row = [&](EventKind kind, Api api, const TorchAction& a, int64_t error_code) {
    sqlite3_bind_int64(insert, 1, ++time);
    sqlite3_bind_int64(insert, 2, static_cast<int64_t>(kind));
    sqlite3_bind_int64(insert, 3, static_cast<int64_t>(api));
    sqlite3_bind_int64(insert, 4, static_cast<int64_t>(a.stream));
    sqlite3_bind_int64(insert, 5, static_cast<int64_t>(a.address));
    sqlite3_bind_int64(insert, 6, static_cast<int64_t>(a.size));
    sqlite3_bind_int64(insert, 7, error_code);
    sqlite3_step(insert);
    sqlite3_reset(insert);
  };
  for (const TorchAction& a : actions) {
    switch (a.kind) {
      case TorchActionKind::Alloc: row(EventKind::Alloc, Api::torchBlockAlloc, a, 0); break;
      case TorchActionKind::FreeCompleted: row(EventKind::Free, Api::torchBlockFree, a, 0); break;
      case TorchActionKind::SegmentAlloc: row(EventKind::SegmentAlloc, Api::torchSegmentAlloc, a, 0); break;
      case TorchActionKind::SegmentFree: row(EventKind::SegmentFree, Api::torchSegmentFree, a, 0); break;
      case TorchActionKind::Oom: {
        TorchAction oom = a;
        oom.address = static_cast<uint64_t>(a.value);
        row(EventKind::AllocFailed, Api::torchBlockAlloc, oom, 2);
        break;
      }
      default: break;
    }
  }
  sqlite3_finalize(insert);
  const bool ok = sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr) == SQLITE_OK;
  sqlite3_close(db);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  size_t target = 4'000'000;
  bool smoke = false;
  std::string trace_path;
  uint64_t final_request = 0;  // --final-request-mib: the OOM's request (default 1.5x what is reserved)
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--final-request-mib") && i + 1 < argc) {
      final_request = std::strtoull(argv[++i], nullptr, 10) << 20;
    }
    if (!std::strcmp(argv[i], "--smoke")) smoke = true;
    if (!std::strcmp(argv[i], "--write-trace") && i + 1 < argc) trace_path = argv[++i];
    if (!std::strcmp(argv[i], "--actions") && i + 1 < argc) target = std::strtoull(argv[++i], nullptr, 10);
  }
  if (smoke) target = 50'000;
  const std::vector<TorchAction> actions = training_loop(target, final_request);
  std::printf("replay_speed: %zu allocator actions (a synthetic training loop, two streams)\n", actions.size());
  int failures = 0;
  auto run = [&](const std::string& label, ReplayMode mode, const std::string& settings) {
    ReplayInputs inputs;
    inputs.mode = mode;
    inputs.device_total = uint64_t{80} << 30;
    if (apply_alloc_conf(settings, inputs.config)) return;
    VectorActions source(actions);
    const auto start = std::chrono::steady_clock::now();
    const ReplayResult result = run_replay(source, inputs);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("  %-44s %8.2f M actions/s  (%.3f s, peak reserved %.1f MiB%s)\n", label.c_str(),
                static_cast<double>(actions.size()) / seconds / 1e6, seconds,
                static_cast<double>(result.peak_reserved) / 1048576.0,
                result.divergence_event ? ", stopped early" : "");
    if (mode == ReplayMode::SelfCheck && result.divergence_event) {
      std::printf("    self-check diverged at %lld: %s\n", static_cast<long long>(*result.divergence_event),
                  result.divergence.c_str());
      ++failures;
    }
  };
  run("self-check (default, recorded segments)", ReplayMode::SelfCheck, "");
  for (const char* settings : {"", "expandable_segments:True", "max_split_size_mb:128", "roundup_power2_divisions:4",
                               "max_split_size_mb:512,max_non_split_rounding_mb:256"}) {
    run(std::string("what-if ") + (*settings ? settings : "default"), ReplayMode::WhatIf, settings);
  }
  if (!trace_path.empty() && !write_trace(trace_path, actions)) return 2;
  return failures ? 1 : 0;
}
