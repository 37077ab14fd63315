// Whose code a frame is, and a stack as a person reads it (analysis/model/stack_view.h). The rules go by module file
// names and Python file paths, the only facts a trace holds about a frame's origin.
#include "analysis/model/stack_view.h"

#include <fmt/core.h>

#include <algorithm>
#include <array>

#include "analysis/format.h"

namespace gmt::analysis {
namespace {

bool starts_with(std::string_view text, std::string_view prefix) { return text.substr(0, prefix.size()) == prefix; }
bool contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

template <size_t N>
bool starts_with_any(std::string_view text, const std::array<std::string_view, N>& prefixes) {
  return std::any_of(prefixes.begin(), prefixes.end(), [&](std::string_view p) { return starts_with(text, p); });
}

// Native libraries by the start of their file name.
constexpr std::array<std::string_view, 8> kRuntimeLibraries = {"libc.so",  "libc-",   "libstdc++",  "libgcc_s",
                                                               "ld-linux", "libm.so", "libpthread", "libdl"};
constexpr std::array<std::string_view, 14> kCudaLibraries = {
    "libcuda.so", "libcudart", "libcupti",    "libnvrtc",    "libcublas",    "libcudnn",  "libnccl",
    "libcufft",   "libcurand", "libcusparse", "libcusolver", "libnvJitLink", "libnvidia", "libcudadebugger"};
constexpr std::array<std::string_view, 11> kFrameworkLibraries = {
    "libtorch", "libc10",        "libcaffe2", "libshm", "_C.",          "libtriton",
    "libxla",   "xla_extension", "libjax",    "cupy",   "libtensorflow"};

FrameOwner native_owner(const Frame& frame) {
  const std::string module = path_basename(*frame.module);
  if (starts_with(module, "libgpumemtrace")) return FrameOwner::Profiler;
  if (starts_with_any(module, kRuntimeLibraries)) return FrameOwner::Runtime;
  if (starts_with_any(module, kCudaLibraries)) return FrameOwner::Cuda;
  // The interpreter, its extension modules (lib-dynload: _ctypes, ...) and the libffi that ctypes calls through.
  if (starts_with(module, "libpython") || starts_with(module, "python") || starts_with(module, "libffi") ||
      contains(*frame.module, "/lib-dynload/")) {
    return FrameOwner::Python;
  }
  // A framework's extension modules live in its package folder (torch/_C.cpython-312-x86_64-linux-gnu.so).
  if (starts_with_any(module, kFrameworkLibraries) || contains(*frame.module, "/site-packages/torch/") ||
      contains(*frame.module, "/site-packages/jaxlib/") || contains(*frame.module, "/site-packages/cupy")) {
    return FrameOwner::Framework;
  }
  return FrameOwner::User;
}

// Python files: the interpreter's own library is Python's; installed packages and the code that torch.compile
// writes into its cache (torchinductor_<user>/...) belong to a framework; the rest is the user's.
FrameOwner python_owner(const Frame& frame) {
  const std::string_view file = frame.file ? std::string_view(*frame.file) : std::string_view();
  if (file.empty()) return FrameOwner::Unknown;
  if (contains(file, "/gpumemtrace_inprocess/")) return FrameOwner::Profiler;  // our package's own wrappers
  // PyTorch's and CuPy's own Python files also outside site-packages (a source checkout), as tensor_blocks.h reads
  // them.
  if (contains(file, "torchinductor_") || contains(file, "/torch/") || contains(file, "/cupy/") ||
      contains(file, "/site-packages/") || contains(file, "/dist-packages/")) {
    return FrameOwner::Framework;
  }
  if (starts_with(file, "<frozen ") || contains(file, "/lib/python3")) return FrameOwner::Python;
  return FrameOwner::User;
}

bool is_start_function(std::string_view name) {
  name = name.substr(0, name.find('@'));  // a versioned symbol: __libc_start_main@@GLIBC_2.34
  static constexpr std::array<std::string_view, 9> kStart = {"_start",
                                                             "__libc_start_main",
                                                             "__libc_start_main_impl",
                                                             "__libc_start_call_main",
                                                             "start_thread",
                                                             "clone",
                                                             "clone3",
                                                             "__clone",
                                                             "__clone3"};
  return std::find(kStart.begin(), kStart.end(), name) != kStart.end();
}

// A frame at the outer end of a stack that only says "a process or thread started here".
bool is_start_frame(const Frame& frame) {
  if (frame.python) return false;
  if (frame.function) return is_start_function(*frame.function);
  // Unsymbolized libc/libstdc++ frames at the outer end: libc's start code and libstdc++'s thread trampoline.
  return frame_owner(frame) == FrameOwner::Runtime;
}

// Copies `name` with the contents of every bracket pair of `open`/`close` elided to "...", except the literal
// "(anonymous namespace)", and "operator<"-style names, which are not brackets.
std::string elide_brackets(std::string_view name, char open, char close) {
  std::string out;
  int depth = 0;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (depth == 0 && c == open) {
      if (open == '(' && name.substr(i, 21) == "(anonymous namespace)") {
        out += "(anonymous namespace)";
        i += 20;
        continue;
      }
      // "operator<", "operator<<", "operator()": the bracket is part of the name.
      if (out.size() >= 8 && std::string_view(out).substr(out.size() - 8) == "operator") {
        out += c;
        continue;
      }
      out += open;
      out += "...";
      depth = 1;
      continue;
    }
    if (depth > 0) {
      if (c == open) ++depth;
      if (c == close && --depth == 0) out += close;
      continue;
    }
    out += c;
  }
  if (depth > 0) out += close;  // a name cut short inside brackets
  return out;
}

// Frames known to be outside the user's code fold; the user's and the unknown ones (no module, no symbol: they
// may be the user's) are shown one by one.
bool foldable(FrameOwner owner) { return owner != FrameOwner::User && owner != FrameOwner::Unknown; }

// "libtorch_cuda.so, libc10.so" for a folded run: its modules (Python files by their package), first seen first.
std::string run_modules(const std::vector<const Frame*>& frames, size_t begin, size_t end) {
  std::vector<std::string> names;
  for (size_t i = begin; i < end; ++i) {
    const Frame& frame = *frames[i];
    std::string name;
    if (frame.python) {
      const std::string file = frame.file.value_or("?");
      const size_t packages = file.find("-packages/");
      if (packages != std::string::npos) {
        const size_t start = packages + 10;
        name = file.substr(start, file.find('/', start) - start);
      } else if (contains(file, "torchinductor_")) {
        name = "torch.compile's generated code";
      } else {
        name = "Python";
      }
    } else if (frame.module) {
      name = path_basename(*frame.module);
    } else {
      name = "??";
    }
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  std::string joined;
  for (size_t i = 0; i < names.size() && i < 3; ++i) joined += (i ? ", " : "") + names[i];
  if (names.size() > 3) joined += fmt::format(" and {} more", names.size() - 3);
  return joined;
}

}  // namespace

FrameOwner frame_owner(const Frame& frame) {
  if (frame.python) return python_owner(frame);
  if (frame.module && !frame.module->empty()) return native_owner(frame);
  return FrameOwner::Unknown;
}

const Frame* user_frame(const Stack& stack) {
  for (const Frame& frame : stack.frames) {
    if (frame_owner(frame) == FrameOwner::User) return &frame;
  }
  return nullptr;
}

std::vector<const Frame*> frames_without_start(const Stack& stack) {
  size_t end = stack.frames.size();
  while (end > 0 && is_start_frame(stack.frames[end - 1])) --end;
  // A stack of start frames only (a constructor run by the loader) keeps them: something must be shown.
  if (end == 0) end = stack.frames.size();
  std::vector<const Frame*> frames;
  frames.reserve(end);
  for (size_t i = 0; i < end; ++i) frames.push_back(&stack.frames[i]);
  return frames;
}

std::string short_function_name(std::string_view name, size_t max_chars) {
  if (name.size() <= max_chars) return std::string(name);
  std::string shorter = elide_brackets(name, '<', '>');
  if (shorter.size() > max_chars) shorter = elide_brackets(shorter, '(', ')');
  return shorter;
}

std::string frame_label(const Frame& frame, bool full_names) {
  std::string label;
  if (frame.function) {
    label = full_names ? *frame.function : short_function_name(*frame.function);
  } else if (frame.module && frame.module_offset) {
    label = path_basename(*frame.module) + "+" + format_pc(*frame.module_offset);  // addr2line -e module offset
  } else {
    label = "?? " + format_pc(frame.pc);
  }
  if (frame.file) {
    label += " " + *frame.file;
    if (frame.line) label += fmt::format(":{}", *frame.line);
  }
  // The module in brackets, but for a Python frame (its file says it) and a module+0xOFFSET label (it is there).
  const bool module_in_label = !frame.function && frame.module && frame.module_offset;
  if (frame.module && !frame.python && !module_in_label) label += " [" + path_basename(*frame.module) + "]";
  return label;
}

std::vector<std::string> stack_view_lines(const Stack& stack, const StackViewOptions& options) {
  const std::vector<const Frame*> frames = frames_without_start(stack);
  std::vector<std::string> lines;
  size_t shown_frames = 0;
  size_t i = 0;
  while (i < frames.size()) {
    if (options.max_lines != 0 && lines.size() == options.max_lines) break;
    const FrameOwner owner = frame_owner(*frames[i]);
    size_t run_end = i + 1;
    if (!options.full_stacks && foldable(owner)) {
      while (run_end < frames.size() && foldable(frame_owner(*frames[run_end]))) ++run_end;
    }
    const size_t run = run_end - i;
    if (run >= 2) {
      lines.push_back(fmt::format("... {} frames in {}", run, run_modules(frames, i, run_end)));
    } else {
      lines.push_back(frame_label(*frames[i], options.full_names));
    }
    shown_frames += run;
    i = run_end;
  }
  if (shown_frames < frames.size()) {
    const size_t hidden = frames.size() - shown_frames;
    lines.push_back(
        fmt::format("... {} more {} (--format json lists every frame)", hidden, hidden == 1 ? "frame" : "frames"));
  }
  return lines;
}

std::vector<std::string> folded_frame_names(const Stack& stack, bool full_names) {
  const std::vector<const Frame*> frames = frames_without_start(stack);
  std::vector<std::string> names;
  for (auto frame = frames.rbegin(); frame != frames.rend(); ++frame) {
    const Frame& f = **frame;
    if (f.function && !f.function->empty()) {
      names.push_back(full_names ? *f.function : short_function_name(*f.function));
    } else if (f.module && f.module_offset) {
      names.push_back(path_basename(*f.module) + "+" + format_pc(*f.module_offset));
    } else if (f.module) {
      names.push_back(path_basename(*f.module) + "@" + format_pc(f.pc));
    } else {
      names.push_back(format_pc(f.pc));
    }
  }
  return names;
}

}  // namespace gmt::analysis
