// A framework's calls and heaps beyond PyTorch's caching allocator, as events (recorder/framework_calls.h).
#include "recorder/framework_calls.h"

#include "recorder/block_stack_sample.h"
#include "recorder/guard.h"
#include "recorder/recorder.h"
#include "schema/trace_schema.h"

namespace gmt::recorder {
namespace {

using schema::Api;
using schema::EventKind;

EventRecord framework_event(EventKind kind, Api api, schema::Source source, schema::MemoryKind memory_kind,
                            int device) {
  EventRecord e;
  e.time_ns = now_ns();
  e.thread_id = current_thread_id();
  e.kind = kind;
  e.api = api;
  e.source = source;
  e.memory_kind = memory_kind;
  e.device = static_cast<int16_t>(device);
  return e;
}

}  // namespace
}  // namespace gmt::recorder

extern "C" __attribute__((visibility("default"))) void gmt_autograd_call(int begin, int api, uint64_t call) {
  using namespace gmt::recorder;
  HookScope scope;
  if (!scope.active()) return;
  EventRecord e = framework_event(begin ? EventKind::AutogradBegin : EventKind::AutogradEnd,
                                  api == 2 ? Api::torchAutogradGrad : Api::torchBackward,
                                  gmt::schema::Source::TorchAllocator, gmt::schema::MemoryKind::None, -1);
  e.call.handle = call;
  record(e, /*take_stack=*/begin != 0);  // the caller's line: its Python frames, read from its own thread state
}

extern "C" __attribute__((visibility("default"))) void gmt_cupy_pool_action(int action, int device, uint64_t address,
                                                                            uint64_t size) {
  using namespace gmt::recorder;
  using gmt::schema::MemoryKind;
  using gmt::schema::Source;
  HookScope scope;  // CuPy's pool may cudaMalloc a chunk meanwhile on another thread: its events are its own
  if (!scope.active()) return;
  EventRecord e;
  switch (action) {
    case 1:
      e = framework_event(EventKind::Alloc, Api::cupyBlockAlloc, Source::CupyAllocator, MemoryKind::HeapBlock, device);
      break;
    case 2:
      e = framework_event(EventKind::Free, Api::cupyBlockFree, Source::CupyAllocator, MemoryKind::HeapBlock, device);
      break;
    case 3:
      e = framework_event(EventKind::SegmentAlloc, Api::cupyChunkAlloc, Source::CupyAllocator, MemoryKind::HeapBlock,
                          device);
      break;
    case 4:
      e = framework_event(EventKind::SegmentFree, Api::cupyChunkFree, Source::CupyAllocator, MemoryKind::HeapBlock,
                          device);
      break;
    default: return;
  }
  e.call.address = address;
  e.call.size = action == 2 ? 0 : size;
  // An array's line (sampled under --sample-block-stacks); a chunk's stack is its cudaMalloc's.
  record(e, /*take_stack=*/action == 1 && take_block_stack(size));
}
