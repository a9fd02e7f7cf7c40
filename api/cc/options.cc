// Parsing of "key=value;key=value" option strings shared by the C ABI and the CLI.
#include "wharf/options.h"

#include <charconv>
#include <string>

#include "engine/base/option_string.h"
#include "engine/declarative/model.h"
#include "engine/metrics/listen_address.h"

namespace wharf {
namespace {

template <typename Int>
Status ParseInt(std::string_view key, std::string_view value, Int min, Int max, Int* out) {
  Int parsed{};
  auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), parsed);
  if (error != std::errc() || end != value.data() + value.size() || parsed < min || parsed > max) {
    return Status::InvalidArgument("option '" + std::string(key) + "': '" + std::string(value) +
                                   "' is not an integer in [" + std::to_string(min) + ", " +
                                   std::to_string(max) + "]");
  }
  *out = parsed;
  return Status::OK();
}

template <typename Enum, size_t N>
Status ParseEnum(std::string_view key, std::string_view value,
                 const std::pair<const char*, Enum> (&names)[N], Enum* out) {
  std::string allowed;
  for (const auto& [name, enum_value] : names) {
    if (value == name) {
      *out = enum_value;
      return Status::OK();
    }
    allowed += allowed.empty() ? "" : " | ";
    allowed += name;
  }
  return Status::InvalidArgument("option '" + std::string(key) + "': '" + std::string(value) +
                                 "' is not one of " + allowed);
}

constexpr std::pair<const char*, Durability> kDurabilityNames[] = {
    {"sync", Durability::kSync},
    {"buffered", Durability::kBuffered},
    {"replicated", Durability::kReplicated}};
constexpr std::pair<const char*, ReplicateMode> kReplicateModeNames[] = {
    {"sync", ReplicateMode::kSync}, {"async", ReplicateMode::kAsync}};
constexpr std::pair<const char*, IoBackend> kIoNames[] = {
    {"auto", IoBackend::kAuto}, {"uring", IoBackend::kUring}, {"posix", IoBackend::kPosix}};
constexpr std::pair<const char*, WhenFull> kWhenFullNames[] = {{"block", WhenFull::kBlock},
                                                               {"error", WhenFull::kError}};
constexpr std::pair<const char*, Ordering> kOrderingNames[] = {
    {"partition", Ordering::kPartition}, {"global", Ordering::kGlobal}, {"none", Ordering::kNone}};
constexpr std::pair<const char*, bool> kBoolNames[] = {
    {"true", true}, {"false", false}, {"1", true}, {"0", false}};

template <typename Enum, size_t N>
const char* NameOf(const std::pair<const char*, Enum> (&names)[N], Enum value) {
  for (const auto& [name, enum_value] : names) {
    if (enum_value == value) return name;
  }
  return "?";
}

Status ParseReplicate(std::string_view key, std::string_view value, EngineOptions* o) {
  std::string* text = key == "replicate"            ? &o->replicate
                      : key == "replicate_stream"   ? &o->replicate_stream
                      : key == "replicate_user"     ? &o->replicate_user
                      : key == "replicate_password" ? &o->replicate_password
                      : key == "replicate_token"    ? &o->replicate_token
                      : key == "replicate_tls_ca"   ? &o->replicate_tls_ca
                      : key == "replicate_tls_cert" ? &o->replicate_tls_cert
                      : key == "replicate_tls_key"  ? &o->replicate_tls_key
                                                    : nullptr;
  if (text != nullptr) {
    *text = std::string(value);
    return Status::OK();
  }
  if (key == "replicate_mode") {
    ReplicateMode mode{};
    Status s = ParseEnum(key, value, kReplicateModeNames, &mode);
    if (s.ok()) o->replicate_mode = mode;
    return s;
  }
  if (key == "replicate_tls") return ParseEnum(key, value, kBoolNames, &o->replicate_tls);
  if (key == "replicate_timeout_ms") {
    return ParseInt<uint32_t>(key, value, 1, 3'600'000, &o->replicate_timeout_ms);
  }
  if (key == "replicate_replicas") {
    return ParseInt<uint32_t>(key, value, 1, 5, &o->replicate_replicas);
  }
  if (key == "replicate_pending_bytes_max") {
    return ParseInt<uint64_t>(key, value, 1u << 20, uint64_t{1} << 40,
                              &o->replicate_pending_bytes_max);
  }
  if (key == "replicate_snapshot_interval_ms") {
    return ParseInt<uint64_t>(key, value, 0, uint64_t{1} << 40, &o->replicate_snapshot_interval_ms);
  }
  if (key == "replicate_snapshot_bytes") {
    return ParseInt<uint64_t>(key, value, uint64_t{1} << 20, uint64_t{1} << 50,
                              &o->replicate_snapshot_bytes);
  }
  if (key == "replicate_snapshot_keep") {
    return ParseInt<uint32_t>(key, value, 1, 1000, &o->replicate_snapshot_keep);
  }
  return Status::InvalidArgument("unknown engine option '" + std::string(key) + "'");
}

