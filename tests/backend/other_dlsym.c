/* An interposer that defines dlsym and answers every lookup with glibc's own dlsym, never passing it on to a
 * later interposer: preloaded before gpumemtrace, the driver hooks cannot be handed out
 * (tests/backend/test_backend_choice.py). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>

typedef void* (*DlsymFn)(void*, const char*);

void* dlsym(void* handle, const char* symbol) {
  static DlsymFn libc_dlsym = NULL;
  if (!libc_dlsym) {
    void* libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
    libc_dlsym = (DlsymFn)dlvsym(libc, "dlsym", "GLIBC_2.34");
    if (!libc_dlsym) libc_dlsym = (DlsymFn)dlvsym(libc, "dlsym", "GLIBC_2.2.5");
  }
  return libc_dlsym ? libc_dlsym(handle, symbol) : NULL;
}
