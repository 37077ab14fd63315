#include "recorder/python_frames.h"

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string_view>

#include "recorder/python_frame_table.h"
#include "recorder/python_layouts.h"
#include "recorder/strings.h"

namespace gmt::recorder {
namespace {

using GetThisThreadState = void* (*)();
using IsInitialized = int (*)();
using Addr2Line = int (*)(void* code, int byte_offset);
using GetVersion = const char* (*)();

struct Range {
  uintptr_t begin = 0;
  uintptr_t end = 0;
  bool holds(uintptr_t pc) const { return pc >= begin && pc < end; }
};

// What the first stack capture found out about the process; never changes afterwards.
struct Interpreter {
  bool usable = false;
  const PythonLayout* layout = nullptr;
  GetThisThreadState this_thread_state = nullptr;
  IsInitialized is_initialized = nullptr;
  Addr2Line addr2line = nullptr;
  uintptr_t code_type = 0;     // &PyCode_Type
  uintptr_t unicode_type = 0;  // &PyUnicode_Type
  Range module;                // the interpreter's module (libpython, or the python executable)
  bool drop_module_frames = false;
  Range eval_loop;  // _PyEval_EvalFrameDefault
};

Range module_range_of(const void* address, bool& is_python_named) {
  Range range;
  Dl_info info{};
  is_python_named = false;
  if (dladdr(address, &info) == 0 || info.dli_fbase == nullptr) return range;
  struct Search {
    uintptr_t base;
    Range* range;
    bool* python_named;
  } search{reinterpret_cast<uintptr_t>(info.dli_fbase), &range, &is_python_named};
  dl_iterate_phdr(
      [](dl_phdr_info* phdr_info, size_t, void* data) -> int {
        auto* s = static_cast<Search*>(data);
        uintptr_t low = UINTPTR_MAX, high = 0;
        for (int i = 0; i < phdr_info->dlpi_phnum; ++i) {
          const auto& ph = phdr_info->dlpi_phdr[i];
          if (ph.p_type != PT_LOAD) continue;
          low = std::min<uintptr_t>(low, phdr_info->dlpi_addr + ph.p_vaddr);
          high = std::max<uintptr_t>(high, phdr_info->dlpi_addr + ph.p_vaddr + ph.p_memsz);
        }
        if (s->base < low || s->base >= high) return 0;
        *s->range = Range{low, high};
        return 1;
      },
      &search);
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
  const char* off = std::getenv(kEnvNoPythonFrames);
  if (off && std::strcmp(off, "1") == 0) return py;
  void* this_thread_state = dlsym(RTLD_DEFAULT, "PyGILState_GetThisThreadState");
  if (!this_thread_state) return py;  // not a CPython process
  int minor = detect_minor_version();
  py.layout = python_layout_for(minor);
  if (!py.layout) {
    std::fprintf(stderr,
                 "gpumemtrace: Python frames are not supported on CPython 3.%d (supported: 3.11, 3.12); "
                 "stacks stay native\n",
                 minor);
    return py;
  }
  py.this_thread_state = reinterpret_cast<GetThisThreadState>(this_thread_state);
  py.is_initialized = reinterpret_cast<IsInitialized>(dlsym(RTLD_DEFAULT, "Py_IsInitialized"));
  py.addr2line = reinterpret_cast<Addr2Line>(dlsym(RTLD_DEFAULT, "PyCode_Addr2Line"));
  py.code_type = reinterpret_cast<uintptr_t>(dlsym(RTLD_DEFAULT, "PyCode_Type"));
  py.unicode_type = reinterpret_cast<uintptr_t>(dlsym(RTLD_DEFAULT, "PyUnicode_Type"));
  if (!py.is_initialized || !py.addr2line || !py.code_type || !py.unicode_type) return py;
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
  return py;
}

const Interpreter& interpreter() {
  static const Interpreter py = find_interpreter();
  return py;
}

// Pointers read out of the interpreter's structures are checked before use: a layout that does not match
// (an unexpected build) must end the walk, never crash the app.
bool plausible(uintptr_t p) { return p >= 4096 && p < (uintptr_t{1} << 47) && (p & 7) == 0; }

template <typename T>
T read_at(uintptr_t base, size_t offset) {
  T value;
  std::memcpy(&value, reinterpret_cast<const void*>(base + offset), sizeof(T));
  return value;
}

// One Python frame as found in the chain: the code object and the index of its current instruction.
struct RawPythonFrame {
  uintptr_t code;
  int32_t instruction;
};

constexpr int kMaxPythonDepth = 64;   // frames kept per stack
constexpr int kMaxFramesVisited = 512;  // frames looked at (incomplete and shim frames included)

// The calling thread's Python frames, innermost first, split into runs of the eval loop: run k is
// frames[run_end[k - 1] .. run_end[k]). Returns the number of runs (0: no Python frames).
struct PythonStack {
  RawPythonFrame frames[kMaxPythonDepth];
  int run_end[kMaxPythonDepth];
  int frame_count = 0;
  int run_count = 0;

