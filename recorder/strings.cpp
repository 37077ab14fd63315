#include "recorder/strings.h"

#include <pthread.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string_view>
#include <unordered_map>

namespace gmt::recorder {
namespace {

constexpr uint32_t kChunkStrings = 4096;
constexpr uint32_t kMaxChunks = kMaxStrings / kChunkStrings;
constexpr uint32_t kCacheSlots = 64;  // per thread; a power of two

struct Entry {
  const char* text;
  uint32_t length;
};

// Texts are copied once and never freed; the writer reads entries 1..count without the mutex: a chunk and its
// entries are written before `count` is published (release), and read after it (acquire).
struct Table {
  std::mutex mutex;  // guards `ids` and the writing of entries; a leaf lock: nothing else is taken under it
  std::unordered_map<std::string_view, uint32_t> ids;  // views of the copied texts
  std::atomic<Entry*> chunks[kMaxChunks] = {};
  std::atomic<uint32_t> count{0};
};

Table& table() {
  static Table* t = new Table;  // leaked on purpose: hooks may intern until the very last destructor
  return *t;
}

// A name seen before on this thread costs a hash and a compare, no lock. Plain TLS (no destructor).
struct CacheSlot {
  uint64_t hash;
  const char* text;
  uint32_t length;
  uint32_t id;
};
thread_local CacheSlot t_cache[kCacheSlots];

uint64_t hash_bytes(const char* data, size_t size) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
  for (size_t i = 0; i < size; ++i) {
    h ^= static_cast<unsigned char>(data[i]);
    h *= 0x100000001b3ull;
  }
  return h | 1;  // never 0: an empty cache slot has hash 0
}

// Cut at kMaxStringBytes without splitting a UTF-8 sequence.
std::string_view clamp(std::string_view text) {
  if (text.size() <= kMaxStringBytes) return text;
  size_t end = kMaxStringBytes;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return text.substr(0, end);
}

uint32_t insert_locked(Table& t, std::string_view text) {
  if (auto it = t.ids.find(text); it != t.ids.end()) return it->second;
  uint32_t index = t.count.load(std::memory_order_relaxed);
  if (index >= kMaxStrings) return 0;
  auto& chunk_slot = t.chunks[index / kChunkStrings];
  Entry* chunk = chunk_slot.load(std::memory_order_relaxed);
  if (!chunk) {
    chunk = static_cast<Entry*>(std::calloc(kChunkStrings, sizeof(Entry)));
    if (!chunk) return 0;
    chunk_slot.store(chunk, std::memory_order_release);
  }
  char* copy = static_cast<char*>(std::malloc(text.size() + 1));
  if (!copy) return 0;
  std::memcpy(copy, text.data(), text.size());
  copy[text.size()] = '\0';
  chunk[index % kChunkStrings] = Entry{copy, static_cast<uint32_t>(text.size())};
  uint32_t id = index + 1;
  t.ids.emplace(std::string_view(copy, text.size()), id);
  t.count.store(id, std::memory_order_release);
  return id;
}

// The interning mutex is a leaf lock that app threads take: a fork while another thread holds it would leave
// the child's table locked (or half-updated) forever. Registered here rather than in lifecycle.cpp because
// the lock is private to this file; being a leaf, it cannot deadlock with the recorder's fork handlers
// whichever order they run in.
void lock_for_fork() { table().mutex.lock(); }
void unlock_after_fork() { table().mutex.unlock(); }

__attribute__((constructor)) void register_fork_handlers() {
  static bool done = false;  // the loader may run our constructors twice (a dlopen of us during exit)
  if (done) return;
  done = true;
  table();
  pthread_atfork(lock_for_fork, unlock_after_fork, unlock_after_fork);
}

}  // namespace

uint32_t intern_string(std::string_view text) {
  text = clamp(text);
  if (text.empty()) return 0;
  uint64_t h = hash_bytes(text.data(), text.size());
  CacheSlot& slot = t_cache[h & (kCacheSlots - 1)];
  if (slot.hash == h && slot.length == text.size() && std::memcmp(slot.text, text.data(), text.size()) == 0) {
    return slot.id;
  }
  Table& t = table();
  uint32_t id;
  {
    std::lock_guard lock(t.mutex);
    id = insert_locked(t, text);
  }
  if (id != 0) {
    std::string_view stored = string_text(id);
    slot = CacheSlot{h, stored.data(), static_cast<uint32_t>(stored.size()), id};
  }
  return id;
}

uint32_t string_count() { return table().count.load(std::memory_order_acquire); }

std::string_view string_text(uint32_t id) {
  if (id == 0 || id > kMaxStrings) return {};
  Entry* chunk = table().chunks[(id - 1) / kChunkStrings].load(std::memory_order_acquire);
  if (!chunk) return {};
  const Entry& e = chunk[(id - 1) % kChunkStrings];
  return std::string_view(e.text, e.length);
}

}  // namespace gmt::recorder
