// PyTorch's memory snapshot as a pickle (protocol 2), the shape torch.cuda.memory._snapshot() returns and
// pytorch.org/memory_viz and torch.cuda._memory_viz read (shared/fixtures has a real one):
//   {"segments": [{device, address, total_size, allocated_size, active_size, requested_size, stream, segment_type,
//                  segment_pool_id, is_expandable, frames, blocks: [{address, size, requested_size, state, frames}]}],
//    (a block's size is PyTorch's real one where the replay of its allocator gave it, else the requested size: the
//    "gpumemtrace" key's block_sizes says which; device_traces carry requested sizes, as PyTorch's own do)
//    "device_traces": [[{action, addr, size, stream, time_us, frames, compile_context, user_metadata}], ...],
//    "allocator_settings": {}, "external_annotations": [], "gpumemtrace": {what was cut or left out}}
// Frames are {filename, line, name}, innermost first as PyTorch writes them.
#include "analysis/render/render_memory_viz.h"

#include <string>
#include <unordered_map>

#include "analysis/format.h"
#include "analysis/render/pickle_writer.h"

namespace gmt::analysis {
namespace {

std::string file_name(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

class SnapshotPickler {
 public:
  explicit SnapshotPickler(const Snapshot& snapshot) : snapshot_(snapshot) {}

  std::string pickle() {
    p_.begin_dict();
    p_.key("segments");
    p_.begin_list();
    for (const SnapshotSegment& segment : snapshot_.segments) write_segment(segment);
    p_.end_list();

    p_.key("device_traces");
    p_.begin_list();
    const int64_t devices = snapshot_.devices.empty() ? 0 : snapshot_.devices.rbegin()->first + 1;
    for (int64_t device = 0; device < devices; ++device) {
      p_.begin_list();
      auto it = snapshot_.devices.find(device);
      if (it != snapshot_.devices.end()) {
        for (const SnapshotEntry& entry : it->second.entries) write_entry(entry);
      }
      p_.end_list();
    }
    p_.end_list();

    p_.key("allocator_settings");
    p_.begin_dict();
    p_.end_dict();
    p_.key("external_annotations");
    p_.begin_list();
    p_.end_list();
    write_notes();
    p_.end_dict();
    return p_.finish();
  }

 private:
  void write_segment(const SnapshotSegment& segment) {
    p_.begin_dict();
    p_.key("device");
    p_.integer(segment.device);
    p_.key("address");
    p_.unsigned_integer(segment.address);
    p_.key("total_size");
    p_.unsigned_integer(segment.total_size);
    p_.key("allocated_size");
    p_.unsigned_integer(segment.allocated_bytes());
    p_.key("active_size");
    p_.unsigned_integer(segment.active_bytes());
    p_.key("requested_size");
    p_.unsigned_integer(segment.requested_bytes());
    p_.key("stream");
    p_.integer(segment.stream);
    p_.key("segment_type");
    p_.interned(segment.segment_type);
    p_.key("segment_pool_id");
    p_.begin_tuple();
    p_.integer(0);
    p_.integer(0);
    p_.end_tuple();
    p_.key("is_expandable");
    p_.boolean(segment.expandable);
    p_.key("frames");
    write_frames(segment.stack_id);
    p_.key("blocks");
    p_.begin_list();
    for (const SnapshotBlock& block : segment.blocks) {
      p_.begin_dict();
      p_.key("address");
      p_.unsigned_integer(block.address);
      p_.key("size");
      p_.unsigned_integer(block.size);
      p_.key("requested_size");
      p_.unsigned_integer(block.allocated ? block.requested : 0);
      p_.key("state");
      p_.interned(!block.allocated ? "inactive" : block.pending ? "active_pending_free" : "active_allocated");
      p_.key("frames");
      write_frames(block.stack_id);
      p_.end_dict();
    }
    p_.end_list();
    p_.end_dict();
  }

  void write_entry(const SnapshotEntry& entry) {
    p_.begin_dict();
    p_.key("action");
    p_.interned(to_string(entry.action));
    p_.key("addr");
    p_.unsigned_integer(entry.address);
    p_.key("size");
    p_.unsigned_integer(entry.size);
    p_.key("stream");
    p_.integer(entry.stream);
    p_.key("time_us");
    p_.integer(entry.time_ns / 1000);
    p_.key("frames");
    write_frames(entry.stack_id);
    p_.key("compile_context");
    p_.interned("N/A");
    p_.key("user_metadata");
    p_.interned("");
    p_.end_dict();
  }

  // A stack's frames, written once and then by reference.
  void write_frames(int64_t stack_id) {
    auto known = frames_written_.find(stack_id);
    if (known != frames_written_.end()) return p_.recall(known->second);
    p_.begin_list();
    auto it = snapshot_.stacks.find(stack_id);
    if (it != snapshot_.stacks.end()) {
      for (const Frame& frame : it->second.frames) {
        p_.begin_dict();
        p_.key("filename");
        if (frame.file) {
          p_.interned(*frame.file);
        } else {
          p_.interned(frame.module ? *frame.module : std::string("??"));
        }
        p_.key("line");
        p_.integer(frame.line.value_or(0));
        p_.key("name");
        if (frame.function) {
          p_.interned(*frame.function);
        } else if (frame.module_offset) {
          p_.interned(file_name(frame.module.value_or("??")) + "+" + format_pc(*frame.module_offset));
        } else {
          p_.interned(format_pc(frame.pc));
        }
        p_.end_dict();
      }
    }
    p_.end_list();
    frames_written_.emplace(stack_id, p_.remember());
  }

  // What the snapshot does not hold, in a key of our own (memory_viz ignores keys it does not know).
  void write_notes() {
    p_.key("gpumemtrace");
    p_.begin_dict();
    p_.key("max_entries_per_device");
    p_.unsigned_integer(snapshot_.max_entries);
    p_.key("entries_dropped");
    p_.begin_dict();
    for (const auto& [device, history] : snapshot_.devices) {
      p_.str(std::to_string(device));
      p_.unsigned_integer(history.dropped);
    }
    p_.end_dict();
    p_.key("host_allocations_left_out");
    p_.unsigned_integer(snapshot_.host_lives_left_out);
    p_.key("blocks_outside_segments");
    p_.unsigned_integer(snapshot_.blocks_outside_segments);
    p_.key("time_us_from");
    p_.str("the process start");
    // "replayed": PyTorch's blocks have the sizes its own snapshot gives them (the replay of its allocator);
    // "requested": what each tensor asked for (block_sizes_note says why, when the trace has PyTorch's allocator).
    p_.key("block_sizes");
    p_.str(snapshot_.block_sizes_replayed ? "replayed" : "requested");
    p_.key("block_sizes_note");
    p_.str(snapshot_.block_sizes_note);
    p_.end_dict();
  }

  const Snapshot& snapshot_;
  PickleWriter p_;
  std::unordered_map<int64_t, uint32_t> frames_written_;
};

}  // namespace

std::string render_memory_viz(const Snapshot& snapshot) { return SnapshotPickler(snapshot).pickle(); }

}  // namespace gmt::analysis
