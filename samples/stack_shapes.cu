// Stacks that a cache keyed by the return addresses must keep apart (recorder/stacks.h, caller_stack.h): one
// allocation site reached through two callers, the same recursion at two depths, and a module that is loaded,
// unloaded and loaded again. Each path repeats, interleaved, so a thread-local cache sees every stack again
// after another one. Every allocation leaks on purpose, with a size that says which path made it.
// Usage: stack_shapes PLUGIN_PATH [repeats=5]
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

namespace {

size_t g_leaked_bytes = 0;
int g_leaked = 0;

__attribute__((noinline)) void leaf_alloc(size_t size) {
  void* p = nullptr;
  if (cudaMalloc(&p, size) != cudaSuccess) std::exit(1);  // LEAF-SITE
  g_leaked_bytes += size;
  ++g_leaked;
  asm volatile("" ::: "memory");
}

__attribute__((noinline)) void caller_a() {
  leaf_alloc(1000);
  asm volatile("" ::: "memory");
}

__attribute__((noinline)) void caller_b() {
  leaf_alloc(2000);
  asm volatile("" ::: "memory");
}

__attribute__((noinline)) void recurse(int depth, size_t size) {
  if (depth == 0) {
    leaf_alloc(size);
  } else {
    recurse(depth - 1, size);
  }
  asm volatile("" ::: "memory");
}

using PluginAlloc = size_t (*)();

void call_plugin(const char* path) {
  void* plugin = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!plugin) {
    std::fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
    std::exit(1);
  }
  auto alloc = reinterpret_cast<PluginAlloc>(dlsym(plugin, "plugin_alloc"));
  if (!alloc) std::exit(1);
  g_leaked_bytes += alloc();
  ++g_leaked;
  dlclose(plugin);  // at once: the profiler's writer reads the loaded modules only every 200 ms
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: stack_shapes PLUGIN_PATH [repeats]\n");
    return 2;
  }
  int repeats = argc > 2 ? std::atoi(argv[2]) : 5;
  for (int i = 0; i < repeats; ++i) {
    caller_a();
    caller_b();
    recurse(3, 3000);
    recurse(6, 6000);
  }
  call_plugin(argv[1]);
  call_plugin(argv[1]);
  std::printf("truth: leaked_bytes=%zu leaked_allocations=%d failed_allocations=0\n", g_leaked_bytes, g_leaked);
  return 0;
}