Status ParseOne(std::string_view key, std::string_view value, EngineOptions* o) {
  if (key == "partitions") return ParseInt<uint32_t>(key, value, 0, kPartitionsMax, &o->partitions);
  if (key == "ordering") {
    Ordering ordering{};
    Status s = ParseEnum(key, value, kOrderingNames, &ordering);
    if (s.ok()) o->ordering = ordering;
    return s;
  }
  if (key == "durability") return ParseEnum(key, value, kDurabilityNames, &o->durability);
  if (key == "io") return ParseEnum(key, value, kIoNames, &o->io);
  if (key == "queue_capacity") {
    return ParseInt<uint32_t>(key, value, 1, 1u << 24, &o->queue_capacity);
  }
  if (key == "when_full") return ParseEnum(key, value, kWhenFullNames, &o->when_full);
  if (key == "group_facts_max") {
    return ParseInt<uint32_t>(key, value, 1, 1u << 20, &o->group_facts_max);
  }
  if (key == "buffered_sync_ms") {
    return ParseInt<uint32_t>(key, value, 1, 3'600'000, &o->buffered_sync_ms);
  }
  if (key == "create_if_missing") return ParseEnum(key, value, kBoolNames, &o->create_if_missing);
  if (key == "conflict_window_bytes") {
    return ParseInt<uint64_t>(key, value, 1u << 20, uint64_t{1} << 40, &o->conflict_window_bytes);
  }
  if (key == "tail_cache_facts") {
    return ParseInt<uint32_t>(key, value, 0, 1u << 24, &o->tail_cache_facts);
  }
  if (key == "memtable_bytes") {
    return ParseInt<uint64_t>(key, value, 1u << 20, uint64_t{1} << 36, &o->memtable_bytes);
  }
  if (key == "block_cache_bytes") {
    return ParseInt<uint64_t>(key, value, 1u << 20, uint64_t{1} << 40, &o->block_cache_bytes);
  }
  if (key == "wal_prefill_bytes") {
    return ParseInt<uint64_t>(key, value, 0, uint64_t{1} << 36, &o->wal_prefill_bytes);
  }
  if (key == "retention_interval_ms") {
    return ParseInt<uint32_t>(key, value, 0, 86'400'000, &o->retention_interval_ms);
  }
  if (key == "retention_max_bytes") {
    return ParseInt<uint64_t>(key, value, 0, uint64_t{1} << 50, &o->retention_max_bytes);
  }
  if (key == "retention_max_age_ms") {
    return ParseInt<uint64_t>(key, value, 0, uint64_t{1} << 50, &o->retention_max_age_ms);
  }
  if (key == "admin_socket") {
    if (value.empty()) {
      return Status::InvalidArgument("option 'admin_socket': empty; use on, off or a path");
    }
    o->admin_socket = std::string(value);
    return Status::OK();
  }
  if (key == "metrics_listen") {
    if (!value.empty()) {
      internal::ListenAddress address;
      Status s = internal::ParseListenAddress(key, value, &address);
      if (!s.ok()) return s;
    }
    o->metrics_listen = std::string(value);
    return Status::OK();
  }
  if (key == "metrics_textfile") {
    o->metrics_textfile = std::string(value);
    return Status::OK();
  }
  if (key == "metrics_interval_ms") {
    return ParseInt<uint32_t>(key, value, kMetricsIntervalMsMin, 86'400'000,
                              &o->metrics_interval_ms);
  }
  if (key.starts_with("replicate")) return ParseReplicate(key, value, o);
  if (key == "config") return declarative::LoadEngineOptions(std::string(value), o);
  return Status::InvalidArgument("unknown engine option '" + std::string(key) + "'");
}

}  // namespace

Status ParseEngineOptions(std::string_view text, EngineOptions* options) {
  EngineOptions parsed = *options;
  Status s = internal::ForEachOption(text, [&](std::string_view key, std::string_view value) {
    return ParseOne(key, value, &parsed);
  });
  if (s.ok()) *options = std::move(parsed);
  return s;
}

Status ValidateMetricsOptions(const EngineOptions& options) {
  if (!options.metrics_listen.empty()) {
    internal::ListenAddress address;
    Status s = internal::ParseListenAddress("metrics_listen", options.metrics_listen, &address);
    if (!s.ok()) return s;
  }
  if (options.metrics_interval_ms < kMetricsIntervalMsMin) {
    return Status::InvalidArgument(
        "option 'metrics_interval_ms': '" + std::to_string(options.metrics_interval_ms) +
        "' is below the minimum of " + std::to_string(kMetricsIntervalMsMin));
  }
  if (options.metrics_textfile.find('\0') != std::string::npos) {
    return Status::InvalidArgument("option 'metrics_textfile': the path holds a NUL byte");
  }
  return Status::OK();
}

namespace internal {

Status ForEachOption(
    std::string_view text,
    const std::function<Status(std::string_view key, std::string_view value)>& apply) {
  auto trim = [](std::string_view item) {
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    return item;
  };
  while (!text.empty()) {
    size_t end = text.find(';');
    std::string_view item = trim(text.substr(0, end));
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    if (item.empty()) continue;
    size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      return Status::InvalidArgument("option '" + std::string(item) + "' has no '=value'");
    }
    Status s = apply(trim(item.substr(0, eq)), trim(item.substr(eq + 1)));
    if (!s.ok()) return s;
  }
  return Status::OK();
}

}  // namespace internal

const char* ToString(Durability value) { return NameOf(kDurabilityNames, value); }
const char* ToString(ReplicateMode value) { return NameOf(kReplicateModeNames, value); }
const char* ToString(IoBackend value) { return NameOf(kIoNames, value); }
const char* ToString(WhenFull value) { return NameOf(kWhenFullNames, value); }
const char* ToString(Ordering value) { return NameOf(kOrderingNames, value); }

}  // namespace wharf
