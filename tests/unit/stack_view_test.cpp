// analysis/model/stack_view.h: whose code a frame is, the user's frame, start frames dropped, framework runs folded,
// long C++ names shortened and stripped frames as module+0xOFFSET.
#include "analysis/model/stack_view.h"

#include <gtest/gtest.h>

namespace gmt::analysis {
namespace {

Frame native(std::string function, std::string module, std::string file = "", int64_t line = 0) {
  Frame frame;
  if (!function.empty()) frame.function = std::move(function);
  frame.module = std::move(module);
  if (!file.empty()) frame.file = std::move(file);
  if (line) frame.line = line;
  frame.pc = 0x7f0000001000;
  return frame;
}

Frame python(std::string function, std::string file, int64_t line) {
  Frame frame;
  frame.python = true;
  frame.function = std::move(function);
  frame.file = std::move(file);
  frame.line = line;
  frame.module = std::string(kPythonModule);
  return frame;
}

Stack stack_of(std::vector<Frame> frames) {
  Stack stack;
  stack.id = 1;
  stack.frames = std::move(frames);
  for (size_t i = 0; i < stack.frames.size(); ++i) stack.frames[i].level = static_cast<int64_t>(i);
  return stack;
}

// A small C++ program: the app's three frames, then libc's start code (symbolized and not).
Stack small_program() {
  return stack_of(
      {native("make_buffer", "/home/u/app", "/home/u/app.cu", 12), native("main", "/home/u/app", "/home/u/app.cu", 40),
       native("__libc_start_call_main", "/usr/lib/x86_64-linux-gnu/libc.so.6"),
       native("__libc_start_main_impl", "/usr/lib/x86_64-linux-gnu/libc.so.6"), native("_start", "/home/u/app")});
}

// A PyTorch allocation: the caching allocator's frames, torch's Python code, the user's line, the interpreter.
Stack torch_program() {
  const std::string site = "/venv/lib/python3.12/site-packages/";
  return stack_of({native("c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(signed char, "
                          "unsigned long, CUstream_st*)",
                          site + "torch/lib/libc10_cuda.so"),
                   native("at::native::empty_cuda(c10::ArrayRef<long>, std::optional<c10::ScalarType>)",
                          site + "torch/lib/libtorch_cuda.so"),
                   native("", site + "torch/lib/libtorch_cpu.so"),
                   python("forward", site + "torch/nn/modules/linear.py", 125),
                   python("serve", "/srv/app/server.py", 57), python("<module>", "/srv/app/server.py", 90),
                   native("_PyEval_EvalFrameDefault", "/usr/lib/x86_64-linux-gnu/libpython3.12.so.1.0"),
                   native("", "/usr/lib/x86_64-linux-gnu/libc.so.6")});
}

TEST(StackView, FramesAreOwnedByModuleAndPythonPath) {
  const Stack torch = torch_program();
  EXPECT_EQ(frame_owner(torch.frames[0]), FrameOwner::Framework);
  EXPECT_EQ(frame_owner(torch.frames[3]), FrameOwner::Framework);  // torch's own Python code
  EXPECT_EQ(frame_owner(torch.frames[4]), FrameOwner::User);
  EXPECT_EQ(frame_owner(torch.frames[6]), FrameOwner::Python);
  EXPECT_EQ(frame_owner(torch.frames[7]), FrameOwner::Runtime);
  EXPECT_EQ(frame_owner(native("cudaMalloc", "/usr/local/cuda/lib64/libcudart.so.12")), FrameOwner::Cuda);
  EXPECT_EQ(frame_owner(native("gmt_hook", "/opt/gmt/lib/libgpumemtrace.so")), FrameOwner::Profiler);
  // torch.compile's generated code, in its cache directory, is the framework's, not the user's.
  EXPECT_EQ(frame_owner(python("call", "/tmp/torchinductor_u/ab/cabc123.py", 117)), FrameOwner::Framework);
  EXPECT_EQ(frame_owner(python("run", "/usr/lib/python3.12/threading.py", 1010)), FrameOwner::Python);
}

TEST(StackView, TheUserFrameIsTheInnermostFrameOfTheUsersCode) {
  const Stack torch = torch_program();
  ASSERT_NE(user_frame(torch), nullptr);
  EXPECT_EQ(user_frame(torch)->file, "/srv/app/server.py");
  EXPECT_EQ(user_frame(torch)->line, 57);
  const Stack small = small_program();
  EXPECT_EQ(user_frame(small)->function, "make_buffer");
  EXPECT_EQ(user_frame(stack_of({native("cudaMalloc", "/usr/lib/libcudart.so.12")})), nullptr);
}

TEST(StackView, StartFramesAtTheOuterEndAreDropped) {
  const Stack small = small_program();
  const std::vector<std::string> lines = stack_view_lines(small, StackViewOptions{});
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], "make_buffer /home/u/app.cu:12 [app]");
  EXPECT_EQ(lines[1], "main /home/u/app.cu:40 [app]");
  // A thread's stack ends in start_thread, clone3 and libstdc++'s unsymbolized trampoline.
  const Stack thread = stack_of({native("worker", "/home/u/app", "/home/u/app.cu", 7),
                                 native("", "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"),
                                 native("start_thread", "/usr/lib/x86_64-linux-gnu/libc.so.6"),
                                 native("clone3", "/usr/lib/x86_64-linux-gnu/libc.so.6")});
  EXPECT_EQ(stack_view_lines(thread, StackViewOptions{}), std::vector<std::string>{"worker /home/u/app.cu:7 [app]"});
  // A stack of start frames only keeps them.
  const Stack loader = stack_of({native("_start", "/home/u/app")});
  EXPECT_EQ(frames_without_start(loader).size(), 1u);
}

