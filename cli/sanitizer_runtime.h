// Apps built with -fsanitize=address or thread (shared sanitizer runtime, GCC's default): the runtime must be
// the first library of the process (ASan refuses to start otherwise), so `run` preloads it before ours.
#pragma once

#include <string>

namespace gmt::cli {

// The sanitizer runtime the app's executable needs (e.g. "libasan.so.8", a DT_NEEDED name the loader finds
// as it would for the app), or empty: not an ELF file, not found in PATH, or no shared ASan/TSan runtime.
std::string sanitizer_runtime_of(const std::string& command);

}  // namespace gmt::cli
