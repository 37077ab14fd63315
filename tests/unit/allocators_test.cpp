// Naming the allocator behind leaked memory from the leak groups' stacks (analysis/model/allocators.h).
#include <gtest/gtest.h>

#include "analysis/model/allocators.h"

namespace gmt::analysis {
namespace {

using schema::Api;

Frame native(const std::string& module) {
  Frame frame;
  frame.pc = 0x1000;
  frame.module = module;
  return frame;
}

Frame python(const std::string& file) {
  Frame frame;
  frame.python = true;
  frame.file = file;
  frame.module = std::string(kPythonModule);
  return frame;
}

LeakGroup group(uint64_t bytes, std::vector<Frame> frames, std::vector<Api> apis = {Api::cudaMalloc}) {
  LeakGroup g;
  g.bytes = bytes;
  g.count = 1;
  g.stack.frames = std::move(frames);
  g.apis = std::move(apis);
  return g;
}

TEST(AllocatorsTest, NamesEachAllocatorFromItsFrames) {
  std::vector<LeakGroup> leaks{
      group(1000, {native("/site-packages/torch/lib/libc10_cuda.so"), python("/app/train.py")}),
      group(500, {native("/site-packages/torch/lib/libc10_cuda.so")}, {Api::cuMemCreate}),
      group(300, {native("/usr/lib/libcuda.so.1"), python("/site-packages/cupy/_creation/basic.py")}),
      group(200, {native("/site-packages/jaxlib/xla_extension.so")}),
      group(100, {native("/app/leaky"), python("/app/plain.py")}),  // no known allocator
  };
  std::vector<AllocatorFinding> found = name_allocators(leaks);
  ASSERT_EQ(found.size(), 4u);
  EXPECT_EQ(found[0].id, "pytorch_caching");
  EXPECT_EQ(found[0].leaked_bytes, 1000u);
  EXPECT_NE(found[0].advice.find("torch.cuda.empty_cache()"), std::string::npos);
  EXPECT_EQ(found[1].id, "pytorch_expandable_segments");
  EXPECT_EQ(found[2].id, "cupy_pool");
  EXPECT_NE(found[2].advice.find("free_all_blocks()"), std::string::npos);
  EXPECT_EQ(found[3].id, "jax_xla");
  EXPECT_NE(found[3].advice.find("XLA_PYTHON_CLIENT_ALLOCATOR=platform"), std::string::npos);
}

Frame named(const std::string& module, const std::string& function) {
  Frame frame = native(module);
  frame.function = function;
  return frame;
}

TEST(AllocatorsTest, XlaArenaIsTheBfcAllocatorsOrUnnamedXla) {
  const std::string xla = "/venv/site-packages/jaxlib/xla_extension.so";
  const std::string plugin = "/venv/site-packages/jax_plugins/xla_cuda12/xla_cuda_plugin.so";
  const Frame cuda = named("/usr/lib/libcuda.so.1", "cuMemAlloc_v2");
  auto stack = [](std::vector<Frame> frames) {
    Stack s;
    s.frames = std::move(frames);
    return s;
  };
  EXPECT_TRUE(is_xla_arena(
      stack({cuda, named(xla, "se::gpu::CudaExecutor::Allocate"), named(xla, "tsl::BFCAllocator::Extend")})));
  EXPECT_TRUE(is_xla_arena(stack({cuda, native(plugin), python("/venv/site-packages/jax/_src/api.py")})));
  // Named XLA frames, none of the BFC allocator: XLA_PYTHON_CLIENT_ALLOCATOR=platform's buffer.
  EXPECT_FALSE(is_xla_arena(stack({cuda, named(plugin, "se::gpu::CudaExecutor::Allocate"), native(plugin)})));
  // JAX's Python code over another library's allocation, and stacks of no or another allocator.
  EXPECT_FALSE(is_xla_arena(stack({cuda, native("/opt/lib/libcustom.so"), python("/venv/site-packages/jax/x.py")})));
  EXPECT_FALSE(is_xla_arena(stack({cuda, native("/site-packages/torch/lib/libc10_cuda.so"), native(xla)})));
  EXPECT_FALSE(is_xla_arena(stack({native("/app/leaky")})));
  EXPECT_FALSE(is_xla_arena(stack({})));
}

TEST(AllocatorsTest, GroupsOfOneAllocatorAddUp) {
  std::vector<LeakGroup> leaks{
      group(700, {native("/x/libc10_cuda.so")}, {Api::cudaMallocAsync}),
      group(300, {python("/site-packages/torch/nn/modules/linear.py")}, {Api::cuMemAllocAsync}),
  };
  std::vector<AllocatorFinding> found = name_allocators(leaks);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].id, "pytorch_cuda_malloc_async");
  EXPECT_EQ(found[0].leaked_bytes, 1000u);
  EXPECT_EQ(found[0].leak_groups, 2u);
  EXPECT_EQ(found[0].leaked_allocations, 2u);
}

TEST(AllocatorsTest, PlainCudaProgramsNameNoAllocator) {
  std::vector<LeakGroup> leaks{group(100, {native("/app/leaky"), native("/lib/libc.so.6")})};
  EXPECT_TRUE(name_allocators(leaks).empty());
}

}  // namespace
}  // namespace gmt::analysis
