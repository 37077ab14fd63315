#include "unwind/python_frames.h"

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string_view>

#include "recorder/python_frame_table.h"
#include "recorder/strings.h"
#include "schema/environment.h"
#include "unwind/fast_unwind.h"
#include "unwind/module_ranges.h"
#include "unwind/python_layouts.h"
#include "unwind/python_memory.h"

namespace gmt::unwind {
namespace {

using recorder::intern_python_frame;
using recorder::intern_string;
using recorder::PythonFrameRow;

using GetThisThreadState = void* (*)();
using IsInitialized = int (*)();
using Addr2Line = int (*)(void* code, int byte_offset);
using GetVersion = const char* (*)();

// A range of code addresses: a module, or one function.
using Range = ModuleRange;

// What the first stack capture found out about the process; never changes afterwards.
struct Interpreter {
  bool usable = false;
  const PythonLayout* layout = nullptr;
  GetThisThreadState this_thread_state = nullptr;
  IsInitialized is_initialized = nullptr;
  Addr2Line addr2line = nullptr;
  uintptr_t code_type = 0;     // &PyCode_Type
  uintptr_t unicode_type = 0;  // &PyUnicode_Type
  uintptr_t frame_type = 0;    // &PyFrame_Type: the frames of a frame-object chain (3.9, 3.10)
  uintptr_t bytes_type = 0;    // &PyBytes_Type: their code's co_code
  Range module;                // the interpreter's module (libpython, or the python executable)
  bool drop_module_frames = false;
  Range eval_loop;  // _PyEval_EvalFrameDefault
};

Range module_range_of(const void* address, bool& is_python_named) {
  Range range;
  Dl_info info{};
  is_python_named = false;
  if (dladdr(address, &info) == 0 || info.dli_fbase == nullptr) return range;
  range = module_range_containing(reinterpret_cast<uintptr_t>(info.dli_fbase));
  // Only a module that is plainly the interpreter has its other frames dropped: an application that links
  // Python into its own executable keeps its frames.
  std::string_view path = info.dli_fname ? info.dli_fname : "";
  std::string_view base = path.substr(path.rfind('/') == std::string_view::npos ? 0 : path.rfind('/') + 1);
  is_python_named = base.starts_with("libpython") || base.starts_with("python");
  return range;
}

int detect_minor_version() {
  // Py_Version (3.11+) is the version as a number; older interpreters only have the text.
  if (auto* hex = reinterpret_cast<const unsigned long*>(dlsym(RTLD_DEFAULT, "Py_Version"))) {
    if ((*hex >> 24) != 3) return -1;
    return static_cast<int>((*hex >> 16) & 0xFF);
  }
  auto get_version = reinterpret_cast<GetVersion>(dlsym(RTLD_DEFAULT, "Py_GetVersion"));
  if (!get_version) return -1;
  int major = 0, minor = 0;
  if (std::sscanf(get_version(), "%d.%d", &major, &minor) != 2 || major != 3) return -1;
  return minor;
}

Interpreter find_interpreter() {
  Interpreter py;
  const char* off = std::getenv(schema::env::kNoPythonFrames);
  if (off && std::strcmp(off, "1") == 0) return py;
  void* this_thread_state = dlsym(RTLD_DEFAULT, "PyGILState_GetThisThreadState");
  if (!this_thread_state) return py;  // not a CPython process
  int minor = detect_minor_version();
  py.layout = python_layout_for(minor);
  if (!py.layout) {
    std::fprintf(stderr,
                 "gpumemtrace: Python frames are not supported on CPython 3.%d (supported: %s); "
                 "stacks stay native\n",
                 minor, kSupportedPythonVersions);
    return py;
  }
  // A free-threaded build (3.13t) has another object header (ob_type at 24): the layouts are for GIL builds.
  if (dlsym(RTLD_DEFAULT, "_Py_MergeZeroLocalRefcount")) {
    std::fprintf(stderr,
                 "gpumemtrace: Python frames are not supported on free-threaded CPython 3.%d (supported: %s, "
                 "with the GIL); stacks stay native\n",
                 minor, kSupportedPythonVersions);
    return py;
  }
  py.this_thread_state = reinterpret_cast<GetThisThreadState>(this_thread_state);
  py.is_initialized = reinterpret_cast<IsInitialized>(dlsym(RTLD_DEFAULT, "Py_IsInitialized"));
  py.addr2line = reinterpret_cast<Addr2Line>(dlsym(RTLD_DEFAULT, "PyCode_Addr2Line"));
  py.code_type = reinterpret_cast<uintptr_t>(dlsym(RTLD_DEFAULT, "PyCode_Type"));
  py.unicode_type = reinterpret_cast<uintptr_t>(dlsym(RTLD_DEFAULT, "PyUnicode_Type"));
  py.frame_type = reinterpret_cast<uintptr_t>(dlsym(RTLD_DEFAULT, "PyFrame_Type"));
  py.bytes_type = reinterpret_cast<uintptr_t>(dlsym(RTLD_DEFAULT, "PyBytes_Type"));
  if (!py.is_initialized || !py.addr2line || !py.code_type || !py.unicode_type) return py;
  if (py.layout->chain == FrameChain::kFrameObjects && (!py.frame_type || !py.bytes_type)) return py;
  py.module = module_range_of(this_thread_state, py.drop_module_frames);
  if (void* eval = dlsym(RTLD_DEFAULT, "_PyEval_EvalFrameDefault")) {
    // The symbol's size bounds the eval loop (a compiler-split ".cold" part is outside it: see the rule).
    Dl_info info{};
    void* entry = nullptr;
    if (dladdr1(eval, &info, &entry, RTLD_DL_SYMENT) != 0 && entry) {
      auto size = static_cast<const ElfW(Sym)*>(entry)->st_size;
      if (size > 0) py.eval_loop = Range{reinterpret_cast<uintptr_t>(eval), reinterpret_cast<uintptr_t>(eval) + size};
    }
  }
  py.usable = true;
  // Stored walks may answer up to the eval loop from now on: the Python chain stands for what lies beyond it.
  if (!py.eval_loop.empty()) set_walk_cut(py.eval_loop.begin, py.eval_loop.end);
  return py;
}

const Interpreter& interpreter() {
  static const Interpreter py = find_interpreter();
  return py;
}

// The byte offset of a frame that has not run an instruction yet: PyCode_Addr2Line gives co_firstlineno for it.
constexpr int32_t kNotStarted = -1;

constexpr int kMaxFramesVisited = 512;  // frames looked at (incomplete and shim frames included)

bool is_code(const Interpreter& py, uintptr_t code) {
  return plausible(code) && read_at<uintptr_t>(code, kObjectTypeOffset) == py.code_type;
}

// The size in bytes of a code object's bytecode, which a frame's position must fall inside (-1: unreadable).
int64_t bytecode_size(const Interpreter& py, uintptr_t code) {
  const PythonLayout& l = *py.layout;
  if (l.code_bytes == kAbsent) return read_at<int64_t>(code, kVarObjectSizeOffset) * 2;  // code units
  auto bytes = read_at<uintptr_t>(code, static_cast<size_t>(l.code_bytes));
  if (!plausible(bytes) || read_at<uintptr_t>(bytes, kObjectTypeOffset) != py.bytes_type) return -1;
  return read_at<int64_t>(bytes, kVarObjectSizeOffset);
}

// The calling thread's innermost frame (0: none).
uintptr_t innermost_frame(const Interpreter& py) {
  if (!py.is_initialized()) return 0;
  auto tstate = reinterpret_cast<uintptr_t>(py.this_thread_state());
  if (!plausible(tstate)) return 0;
  const PythonLayout& l = *py.layout;
  auto frame = read_at<uintptr_t>(tstate, l.thread_state_frame);
  if (l.cframe_current_frame == kAbsent) return frame;
  if (!plausible(frame)) return 0;  // a _PyCFrame
  return read_at<uintptr_t>(frame, static_cast<size_t>(l.cframe_current_frame));
}

// One step of the signature's hash: a multiply-xor chain, as for native stacks (recorder/stacks.cpp).
inline uint64_t mix(uint64_t h, uint64_t value) { return (h ^ value) * 0x9e3779b97f4a7c15ull; }
inline uint64_t rotate(uint64_t value, int bits) { return (value << bits) | (value >> (64 - bits)); }
// One frame's part of the chain key: its address, code object, position and run flags. One multiply per frame (in
// mix): the chain of them is the key loop's latency, beside the loads of the frame chain.
inline uint64_t frame_value(uintptr_t frame, uintptr_t code, uint64_t position, uint64_t flags) {
  return frame + rotate(code, 21) + rotate(position ^ (flags << 48), 42);
}

void read_chain(const Interpreter& py, PythonStack& stack) {
  const PythonLayout& l = *py.layout;
  int open_frames = 0;  // frames in the run not ended yet
  auto keep = [&](uintptr_t code, int64_t byte_offset) {
    if (byte_offset >= kNotStarted && byte_offset < bytecode_size(py, code) && stack.frame_count < kMaxPythonDepth) {
      stack.frames[stack.frame_count++] = RawPythonFrame{code, static_cast<int32_t>(byte_offset)};
      ++open_frames;
    }
  };
  auto end_run = [&] {
    stack.end_run();
    open_frames = 0;
  };
  uintptr_t frame = innermost_frame(py);
  for (int visited = 0; visited < kMaxFramesVisited && plausible(frame) && !stack.full(); ++visited) {
    if (l.chain == FrameChain::kFrameObjects) {
      if (read_at<uintptr_t>(frame, kObjectTypeOffset) != py.frame_type) break;
      auto code = read_at<uintptr_t>(frame, l.frame_code);
      if (!is_code(py, code)) break;
      // f_lasti is -1 until the frame's first instruction, e.g. while a profile hook sees the call: CPython
      // shows such a frame on its first line, as 3.11+ show it at its RESUME (kNotStarted).
      auto lasti = read_at<int32_t>(frame, l.frame_position);
      keep(code, lasti >= 0 ? int64_t{lasti} * l.lasti_bytes_per_unit : kNotStarted);
      end_run();  // kEveryFrame: one call of the eval loop per frame
      frame = read_at<uintptr_t>(frame, l.frame_previous);
      continue;
    }
    auto owner = read_at<char>(frame, static_cast<size_t>(l.frame_owner));
    if (owner == kFrameOwnedByCStack && l.entry == EvalLoopEntry::kCStackShim) {
      end_run();  // the shim that the eval loop pushes on entry closes the run it started
      frame = read_at<uintptr_t>(frame, l.frame_previous);
      continue;
    }
    auto code = read_at<uintptr_t>(frame, l.frame_code);
    if (!is_code(py, code)) break;
    auto position = read_at<uintptr_t>(frame, l.frame_position);
    auto byte_offset = static_cast<int64_t>(position - (code + static_cast<size_t>(l.code_adaptive)));
    // Frames that have not reached their first traceable instruction yet are still being set up.
    bool incomplete = owner != kFrameOwnedByGenerator &&
                      byte_offset < 2 * int64_t{read_at<int32_t>(code, static_cast<size_t>(l.code_first_traceable))};
    if (!incomplete) keep(code, byte_offset);
    if (l.entry == EvalLoopEntry::kEntryFlag && read_at<char>(frame, static_cast<size_t>(l.frame_is_entry)) != 0) {
      end_run();  // 3.11: the frame the eval loop was entered with
    }
    frame = read_at<uintptr_t>(frame, l.frame_previous);
  }
  if (open_frames > 0) end_run();
}

// Code objects destroyed since they were first watched, plus one; 0: not watched (start_watching_code_objects).
std::atomic<uint64_t> g_code_epoch{0};

// See python_chain_key (python_frames.h): every frame of the chain by its address, code object, position and
// place in the runs, and each code object by the objects resolve() names it from, or, while code objects are
// watched, by its address under the count of code objects destroyed.
uint64_t chain_key(const Interpreter& py) {
  const PythonLayout& l = *py.layout;
  // Read before the frames: a code object destroyed after this read leaves no frame of this thread's chain (the
  // frames hold their code), and one at a reused address is only made after the count has moved on.
  const uint64_t code_epoch = g_code_epoch.load(std::memory_order_acquire);
  uintptr_t frame = innermost_frame(py);
  if (!plausible(frame)) return 0;
  const bool frame_objects = l.chain == FrameChain::kFrameObjects;
  uint64_t key = code_epoch == 0 ? 0x2545f4914f6cdd1dull : mix(0x61c8864680b583ebull, code_epoch);
  if (code_epoch != 0 && !frame_objects && l.frame_owner != kAbsent && l.frame_is_entry == kAbsent) {
    // The common case on its own: watched code objects and interpreter frames with an owner byte and no is_entry
    // flag (3.12, 3.13). The same key as the loop below, without its per-frame tests of the layout and the mode
    // (callgrind, 2026-12-07: ~38 instructions a frame there).
    const size_t code_at = l.frame_code, position_at = l.frame_position, previous_at = l.frame_previous;
    const auto owner_at = static_cast<size_t>(l.frame_owner);
    for (int visited = 0; visited < kMaxFramesVisited && plausible(frame); ++visited) {
      const auto code = read_at<uintptr_t>(frame, code_at);
      const auto position = read_at<uintptr_t>(frame, position_at);
      const uint64_t flags = static_cast<uint8_t>(read_at<char>(frame, owner_at));
      key = mix(key, frame_value(frame, code, position, flags));
      frame = read_at<uintptr_t>(frame, previous_at);
    }
    return key == 0 ? 1 : key;
  }
  for (int visited = 0; visited < kMaxFramesVisited && plausible(frame); ++visited) {
    const auto code = read_at<uintptr_t>(frame, l.frame_code);
    const uint64_t position = frame_objects ? static_cast<uint32_t>(read_at<int32_t>(frame, l.frame_position))
                                            : read_at<uintptr_t>(frame, l.frame_position);
    uint64_t flags = 0;
    if (l.frame_owner != kAbsent)
      flags = static_cast<uint8_t>(read_at<char>(frame, static_cast<size_t>(l.frame_owner)));
    if (l.frame_is_entry != kAbsent) {
      flags |= static_cast<uint64_t>(static_cast<uint8_t>(read_at<char>(frame, static_cast<size_t>(l.frame_is_entry))))
               << 8;
    }
    uint64_t value = frame_value(frame, code, position, flags);
    if (code_epoch != 0) {
      // Watched: the code object is named by its address under the count, and not read at all (in a deep chain
      // the outer frames' code objects are cache lines the app has not touched since it called down from them).
      // Nor is it checked to be code: a frame read_chain would stop at (its executable not a code object, none on
      // 3.12 and 3.13) is keyed with the frames beyond it, a longer key for the same stack, never another stack's.
    } else if (is_code(py, code)) {
      value ^= read_at<uintptr_t>(code, l.code_filename) ^ rotate(read_at<uintptr_t>(code, l.code_name), 13) ^
               rotate(read_at<uintptr_t>(code, l.code_linetable), 29);
    } else if (frame_objects || static_cast<char>(flags) != kFrameOwnedByCStack) {
      break;  // where read_chain stops too: what follows is not read as frames
    }
    key = mix(key, value);
    frame = read_at<uintptr_t>(frame, l.frame_previous);
  }
  return key == 0 ? 1 : key;
}

// First-seen frames are resolved once per thread: a cache keyed by everything that makes the answer.
struct CacheSlot {
  uintptr_t code;
  uintptr_t file;
  uintptr_t function;
  uintptr_t line_table;
  uint64_t code_epoch;  // while code objects are watched: a slot filled under another count is stale
  int32_t byte_offset;
  uint32_t id;
};
// Per thread, in every thread of the process (12 KiB): small, and in the default TLS model, so that the library
// still loads when it is dlopen'ed (an injection path) rather than preloaded.
constexpr uint32_t kCacheSlots = 256;  // a power of two
thread_local CacheSlot t_cache[kCacheSlots];

uint32_t resolve(const Interpreter& py, const RawPythonFrame& frame) {
  const PythonLayout& l = *py.layout;
  uintptr_t file = read_at<uintptr_t>(frame.code, l.code_filename);
  uintptr_t function = read_at<uintptr_t>(frame.code, l.code_name);
  uintptr_t line_table = read_at<uintptr_t>(frame.code, l.code_linetable);
  uint64_t h = (frame.code >> 4) * 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(frame.byte_offset) * 0xC2B2AE3Dull;
  CacheSlot& slot = t_cache[(h >> 24) & (kCacheSlots - 1)];
  const uint64_t code_epoch = g_code_epoch.load(std::memory_order_acquire);
  if (slot.id != 0 && slot.code == frame.code && slot.byte_offset == frame.byte_offset && slot.file == file &&
      slot.function == function && slot.line_table == line_table && slot.code_epoch == code_epoch) {
    return slot.id;
  }
  char file_text[1024], function_text[512];
  size_t file_length = copy_python_str(file, py.unicode_type, l, file_text, sizeof file_text);
  size_t function_length = copy_python_str(function, py.unicode_type, l, function_text, sizeof function_text);
  PythonFrameRow row;
  row.file_id = intern_string(std::string_view(file_text, file_length));
  row.function_id = intern_string(std::string_view(function_text, function_length));
  row.line = std::max(0, py.addr2line(reinterpret_cast<void*>(frame.code), frame.byte_offset));
  uint32_t id = intern_python_frame(row);
  if (id != 0) slot = CacheSlot{frame.code, file, function, line_table, code_epoch, frame.byte_offset, id};
  return id;
}

}  // namespace

void start_watching_code_objects() {
  uint64_t unwatched = 0;
  g_code_epoch.compare_exchange_strong(unwatched, 1, std::memory_order_acq_rel);
}

void note_code_object_destroyed() {
  // Only counted once watched: before, keys read the code objects themselves.
  if (g_code_epoch.load(std::memory_order_relaxed) != 0) g_code_epoch.fetch_add(1, std::memory_order_acq_rel);
}

bool code_objects_watched() { return g_code_epoch.load(std::memory_order_relaxed) != 0; }

uint64_t python_chain_key() {
  const Interpreter& py = interpreter();
  return py.usable ? chain_key(py) : 0;
}

bool read_python_stack(PythonStack& python) {
  const Interpreter& py = interpreter();
  python.frame_count = python.run_count = 0;
  if (!py.usable) return false;
  read_chain(py, python);
  return python.frame_count > 0;
}

int merge_python_frames(void* const* native, int n, uintptr_t* out, int max_out) {
  PythonStack python;
  if (!read_python_stack(python)) return -1;
  return merge_python_frames(python, native, n, out, max_out);
}

int merge_python_frames(const PythonStack& python, void* const* native, int n, uintptr_t* out, int max_out) {
  const Interpreter& py = interpreter();
  int written = 0, next_run = 0;
  auto emit_run = [&] {
    if (next_run >= python.run_count) return;
    int begin = next_run == 0 ? 0 : python.run_end[next_run - 1];
    for (int i = begin; i < python.run_end[next_run] && written < max_out; ++i) {
      if (uint32_t id = resolve(py, python.frames[i])) out[written++] = kPythonFrameTag | id;
    }
    ++next_run;
  };
  bool in_interpreter = false, run_emitted = false;
  for (int i = 0; i < n && written < max_out; ++i) {
    auto pc = reinterpret_cast<uintptr_t>(native[i]);
    if (py.module.contains(pc - 1)) {
      if (!in_interpreter) in_interpreter = true, run_emitted = false;
      if (py.eval_loop.contains(pc - 1)) {
        emit_run();
        run_emitted = true;
        continue;
      }
      if (py.drop_module_frames) continue;
    } else if (in_interpreter) {
      if (!run_emitted) emit_run();
      in_interpreter = false;
    }
    if (written < max_out) out[written++] = pc;
  }
  if (in_interpreter && !run_emitted) emit_run();
  while (next_run < python.run_count && written < max_out) emit_run();
  return written;
}

}  // namespace gmt::unwind
