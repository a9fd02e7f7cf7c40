// fact_copy.cc: see fact_copy.h.
#include "fact_copy.h"

namespace wharf_node {

FactCopy FactCopy::From(const wharf_fact* fact, uint32_t attempt) {
  FactCopy copy;
  size_t length = 0;
  copy.id = wharf_fact_id(fact);
  const char* type = wharf_fact_type(fact, &length);
  copy.type.assign(type == nullptr ? "" : type, type == nullptr ? 0 : length);
  const void* key = wharf_fact_key(fact, &length);
  copy.key.assign(static_cast<const char*>(key), key == nullptr ? 0 : length);
  const void* payload = wharf_fact_payload(fact, &length);
  copy.payload.assign(static_cast<const char*>(payload), payload == nullptr ? 0 : length);
  const char* source = wharf_fact_source(fact, &length);
  copy.source.assign(source == nullptr ? "" : source, source == nullptr ? 0 : length);
  copy.version = wharf_fact_version(fact);
  copy.stored_version = wharf_fact_stored_version(fact);
  copy.depth = wharf_fact_depth(fact);
  copy.partition = wharf_fact_partition(fact);
  copy.commit_ms = wharf_fact_commit_ms(fact);
  copy.deliver_at_ms = wharf_fact_deliver_at_ms(fact);
  copy.scheduled_id = wharf_fact_scheduled_id(fact);
  copy.attempt = attempt;
  const size_t header_count = wharf_fact_header_count(fact);
  copy.headers.reserve(header_count);
  for (size_t i = 0; i < header_count; ++i) {
    const char* name = nullptr;
    size_t name_len = 0;
    const void* value = nullptr;
    size_t value_len = 0;
    if (wharf_fact_header(fact, i, &name, &name_len, &value, &value_len) != WHARF_OK) break;
    copy.headers.emplace_back(std::string(name, name_len),
                              std::string(static_cast<const char*>(value), value_len));
  }
  return copy;
}

napi_value FactToJs(napi_env env, const FactCopy& fact) {
  napi_value object;
  napi_create_object(env, &object);
  napi_value headers;
  napi_create_object(env, &headers);
  for (const auto& [name, value] : fact.headers) {
    napi_set_property(env, headers, String(env, name.data(), name.size()),
                      Buffer(env, value.data(), value.size()));
  }
  // One call defining every property: cheaper than one napi_set_named_property each.
  const napi_property_attributes kField =
      static_cast<napi_property_attributes>(napi_writable | napi_enumerable | napi_configurable);
  const napi_property_descriptor fields[] = {
      {"id", nullptr, nullptr, nullptr, nullptr, U64(env, fact.id), kField, nullptr},
      {"type", nullptr, nullptr, nullptr, nullptr, String(env, fact.type.data(), fact.type.size()),
       kField, nullptr},
      {"key", nullptr, nullptr, nullptr, nullptr, Buffer(env, fact.key.data(), fact.key.size()),
       kField, nullptr},
      {"payload", nullptr, nullptr, nullptr, nullptr,
       Buffer(env, fact.payload.data(), fact.payload.size()), kField, nullptr},
      {"headers", nullptr, nullptr, nullptr, nullptr, headers, kField, nullptr},
      {"source", nullptr, nullptr, nullptr, nullptr,
       String(env, fact.source.data(), fact.source.size()), kField, nullptr},
      {"v", nullptr, nullptr, nullptr, nullptr, Number(env, fact.version), kField, nullptr},
      {"storedV", nullptr, nullptr, nullptr, nullptr, Number(env, fact.stored_version), kField,
       nullptr},
      {"depth", nullptr, nullptr, nullptr, nullptr, Number(env, fact.depth), kField, nullptr},
      {"partition", nullptr, nullptr, nullptr, nullptr, Number(env, fact.partition), kField,
       nullptr},
      {"commitMs", nullptr, nullptr, nullptr, nullptr,
       Number(env, static_cast<double>(fact.commit_ms)), kField, nullptr},
      {"deliverAtMs", nullptr, nullptr, nullptr, nullptr,
       Number(env, static_cast<double>(fact.deliver_at_ms)), kField, nullptr},
      {"scheduledId", nullptr, nullptr, nullptr, nullptr, U64(env, fact.scheduled_id), kField,
       nullptr},
      {"attempt", nullptr, nullptr, nullptr, nullptr, Number(env, fact.attempt), kField, nullptr},
  };
  napi_define_properties(env, object, sizeof(fields) / sizeof(fields[0]), fields);
  return object;
}

}  // namespace wharf_node
