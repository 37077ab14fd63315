"""TEST FIXTURE, not PyTorch: the C++ ABI flag the bridge is built with (as torch._C reports it)."""
_GLIBCXX_USE_CXX11_ABI = True