TEST(StackView, RunsOfFrameworkFramesFoldIntoOneLineUnlessFullStacks) {
  const Stack torch = torch_program();
  const std::vector<std::string> lines = stack_view_lines(torch, StackViewOptions{});
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0], "... 4 frames in libc10_cuda.so, libtorch_cuda.so, libtorch_cpu.so and 1 more");
  EXPECT_EQ(lines[1], "serve /srv/app/server.py:57");
  EXPECT_EQ(lines[2], "<module> /srv/app/server.py:90");
  EXPECT_EQ(lines[3], "_PyEval_EvalFrameDefault [libpython3.12.so.1.0]");  // one frame: not folded
  // Frames of unknown origin (no module, no symbol) may be the user's: shown one by one.
  Frame unknown;
  unknown.pc = 0x500002;
  const Stack unknowns = stack_of({unknown, unknown});
  EXPECT_EQ(stack_view_lines(unknowns, StackViewOptions{}), (std::vector<std::string>{"?? 0x500002", "?? 0x500002"}));
  const std::vector<std::string> full = stack_view_lines(torch, StackViewOptions{.full_stacks = true});
  EXPECT_EQ(full.size(), 7u);                                 // libc's unsymbolized start frame dropped even so
  EXPECT_EQ(full[2], "?? 0x7f0000001000 [libtorch_cpu.so]");  // no module offset recorded for it
  EXPECT_EQ(full[5], "<module> /srv/app/server.py:90");
}

TEST(StackView, ACutSaysHowManyFramesItLeftOut) {
  const Stack torch = torch_program();
  const std::vector<std::string> lines = stack_view_lines(torch, StackViewOptions{.max_lines = 2});
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[2], "... 2 more frames (--format json lists every frame)");
}

TEST(StackView, LongCppNamesLoseTemplateArgumentsThenParameterLists) {
  const std::string name =
      "std::_Function_handler<void (c10::cuda::CUDACachingAllocator::TraceEntry const&), "
      "gmt_torch_bridge::(anonymous namespace)::attach()::{lambda(c10::cuda::CUDACachingAllocator::TraceEntry "
      "const&)#1}>::_M_invoke(std::_Any_data const&, c10::cuda::CUDACachingAllocator::TraceEntry const&)";
  EXPECT_EQ(short_function_name(name), "std::_Function_handler<...>::_M_invoke(...)");
  EXPECT_EQ(short_function_name(name, 120),  // short enough once the template arguments are gone
            "std::_Function_handler<...>::_M_invoke(std::_Any_data const&, "
            "c10::cuda::CUDACachingAllocator::TraceEntry const&)");
  EXPECT_EQ(short_function_name("main"), "main");
  EXPECT_EQ(short_function_name("(anonymous namespace)::fill(std::vector<std::pair<int, int>, "
                                "std::allocator<std::pair<int, int> > >&, unsigned long)",
                                40),
            "(anonymous namespace)::fill(...)");
  EXPECT_EQ(short_function_name("bool operator<<T>(T const&, T const&) [with a very long tail of text]", 20),
            "bool operator<<...>(...) [with a very long tail of text]");
}

TEST(StackView, StrippedFramesAreModulePlusOffsetForAddr2line) {
  Frame stripped = native("", "/opt/lib/libvendor.so");
  stripped.module_offset = 0x1a2b;
  EXPECT_EQ(frame_label(stripped), "libvendor.so+0x1a2b");
  stripped.module_offset.reset();
  EXPECT_EQ(frame_label(stripped), "?? 0x7f0000001000 [libvendor.so]");
  Frame nowhere;
  nowhere.pc = 0x1234;
  EXPECT_EQ(frame_label(nowhere), "?? 0x1234");
}

TEST(StackView, FoldedNamesAreOutermostFirstWithoutStartFrames) {
  const Stack small = small_program();
  EXPECT_EQ(folded_frame_names(small, false), (std::vector<std::string>{"main", "make_buffer"}));
}

}  // namespace
}  // namespace gmt::analysis
