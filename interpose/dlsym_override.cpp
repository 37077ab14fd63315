// Our dlsym: how cudart (static or shared) and libcupti reach the driver hooks. cudart loads the driver with
// dlopen("libcuda.so.1") and fetches cuGetProcAddress_v2 with dlsym (FACTS.md); every later entry point comes
// through the pointer it got back. So for a name in driver_hook_table.h, looked up on an explicit handle, we
// hand out our wrapper - but only when the real lookup found the function inside libcuda, so that another
// library's function of the same name is never hijacked. Everything else gets exactly what libc answers.
//
// The one subtle part is the caller. glibc's dlsym reads its return address to decide what RTLD_NEXT means
// (the objects after the caller's) and which scope RTLD_DEFAULT searches. A C wrapper that calls the real
// dlsym would make every caller look like this library: a malloc interposer's dlsym(RTLD_NEXT, "malloc")
// would find itself and recurse forever. So `dlsym` is a small assembly thunk that asks gmt_dlsym_route which
// function should answer and *jumps* there with the caller's return address still on the stack. Only an
// explicit handle and a table name (where the caller does not matter to glibc) reach gmt_dlsym_hooked.
#include <dlfcn.h>
#include <gnu/libc-version.h>

#include <atomic>

#include "interpose/driver_hook_table.h"

namespace gmt::interpose {
namespace {

std::atomic<DlsymFn> g_real_dlsym{nullptr};

// Since glibc 2.34 dlsym lives in libc with version GLIBC_2.34 (the old one stays as a compat alias); before,
// in libdl. Asking for a version that does not exist would make glibc allocate an error string inside dlsym,
// so pick the right one from the running glibc's version string (static, no allocation).
//
// This runs on the first dlsym of the process, which can come from a sanitizer runtime resolving its
// interceptors before it is initialized: ASan's strtol interceptor then fails a CHECK (asan_init_is_running).
// So the digits are read by hand, with no libc call that a sanitizer intercepts, and this file is built
// without sanitizer instrumentation (interpose/CMakeLists.txt).
int leading_number(const char*& text) {
  int value = 0;
  while (*text >= '0' && *text <= '9' && value < 100000) value = value * 10 + (*text++ - '0');
  return value;
}

const char* dlsym_version() {
  const char* version = gnu_get_libc_version();  // "2.36", static storage
  int major = leading_number(version);
  int minor = *version == '.' ? leading_number(++version) : 0;
  if (major > 2 || (major == 2 && minor >= 34)) return "GLIBC_2.34";
#if defined(__aarch64__)
  return "GLIBC_2.17";
#else
  return "GLIBC_2.2.5";
#endif
}

// Resolve early, at load, so the first lookup of the app does not pay for it; still lazily safe before.
__attribute__((constructor)) void resolve_real_dlsym_at_load() { real_dlsym(); }

// What answers when glibc has no dlsym we can reach (never seen): nothing found.
void* no_dlsym(void*, const char*) { return nullptr; }

}  // namespace

DlsymFn real_dlsym() {
  if (DlsymFn real = g_real_dlsym.load(std::memory_order_acquire)) return real;
  // RTLD_NEXT from this library: the next dlsym after ours (libc's, or another interposer's that chains on).
  // Racing threads find the same address.
  auto real = reinterpret_cast<DlsymFn>(dlvsym(RTLD_NEXT, "dlsym", dlsym_version()));
  if (real) g_real_dlsym.store(real, std::memory_order_release);
  return real;
}

}  // namespace gmt::interpose

// Reached through the thunk only for an explicit handle and a name in the table. The caller the real dlsym
// sees is this library, which glibc ignores for explicit handles.
extern "C" __attribute__((visibility("hidden"))) void* gmt_dlsym_hooked(void* handle, const char* symbol) {
  using namespace gmt::interpose;
  DlsymFn real = real_dlsym();
  void* found = real ? real(handle, symbol) : nullptr;
  if (!found) return nullptr;
  int index = driver_hook_index(symbol);
  if (index < 0 || !is_in_libcuda(found)) {
    if (driver_debug_enabled()) driver_debug("dlsym(%p, \"%s\") = %p, not libcuda's: unchanged", handle, symbol, found);
    return found;
  }
  note_driver_real(index, found);
  if (driver_debug_enabled()) driver_debug("dlsym(%p, \"%s\") = %p: wrapper handed out", handle, symbol, found);
  return driver_wrapper(index);
}

