/* An app of the driver API that finds libcuda the way cudart does: dlopen("libcuda.so.1") and dlsym on its handle.
 * Allocates 4 KiB and 1 MiB, frees the 4 KiB, and says what it did (tests/backend/test_backend_choice.py). */
#include <dlfcn.h>
#include <stdio.h>

typedef int (*Init)(unsigned int);
typedef int (*Alloc)(unsigned long long*, size_t);
typedef int (*Free)(unsigned long long);

int main(void) {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW);
  if (!driver) {
    fprintf(stderr, "driver_app: %s\n", dlerror());
    return 2;
  }
  Init init = (Init)dlsym(driver, "cuInit");
  Alloc alloc = (Alloc)dlsym(driver, "cuMemAlloc_v2");
  Free release = (Free)dlsym(driver, "cuMemFree_v2");
  if (!init || !alloc || !release || init(0) != 0) return 3;
  unsigned long long small = 0, large = 0;
  if (alloc(&small, 4096) != 0 || alloc(&large, 1 << 20) != 0 || release(small) != 0) return 4;
  printf("driver_app: allocated 4096 and 1048576, freed 4096\n");
  return 0;
}
