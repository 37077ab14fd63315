#include "analysis/replay/torch_config.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <vector>

namespace gmt::replay {
namespace {

bool is_power_of_two(uint64_t value) { return value != 0 && (value & (value - 1)) == 0; }
int floor_log2(uint64_t value) { return 63 - __builtin_clzll(value); }

// ConfigTokenizer (c10/core/AllocatorConfig.h): ',', ':', '[' and ']' are tokens of their own; other runs of
// non-space characters are words.
std::vector<std::string> tokenize(std::string_view text) {
  std::vector<std::string> tokens;
  std::string word;
  auto flush = [&] {
    if (!word.empty()) tokens.push_back(std::move(word));
    word.clear();
  };
  for (char c : text) {
    if (c == ',' || c == ':' || c == '[' || c == ']') {
      flush();
      tokens.emplace_back(1, c);
    } else if (std::isspace(static_cast<unsigned char>(c))) {
      flush();
    } else {
      word.push_back(c);
    }
  }
  flush();
  return tokens;
}

std::optional<uint64_t> to_size(const std::string& token) {
  uint64_t value = 0;
  auto [end, error] = std::from_chars(token.data(), token.data() + token.size(), value);
  if (error != std::errc() || end != token.data() + token.size()) return std::nullopt;
  return value;
}

std::optional<bool> to_bool(const std::string& token) {
  if (token == "True" || token == "true" || token == "1") return true;
  if (token == "False" || token == "false" || token == "0") return false;
  return std::nullopt;
}

class Parser {
 public:
  Parser(std::vector<std::string> tokens, TorchAllocatorConfig& config) : t_(std::move(tokens)), config_(config) {}

  std::optional<std::string> run() {
    for (size_t i = 0; i < t_.size(); ++i) {
      const std::string& key = t_[i];
      std::optional<std::string> error;
      if (key == "max_split_size_mb" || key == "max_non_split_rounding_mb") {
        error = parse_mb(i, key == "max_split_size_mb" ? config_.max_split_size : config_.max_non_split_rounding_size);
      } else if (key == "garbage_collection_threshold") {
        error = parse_gc(i);
      } else if (key == "roundup_power2_divisions") {
        error = parse_divisions(i);
      } else if (key == "expandable_segments") {
        error = parse_bool(i, config_.expandable_segments);
      } else if (key == "per_process_memory_fraction") {
        if (!colon(i) || i + 1 >= t_.size()) return std::string("per_process_memory_fraction needs a value");
        const std::string& text = t_[++i];
        char* end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        if (end != text.c_str() + text.size() || !(value >= 0 && value <= 1)) {
          return "per_process_memory_fraction '" + text + "' is invalid, set it in [0.0, 1.0]";
        }
        config_.memory_fraction = value;
      } else if (key == "backend") {
        if (!colon(i) || i + 1 >= t_.size()) return "backend needs a value";
        config_.cuda_malloc_async = t_[++i] == "cudaMallocAsync";
      } else {
        skip_key(i);
      }
      if (error) return error;
      if (i + 1 < t_.size() && t_[++i] != ",") return "expected ',' after " + key;
    }
    return std::nullopt;
  }

 private:
  bool colon(size_t& i) { return ++i < t_.size() && t_[i] == ":"; }

  // parseMaxSplitSize / parseMaxNonSplitRoundingSize: "must be >= kLargeBuffer / kMB" (20).
  std::optional<std::string> parse_mb(size_t& i, uint64_t& target) {
    const std::string key = t_[i];
    if (!colon(i) || i + 1 >= t_.size()) return key + " needs a value in MiB";
    std::optional<uint64_t> mb = to_size(t_[++i]);
    if (!mb) return key + ": '" + t_[i] + "' is not a whole number of MiB";
    if (*mb < kLargeBuffer / kMB) return key + " too small, must be >= " + std::to_string(kLargeBuffer / kMB);
    target = std::min<uint64_t>(*mb, UINT64_MAX / kMB) * kMB;
    return std::nullopt;
  }

  // parseGarbageCollectionThreshold: "set it in (0.0, 1.0)".
  std::optional<std::string> parse_gc(size_t& i) {
    if (!colon(i) || i + 1 >= t_.size()) return std::string("garbage_collection_threshold needs a value");
    const std::string& text = t_[++i];
    char* end = nullptr;
    double value = std::strtod(text.c_str(), &end);
    if (end != text.c_str() + text.size() || !(value > 0 && value < 1.0)) {
      return "garbage_collection_threshold '" + text + "' is invalid, set it in (0.0, 1.0)";
    }
    config_.garbage_collection_threshold = value;
    return std::nullopt;
  }

  std::optional<std::string> parse_bool(size_t& i, bool& target) {
    const std::string key = t_[i];
    if (!colon(i) || i + 1 >= t_.size()) return key + " needs True or False";
    std::optional<bool> value = to_bool(t_[++i]);
    if (!value) return key + ": '" + t_[i] + "' is neither True nor False";
    target = *value;
    return std::nullopt;
  }

