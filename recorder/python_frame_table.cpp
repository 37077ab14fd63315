// The process-wide table of Python frames (file, function, line), interned like the strings: equal rows get
// equal ids (1, 2, ...), published to the writer with a release store of the count.
#include "recorder/python_frame_table.h"

#include <pthread.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <unordered_map>

namespace gmt::recorder {
namespace {

constexpr uint32_t kChunkRows = 4096;
constexpr uint32_t kMaxChunks = kMaxPythonFrames / kChunkRows;

struct RowKey {
  uint32_t file_id;
  uint32_t function_id;
  int32_t line;
  bool operator==(const RowKey&) const = default;
};

struct RowKeyHash {
  size_t operator()(const RowKey& k) const {
    uint64_t h = (uint64_t{k.file_id} << 32 | k.function_id) * 0x9E3779B97F4A7C15ull;
    return static_cast<size_t>(h ^ (static_cast<uint64_t>(static_cast<uint32_t>(k.line)) * 0xC2B2AE3D27D4EB4Full));
  }
};

struct Table {
  std::mutex mutex;  // guards `ids` and the writing of rows; a leaf lock
  std::unordered_map<RowKey, uint32_t, RowKeyHash> ids;
  std::atomic<PythonFrameRow*> chunks[kMaxChunks] = {};
  std::atomic<uint32_t> count{0};
};

Table& table() {
  static Table* t = new Table;  // leaked on purpose: hooks may intern until the very last destructor
  return *t;
}

// A fork while another thread holds the mutex would leave the child's table locked forever (see strings.cpp).
void lock_for_fork() { table().mutex.lock(); }
void unlock_after_fork() { table().mutex.unlock(); }

__attribute__((constructor)) void register_fork_handlers() {
  static bool done = false;
  if (done) return;
  done = true;
  table();
  pthread_atfork(lock_for_fork, unlock_after_fork, unlock_after_fork);
}

}  // namespace

uint32_t intern_python_frame(const PythonFrameRow& row) {
  Table& t = table();
  std::lock_guard lock(t.mutex);
  RowKey key{row.file_id, row.function_id, row.line};
  if (auto it = t.ids.find(key); it != t.ids.end()) return it->second;
  uint32_t index = t.count.load(std::memory_order_relaxed);
  if (index >= kMaxPythonFrames) return 0;
  auto& chunk_slot = t.chunks[index / kChunkRows];
  PythonFrameRow* chunk = chunk_slot.load(std::memory_order_relaxed);
  if (!chunk) {
    chunk = static_cast<PythonFrameRow*>(std::calloc(kChunkRows, sizeof(PythonFrameRow)));
    if (!chunk) return 0;
    chunk_slot.store(chunk, std::memory_order_release);
  }
  chunk[index % kChunkRows] = row;
  uint32_t id = index + 1;
  t.ids.emplace(key, id);
  t.count.store(id, std::memory_order_release);
  return id;
}

uint32_t python_frame_count() { return table().count.load(std::memory_order_acquire); }

PythonFrameRow python_frame_row(uint32_t id) {
  if (id == 0 || id > kMaxPythonFrames) return {};
  PythonFrameRow* chunk = table().chunks[(id - 1) / kChunkRows].load(std::memory_order_acquire);
  if (!chunk) return {};
  return chunk[(id - 1) % kChunkRows];
}

}  // namespace gmt::recorder
