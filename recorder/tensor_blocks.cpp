// The block-level mode's entry into the recorder (recorder/tensor_blocks.h): PyTorch's tensor blocks, drained from
// its memory history by the in-process Python package, become events like the hooks' own, with Python stacks
// interned exactly as the native path interns them (strings, python_frames, stacks with tagged frames).
#include "recorder/tensor_blocks.h"

#include <string>
#include <string_view>
#include <vector>

#include "recorder/guard.h"
#include "recorder/python_frame_table.h"
#include "unwind/python_frames.h"
#include "recorder/recorder.h"
#include "recorder/strings.h"
#include "schema/trace_schema.h"

namespace gmt::recorder {
namespace {

// The one meta pair that says the mode ran, and how often PyTorch's ring overran a drain.
void note_mode(uint64_t overruns) {
  set_meta_later(schema::meta::kTensorBlocks, "1");
  set_meta_later(schema::meta::kTensorBlocksOverruns, std::to_string(overruns));
}

bool arguments_valid(const gmt_tensor_block* blocks, size_t count, const gmt_tensor_block_frame* frames,
                     size_t frame_count, const char* const* strings, size_t string_count) {
  if (count > 0 && blocks == nullptr) return false;
  if (frame_count > 0 && frames == nullptr) return false;
  if (string_count > 0 && strings == nullptr) return false;
  for (size_t i = 0; i < frame_count; ++i) {
    if (frames[i].file >= string_count || frames[i].function >= string_count) return false;
  }
  for (size_t i = 0; i < string_count; ++i) {
    if (strings[i] == nullptr) return false;
  }
  for (size_t i = 0; i < count; ++i) {
    if (blocks[i].first_frame > frame_count || blocks[i].frame_count > frame_count - blocks[i].first_frame) {
      return false;
    }
  }
  return true;
}

}  // namespace
}  // namespace gmt::recorder

extern "C" __attribute__((visibility("default"))) int gmt_record_tensor_blocks(
    const gmt_tensor_block* blocks, size_t count, const gmt_tensor_block_frame* frames, size_t frame_count,
    const char* const* strings, size_t string_count, uint32_t thread_id, uint64_t overruns) {
  using namespace gmt::recorder;
  namespace schema = gmt::schema;
  HookScope scope;  // CUDA calls of ours (none expected) and of the allocator stay unrecorded meanwhile
  if (!scope.active()) return 0;
  if (!arguments_valid(blocks, count, frames, frame_count, strings, string_count)) return -1;

  // Interning takes leaf locks of its own: done before the recorder's lock, as the native path does.
  std::vector<uint32_t> string_ids(string_count);
  for (size_t i = 0; i < string_count; ++i) string_ids[i] = intern_string(std::string_view(strings[i]));
  std::vector<uint32_t> frame_ids(frame_count);
  for (size_t i = 0; i < frame_count; ++i) {
    PythonFrameRow row{string_ids[frames[i].file], string_ids[frames[i].function], frames[i].line};
    frame_ids[i] = intern_python_frame(row);
  }

  std::vector<EventRecord> events(count);
  std::vector<RawStack> stacks(count);
  for (size_t i = 0; i < count; ++i) {
    const gmt_tensor_block& block = blocks[i];
    EventRecord& event = events[i];
    event.time_ns = block.time_ns;
    event.call.address = block.address;
    event.call.size = block.is_free ? 0 : block.size;
    event.call.stream = block.stream;
    event.device = static_cast<int16_t>(block.device);
    event.thread_id = thread_id;
    event.kind = block.is_free ? schema::EventKind::Free : schema::EventKind::Alloc;
    event.api = block.is_free ? schema::Api::torchBlockFree : schema::Api::torchBlockAlloc;
    event.source = schema::Source::TorchAllocator;
    event.memory_kind = schema::MemoryKind::TensorBlock;
    RawStack& stack = stacks[i];
    for (uint32_t f = 0; f < block.frame_count && stack.depth < kMaxStackDepth; ++f) {
      uint32_t id = frame_ids[block.first_frame + f];
      if (id != 0) stack.pcs[stack.depth++] = gmt::unwind::kPythonFrameTag | id;  // 0: the frame table is full
    }
  }
  note_mode(overruns);
  record_late(events.data(), stacks.data(), count);
  return static_cast<int>(count);
}
