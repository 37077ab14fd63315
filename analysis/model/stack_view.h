// How a call stack is shown to a person (text, HTML, folded, diff, merged): whose code each frame is, the user's
// own frame, process and thread start frames dropped, runs of framework frames folded into one line, long C++
// names shortened, and stripped frames as module+0xOFFSET (which addr2line accepts). The JSON report keeps every
// frame as recorded; `report --full-stacks` and `--full-names` switch the folding and the shortening off.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/model/report.h"

namespace gmt::analysis {

// Whose code a frame runs. The user's frame is the innermost frame of kind User.
enum class FrameOwner {
  User,       // the app's binary or a library that is none of the below; a Python file outside the interpreter's
              // library and site-packages
  Framework,  // PyTorch, JAX/XLA, CuPy, Triton ... (native libraries, their Python packages, and the code that
              // torch.compile generates into its cache directory)
  Cuda,       // the CUDA driver, runtime and libraries (cuBLAS, cuDNN, NCCL ...)
  Runtime,    // the C/C++ runtime (libc, libstdc++, libgcc, the dynamic loader)
  Python,     // the interpreter (libpython, the python executable) and its standard library
  Profiler,   // gpumemtrace's own library
  Unknown,    // no module and no symbol
};

FrameOwner frame_owner(const Frame& frame);

// The innermost frame of the user's own code; nullptr when the stack has none.
const Frame* user_frame(const Stack& stack);

// The frames worth showing: the stack without the process and thread start frames at its outer end
// (_start, __libc_start_main, start_thread, clone, and the unsymbolized libc/libstdc++ frames around them).
std::vector<const Frame*> frames_without_start(const Stack& stack);

// A long C++ name with its template arguments and parameter lists elided: "at::native::empty_cuda(...)" for a
// 300-character signature. Names of at most max_chars stay whole.
std::string short_function_name(std::string_view name, size_t max_chars = 80);

struct StackViewOptions {
  size_t max_lines = 16;     // lines per stack (0: all); a cut says how many frames it left out
  bool full_stacks = false;  // every frame, none folded (start frames are still dropped)
  bool full_names = false;   // C++ names as recorded
};

// "fn file:line [module]", "module+0x1a2b [module]" for a frame without a symbol, "?? 0x7f..." without a module.
std::string frame_label(const Frame& frame, bool full_names = false);

// The lines of a stack as a person reads them, innermost first, without indentation: one per frame, and one per
// folded run of two or more frames that are not the user's ("... 17 frames in libtorch_cuda.so, libc10.so").
std::vector<std::string> stack_view_lines(const Stack& stack, const StackViewOptions& options);

// Outermost first, ';'-separated function names for the folded format, start frames dropped and names shortened.
std::vector<std::string> folded_frame_names(const Stack& stack, bool full_names);

}  // namespace gmt::analysis