// Which function answers this dlsym call; the thunk jumps to it with the original arguments and return
// address. Allocation-free and lock-free: dlsym is called from loader contexts and signal-unsafe places alike.
extern "C" __attribute__((visibility("hidden"))) void* gmt_dlsym_route(void* handle, const char* symbol) {
  using namespace gmt::interpose;
  DlsymFn real = real_dlsym();
  if (!real) return reinterpret_cast<void*>(&no_dlsym);
  // RTLD_NEXT and RTLD_DEFAULT depend on the caller, so they must go to libc untouched. They need no wrapping:
  // RTLD_DEFAULT finds our exported wrappers first anyway (the library is preloaded), and RTLD_NEXT of a
  // driver name is another interposer's business.
  if (handle == RTLD_DEFAULT || handle == RTLD_NEXT) return reinterpret_cast<void*>(real);
  if (driver_hook_index(symbol) < 0) return reinterpret_cast<void*>(real);
  return reinterpret_cast<void*>(&gmt_dlsym_hooked);
}

// The exported dlsym (exports.map). Unversioned: glibc binds versioned references (dlsym@GLIBC_2.34,
// dlsym@GLIBC_2.2.5) to an unversioned definition that comes first, so every caller reaches it.
#if defined(__x86_64__)
// Entry: %rdi handle, %rsi symbol, (%rsp) the caller's return address, %rsp = 8 mod 16. Save the two
// arguments (plus 8 bytes to align the call), ask the router, restore, and tail-jump: the callee returns
// straight to our caller, and sees it as its caller. endbr64 is a no-op without CET.
asm(R"(
  .pushsection .text
  .globl dlsym
  .type dlsym, @function
  .p2align 4
dlsym:
  .cfi_startproc
  endbr64
  pushq %rdi
  .cfi_adjust_cfa_offset 8
  pushq %rsi
  .cfi_adjust_cfa_offset 8
  subq $8, %rsp
  .cfi_adjust_cfa_offset 8
  call gmt_dlsym_route@PLT
  addq $8, %rsp
  .cfi_adjust_cfa_offset -8
  popq %rsi
  .cfi_adjust_cfa_offset -8
  popq %rdi
  .cfi_adjust_cfa_offset -8
  jmp *%rax
  .cfi_endproc
  .size dlsym, .-dlsym
  .popsection
)");
#elif defined(__aarch64__)
// Entry: x0 handle, x1 symbol, x30 the caller's return address. Save x29/x30 and the arguments, ask the
// router, restore everything and branch (not branch-and-link) through x16, which BTI landing pads accept.
// hint #34 is `bti c` (a no-op on cores without BTI).
asm(R"(
  .pushsection .text
  .globl dlsym
  .type dlsym, %function
  .p2align 4
dlsym:
  .cfi_startproc
  hint #34
  stp x29, x30, [sp, #-32]!
  .cfi_def_cfa_offset 32
  .cfi_offset 29, -32
  .cfi_offset 30, -24
  mov x29, sp
  stp x0, x1, [sp, #16]
  bl gmt_dlsym_route
  mov x16, x0
  ldp x0, x1, [sp, #16]
  ldp x29, x30, [sp], #32
  .cfi_restore 29
  .cfi_restore 30
  .cfi_def_cfa_offset 0
  br x16
  .cfi_endproc
  .size dlsym, .-dlsym
  .popsection
)");
#else
#error "dlsym_override.cpp: add the dlsym thunk for this architecture (a C++ wrapper would break RTLD_NEXT)"
#endif
