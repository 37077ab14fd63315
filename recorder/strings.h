// Interned strings (NVTX domain, range and marker names): equal texts get equal ids (1, 2, ...), written once
// into the trace's strings table. Hooks intern on their hot path, so a name seen before costs a hash and a
// compare in a per-thread cache, without a lock; a new name takes one mutex that guards nothing else.
//
// Ids are process-wide and never change, also across fork: objects that keep an id (a registered NVTX string,
// a domain) stay valid in a forked child, whose fresh trace writes every string again from id 1
// (TraceWriter keeps its own count of strings written).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace gmt::recorder {

// Past this many distinct strings, intern() returns 0 ("no name"): an app that names every iteration
// differently must not grow the table without bound.
inline constexpr uint32_t kMaxStrings = 1u << 20;
// Longer texts are cut (at a UTF-8 character boundary) before interning.
inline constexpr size_t kMaxStringBytes = 4096;

// The id of `text` (0 for an empty text or a full table). Thread-safe, fork-safe; never call it while
// holding the recorder's lock (it is a leaf lock of its own).
uint32_t intern_string(std::string_view text);

// How many strings exist: ids 1..string_count(). Read by the writer without a lock (acquire).
uint32_t string_count();
// The text of id (1..string_count()), stable for the life of the process.
std::string_view string_text(uint32_t id);

}  // namespace gmt::recorder