  void end_run() {
    if (run_count < kMaxPythonDepth) run_end[run_count++] = frame_count;
  }
};

void read_python_stack(const Interpreter& py, PythonStack& stack) {
  if (!py.is_initialized()) return;
  auto tstate = reinterpret_cast<uintptr_t>(py.this_thread_state());
  if (!plausible(tstate)) return;
  const PythonLayout& l = *py.layout;
  uintptr_t cframe = read_at<uintptr_t>(tstate, l.thread_state_cframe);
  if (!plausible(cframe)) return;
  uintptr_t frame = read_at<uintptr_t>(cframe, l.cframe_current_frame);
  int open_frames = 0;  // frames in the run not ended yet
  for (int visited = 0; visited < kMaxFramesVisited && plausible(frame); ++visited) {
    char owner = read_at<char>(frame, l.frame_owner);
    if (owner == kFrameOwnedByCStack && l.has_cstack_shim) {
      stack.end_run();  // the shim that the eval loop pushes on entry closes the run it started
      open_frames = 0;
      frame = read_at<uintptr_t>(frame, l.frame_previous);
      continue;
    }
    uintptr_t code = read_at<uintptr_t>(frame, l.frame_code);
    if (!plausible(code) || read_at<uintptr_t>(code, kObjectTypeOffset) != py.code_type) break;
    auto first_instruction = code + l.code_adaptive;
    auto prev_instr = read_at<uintptr_t>(frame, l.frame_prev_instr);
    auto instruction = static_cast<int64_t>(prev_instr - first_instruction) / 2;
    int64_t code_units = read_at<int64_t>(code, kVarObjectSizeOffset);
    // Frames that have not reached their first traceable instruction yet are still being set up.
    bool incomplete = owner != kFrameOwnedByGenerator &&
                      instruction < read_at<int32_t>(code, l.code_first_traceable);
    if (!incomplete && instruction >= 0 && instruction < code_units && stack.frame_count < kMaxPythonDepth) {
      stack.frames[stack.frame_count++] = RawPythonFrame{code, static_cast<int32_t>(instruction)};
      ++open_frames;
    }
    if (l.frame_is_entry >= 0 && read_at<bool>(frame, static_cast<size_t>(l.frame_is_entry))) {
      stack.end_run();  // 3.11: the frame the eval loop was entered with
      open_frames = 0;
    }
    frame = read_at<uintptr_t>(frame, l.frame_previous);
  }
  if (open_frames > 0) stack.end_run();
}

// Copies a str object's text as UTF-8 into buf; returns the bytes written (0 when it cannot be read).
size_t copy_unicode(const Interpreter& py, uintptr_t text, char* buf, size_t capacity) {
  if (!plausible(text) || read_at<uintptr_t>(text, kObjectTypeOffset) != py.unicode_type) return 0;
  auto length = read_at<int64_t>(text, kUnicodeLengthOffset);
  auto state = read_at<uint32_t>(text, kUnicodeStateOffset);
  unsigned kind = (state >> 2) & 7;
  bool compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
  if (!compact || length < 0) return 0;  // code object names are always compact
  const PythonLayout& l = *py.layout;
  if (ascii) {
    size_t n = std::min<size_t>(static_cast<size_t>(length), capacity);
    std::memcpy(buf, reinterpret_cast<const void*>(text + l.unicode_ascii_size), n);
    return n;
  }
  if (kind != 1 && kind != 2 && kind != 4) return 0;
  auto data = reinterpret_cast<const unsigned char*>(text + l.unicode_compact_size);
  size_t out = 0;
  for (int64_t i = 0; i < length; ++i) {
    uint32_t c = kind == 1 ? data[i] : kind == 2 ? read_at<uint16_t>(text + l.unicode_compact_size, i * 2)
                                                 : read_at<uint32_t>(text + l.unicode_compact_size, i * 4);
    char encoded[4];
    size_t n;
    if (c < 0x80) {
      encoded[0] = static_cast<char>(c), n = 1;
    } else if (c < 0x800) {
      encoded[0] = static_cast<char>(0xC0 | c >> 6), encoded[1] = static_cast<char>(0x80 | (c & 0x3F)), n = 2;
    } else if (c < 0x10000) {
      encoded[0] = static_cast<char>(0xE0 | c >> 12), encoded[1] = static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      encoded[2] = static_cast<char>(0x80 | (c & 0x3F)), n = 3;
    } else {
      encoded[0] = static_cast<char>(0xF0 | c >> 18), encoded[1] = static_cast<char>(0x80 | ((c >> 12) & 0x3F));
      encoded[2] = static_cast<char>(0x80 | ((c >> 6) & 0x3F)), encoded[3] = static_cast<char>(0x80 | (c & 0x3F));
      n = 4;
    }
    if (out + n > capacity) break;
    std::memcpy(buf + out, encoded, n);
    out += n;
  }
  return out;
}

// First-seen frames are resolved once per thread: a cache keyed by everything that makes the answer.
struct CacheSlot {
  uintptr_t code;
  uintptr_t file;
  uintptr_t function;
  uintptr_t line_table;
  int32_t instruction;
  uint32_t id;
};
// Per thread, in every thread of the process (12 KiB): small, and in the default TLS model, so that the library
// still loads when it is dlopen'ed (an injection path) rather than preloaded.
constexpr uint32_t kCacheSlots = 256;  // a power of two
thread_local CacheSlot t_cache[kCacheSlots];

uint32_t resolve(const Interpreter& py, const RawPythonFrame& frame) {
  const PythonLayout& l = *py.layout;
  uintptr_t file = read_at<uintptr_t>(frame.code, l.code_filename);
  uintptr_t function = read_at<uintptr_t>(frame.code, l.code_qualname);
  uintptr_t line_table = read_at<uintptr_t>(frame.code, l.code_linetable);
  uint64_t h = (frame.code >> 4) * 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(frame.instruction) * 0xC2B2AE3Dull;
  CacheSlot& slot = t_cache[(h >> 24) & (kCacheSlots - 1)];
  if (slot.id != 0 && slot.code == frame.code && slot.instruction == frame.instruction && slot.file == file &&
      slot.function == function && slot.line_table == line_table) {
    return slot.id;
  }
  char file_text[1024], function_text[512];
  size_t file_length = copy_unicode(py, file, file_text, sizeof file_text);
  size_t function_length = copy_unicode(py, function, function_text, sizeof function_text);
  PythonFrameRow row;
  row.file_id = intern_string(std::string_view(file_text, file_length));
  row.function_id = intern_string(std::string_view(function_text, function_length));
  row.line = std::max(0, py.addr2line(reinterpret_cast<void*>(frame.code), frame.instruction * 2));
  uint32_t id = intern_python_frame(row);
  if (id != 0) slot = CacheSlot{frame.code, file, function, line_table, frame.instruction, id};
  return id;
}

}  // namespace

int merge_python_frames(void* const* native, int n, uintptr_t* out, int max_out) {
  const Interpreter& py = interpreter();
  if (!py.usable) return -1;
  PythonStack python;
  read_python_stack(py, python);
  if (python.frame_count == 0) return -1;

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
    if (py.module.holds(pc - 1)) {
      if (!in_interpreter) in_interpreter = true, run_emitted = false;
      if (py.eval_loop.holds(pc - 1)) {
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

}  // namespace gmt::recorder