  // parseRoundUpPower2Divisions: one value for every interval, or "[64:8,256:4,>:1]" with the intervals' lower ends
  // in MiB; the first entry also covers the intervals below it, ">" every interval after the last one named.
  std::optional<std::string> parse_divisions(size_t& i) {
    auto& divisions = config_.roundup_power2_divisions;
    if (!colon(i) || i + 1 >= t_.size()) return std::string("roundup_power2_divisions needs a value");
    if (t_[++i] != "[") {
      std::optional<uint64_t> value = to_size(t_[i]);
      if (!value || !is_power_of_two(*value)) return std::string("For roundups, the divisions has to be power of 2");
      divisions.fill(*value);
      return std::nullopt;
    }
    bool first_value = true;
    size_t last_index = 0;
    while (++i < t_.size() && t_[i] != "]") {
      const size_t value_index = i;
      if (!colon(i) || i + 1 >= t_.size()) return std::string("roundup_power2_divisions: expected interval:value");
      std::optional<uint64_t> value = to_size(t_[++i]);
      if (!value || (*value != 0 && !is_power_of_two(*value))) {
        return std::string("For roundups, the divisions has to be power of 2 or 0 to disable roundup");
      }
      if (t_[value_index] == ">") {
        std::fill(divisions.begin() + static_cast<std::ptrdiff_t>(std::min(last_index + 1, divisions.size())),
                  divisions.end(), *value);
      } else {
        std::optional<uint64_t> boundary = to_size(t_[value_index]);
        if (!boundary || !is_power_of_two(*boundary))
          return std::string("For roundups, the intervals have to be power of 2");
        size_t index = std::min<size_t>(static_cast<size_t>(floor_log2(*boundary)), divisions.size() - 1);
        if (first_value) {
          std::fill(divisions.begin(), divisions.begin() + static_cast<std::ptrdiff_t>(index), *value);
          first_value = false;
        }
        divisions[index] = *value;
        last_index = index;
      }
      if (i + 1 < t_.size() && t_[i + 1] != "]" && t_[++i] != ",") {
        return std::string("roundup_power2_divisions: expected ','");
      }
    }
    if (i >= t_.size()) return std::string("Expected closing bracket ']' in roundup_power2_divisions");
    return std::nullopt;
  }

  // ConfigTokenizer::skipKey: a key PyTorch does not use for this policy (release_lock_on_cudamalloc, pinned_*,
  // ...): its value, bracketed or not, is skipped.
  void skip_key(size_t& i) {
    if (i + 1 < t_.size() && t_[i + 1] == ":") {
      i += 2;
      if (i < t_.size() && t_[i] == "[") {
        while (i < t_.size() && t_[i] != "]") ++i;
      }
    }
  }

  std::vector<std::string> t_;
  TorchAllocatorConfig& config_;
};

}  // namespace

bool TorchAllocatorConfig::operator==(const TorchAllocatorConfig& other) const {
  return max_split_size == other.max_split_size && max_non_split_rounding_size == other.max_non_split_rounding_size &&
         roundup_power2_divisions == other.roundup_power2_divisions &&
         garbage_collection_threshold == other.garbage_collection_threshold &&
         expandable_segments == other.expandable_segments && memory_fraction == other.memory_fraction &&
         cuda_malloc_async == other.cuda_malloc_async;
}

std::optional<std::string> apply_alloc_conf(std::string_view text, TorchAllocatorConfig& config) {
  TorchAllocatorConfig next = config;
  next.max_split_size = UINT64_MAX;
  next.roundup_power2_divisions.fill(0);
  next.garbage_collection_threshold = 0;
  next.text = std::string(text);
  if (std::optional<std::string> error = Parser(tokenize(text), next).run()) return error;
  config = std::move(next);
  return std::nullopt;
}

uint64_t roundup_power2_divisions(const TorchAllocatorConfig& config, uint64_t size) {
  const int interval_start = floor_log2(kMB);  // 20
  const int log_size = size == 0 ? 0 : floor_log2(size);
  size_t index = log_size > interval_start ? static_cast<size_t>(log_size - interval_start) : 0;
  index = std::min(index, kRoundUpPowerOfTwoIntervals - 1);
  return config.roundup_power2_divisions[index];
}

uint64_t roundup_power2_next_division(uint64_t size, uint64_t divisions) {
  if (is_power_of_two(size)) return size;
  const uint64_t power2_floor = uint64_t{1} << floor_log2(size);
  const uint64_t power2_division = power2_floor >> floor_log2(divisions);
  if (power2_division == 0) return power2_floor << 1;
  const uint64_t round_size_floor = size & ~(power2_division - 1);
  return round_size_floor == size ? size : round_size_floor + power2_division;
}

uint64_t round_size(const TorchAllocatorConfig& config, uint64_t size) {
  if (size < kMinBlockSize) return kMinBlockSize;
  const uint64_t divisions = roundup_power2_divisions(config, size);
  if (divisions > 1 && size > kMinBlockSize * divisions) return roundup_power2_next_division(size, divisions);
  return kMinBlockSize * ((size + kMinBlockSize - 1) / kMinBlockSize);
}

uint64_t allocation_size(uint64_t rounded_size) {
  if (rounded_size <= kSmallSize) return kSmallBuffer;
  if (rounded_size < kMinLargeAlloc) return kLargeBuffer;
  return kRoundLarge * ((rounded_size + kRoundLarge - 1) / kRoundLarge);
}

std::string config_label(const TorchAllocatorConfig& config) { return config.text.empty() ? "default" : config.text; }

}  // namespace gmt::replay
