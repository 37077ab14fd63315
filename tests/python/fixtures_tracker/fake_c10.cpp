// TEST FIXTURE, not PyTorch (README.md): libc10.so, which the bridge links beside libc10_cuda.so; empty here.
extern "C" int fixture_c10_is_empty() { return 0; }
