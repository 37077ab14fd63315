// The interactive page's data (#gmt-viewer-data), internal to the HTML renderer: the ViewerData's parts
// (analysis/model/viewer_data.h) in compact arrays, and one table of the stacks that any part names. Addresses are
// hex strings (JSON numbers lose bits past 2^53); times are ns from the process start.
#include "analysis/render/render_viewer.h"

#include <fmt/core.h>

#include <set>

#include "analysis/format.h"
#include "analysis/model/stack_view.h"

namespace gmt::analysis {
namespace {

using Json = nlohmann::ordered_json;

class StackTable {
 public:
  explicit StackTable(const RenderOptions& options) : options_(options) {}

  // The stack's id, after noting it for the table (id 0: none taken).
  int64_t use(const Stack& stack) {
    if (stack.id != 0 && !table_.contains(std::to_string(stack.id))) table_[std::to_string(stack.id)] = describe(stack);
    return stack.id;
  }
  int64_t use(int64_t id, const std::unordered_map<int64_t, Stack>& stacks) {
    auto it = stacks.find(id);
    if (it != stacks.end()) use(it->second);
    return id;
  }
  Json take() { return std::move(table_); }

 private:
  // user: the user's frame as the text report marks it; lines: the stack as a person reads it (innermost first);
  // frames: outermost first, for the flamegraph.
  Json describe(const Stack& stack) const {
    const Frame* user = user_frame(stack);
    StackViewOptions view;
    view.max_lines = 40;
    view.full_stacks = options_.full_stacks;
    view.full_names = options_.full_names;
    return Json{{"user", user ? Json(frame_label(*user, options_.full_names)) : Json(nullptr)},
                {"lines", stack_view_lines(stack, view)},
                {"frames", folded_frame_names(stack, options_.full_names)}};
  }
  const RenderOptions& options_;
  Json table_ = Json::object();
};

Json allocations_json(const AllocationSlices& slices, StackTable& stacks) {
  Json rows = Json::array();
  for (const Lifetime& life : slices.shown) {
    rows.push_back(Json::array({life.alloc_ns, life.live() ? Json(nullptr) : Json(life.free_ns), life.size, life.device,
                                stacks.use(life.stack_id, slices.stacks), life.level == LifeLevel::Block ? 1 : 0,
                                std::string(schema::to_string(life.memory_kind)), format_pc(life.address),
                                std::string(schema::to_string(life.api))}));
  }
  uint64_t lives_not_shown = 0;
  uint64_t bytes_not_shown = 0;
  for (const auto& [device, summed] : slices.not_shown) {
    lives_not_shown += summed.lives;
    bytes_not_shown += summed.bytes;
  }
  return Json{{"columns", {"alloc_ns", "free_ns", "size", "device", "stack", "block", "memory_kind", "address", "api"}},
              {"rows", std::move(rows)},
              {"total", slices.lives},
              {"not_shown", lives_not_shown},
              {"not_shown_bytes", bytes_not_shown},
              {"per_window", slices.per_window},
              {"window_ns", slices.window_ns}};
}

Json flame_json(const Report& report, const ViewerData& data, StackTable& stacks) {
  Json peak = Json::array();
  for (const DevicePeak& device : report.peaks) {
    for (const StackBytes& held : device.stacks) {
      peak.push_back({{"device", device.device}, {"stack", stacks.use(held.stack)}, {"bytes", held.bytes}});
    }
  }
  Json leaked = Json::array();
  for (const LeakGroup& group : report.leaks) {
    leaked.push_back({{"stack", stacks.use(group.stack)}, {"bytes", group.bytes}, {"count", group.count}});
  }
  Json allocated = Json::array();
  for (const StackTotal& total : data.allocated_by_stack) {
    allocated.push_back({{"stack", stacks.use(total.stack_id, data.stacks)}, {"bytes", total.bytes}});
  }
  return Json{{"peak", std::move(peak)},
              {"leaked", std::move(leaked)},
              {"allocated", std::move(allocated)},
              {"allocated_other_bytes", data.allocated_other.bytes}};
}

Json heap_moments_json(const ViewerData& data, StackTable& stacks) {
  Json moments = Json::array();
  for (const HeapMoment& moment : data.heap_moments) {
    Json segments = Json::array();
    for (const SnapshotSegment& segment : moment.segments) {
      Json blocks = Json::array();
      for (const SnapshotBlock& block : segment.blocks) {
        blocks.push_back(Json::array({block.address - segment.address, block.size, block.allocated ? 1 : 0,
                                      stacks.use(block.stack_id, data.stacks)}));
      }
      segments.push_back({{"device", segment.device},
                          {"address", format_pc(segment.address)},
                          {"size", segment.total_size},
                          {"type", segment.segment_type},
                          {"blocks", std::move(blocks)}});
    }
    moments.push_back({{"label", moment.label},
                       {"time_ns", moment.time_ns},
                       {"segments", std::move(segments)},
                       {"blocks_left_out", moment.blocks_left_out}});
  }
  return moments;
}

}  // namespace

nlohmann::ordered_json viewer_json(const Report& report, const ViewerData& data, const RenderOptions& options) {
  StackTable stacks(options);
  Json layers = Json::array();
  for (const StackLayers& device : data.layers) {
    Json ids = Json::array();
    for (int64_t id : device.stack_ids) ids.push_back(stacks.use(id, data.stacks));
    layers.push_back(
        {{"device", device.device}, {"stacks", std::move(ids)}, {"bytes", device.bytes}, {"other", device.other}});
  }
  Json out{{"duration_ns", std::max(report.trace.duration_ns, data.slices.duration_ns)},
           {"bucket_ns", data.bucket_ns},
           {"layers", std::move(layers)},
           {"allocations", allocations_json(data.slices, stacks)},
           {"flame", flame_json(report, data, stacks)},
           {"heap_moments", heap_moments_json(data, stacks)}};
  // The findings panel shows the stacks of failures and growth too.
  for (const AllocFailure& failure : report.failures) stacks.use(failure.stack);
  for (const GrowthFinding& finding : report.growth.findings) {
    for (const GrowthStack& grown : finding.stacks) stacks.use(grown.stack);
  }
  for (const RangeGrowth& range : report.ranges.growth) {
    for (const GrowthStack& grown : range.stacks) stacks.use(grown.stack);
  }
  out["stacks"] = stacks.take();
  return out;
}

}  // namespace gmt::analysis
