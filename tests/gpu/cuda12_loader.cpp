// Opens the library build of tests/gpu/cuda12_app.cpp with RTLD_LOCAL (as Python opens an extension module) and runs
// it: its libcudart.so.12 is then outside the global scope, where the preloaded hooks look for the real runtime first
// (interpose/real_functions.cpp).
#include <dlfcn.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: cuda12_loader LIBRARY\n");
    return 2;
  }
  void* library = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    std::fprintf(stderr, "cuda12_loader: %s\n", dlerror());
    return 3;
  }
  auto app_main = reinterpret_cast<int (*)()>(dlsym(library, "gmt_cuda12_app_main"));
  return app_main ? app_main() : 4;
}
