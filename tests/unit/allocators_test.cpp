// Naming the allocator behind leaked memory from the leak groups' stacks (analysis/allocators.h).
#include <gtest/gtest.h>

#include "analysis/allocators.h"

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
  EXPECT_NE(found[3].advice.find("XLA_PYTHON_CLIENT_PREALLOCATE=false"), std::string::npos);
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
