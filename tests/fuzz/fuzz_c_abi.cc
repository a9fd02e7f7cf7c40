// Fuzz target: the C ABI's argument checks. Each input is a little program of wharf_* calls with
// fuzzed arguments (tables, keys, types, header names, options strings, partitions, ids, counts,
// NULL pointers) against one database in a temporary directory, opened once per process with
// buffered durability (a sync per commit would leave the fuzzer no time). Every call must return a
// status (an error with a message when refused); none may crash, hang or corrupt the database.
#include <fuzzer/FuzzedDataProvider.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "wharf.h"

namespace {

std::string dir;
wharf_engine* engine = nullptr;

void Cleanup() {
  wharf_close(engine);
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

void Setup() {
  char pattern[] = "/tmp/wharf-fuzz-c-abi-XXXXXX";
  if (::mkdtemp(pattern) == nullptr) std::abort();
  dir = pattern;
  if (wharf_open((dir + "/db").c_str(), "durability=buffered;partitions=4;memtable_bytes=1048576",
                 &engine) != WHARF_OK) {
    std::abort();
  }
  const char* types[] = {"A", "B"};
  if (wharf_declare_types(engine, types, 2) != WHARF_OK) std::abort();
  std::atexit(Cleanup);
}

// A status other than OK must come with a message.
void Check(wharf_status status) {
  if (status != WHARF_OK && status != WHARF_NOT_FOUND && wharf_last_error()[0] == '\0') {
    __builtin_trap();
  }
  if (status == WHARF_INTERNAL) __builtin_trap();  // a bug in wharf, by its own definition
}

std::string Name(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 3)) {
    case 0:
      return "A";
    case 1:
      return "t";
    default:
      return in.ConsumeRandomLengthString(80);
  }
}

std::string Bytes(FuzzedDataProvider& in) {
  if (in.ConsumeBool()) return std::string(in.ConsumeIntegralInRange<size_t>(0, 5000), 'k');
  return in.ConsumeRandomLengthString(300);
}

void Fact(void* ctx, const wharf_fact* fact) {
  size_t len = 0;
  (void)wharf_fact_type(fact, &len);
  (void)wharf_fact_key(fact, &len);
  (void)wharf_fact_payload(fact, &len);
  size_t headers = wharf_fact_header_count(fact);
  for (size_t i = 0; i <= headers; ++i) {  // one past the end: refused
    const char* name = nullptr;
    const void* value = nullptr;
    size_t name_len = 0, value_len = 0;
    (void)wharf_fact_header(fact, i, &name, &name_len, &value, &value_len);
  }
  ++*static_cast<size_t*>(ctx);
}

void Cursor(void*, const char*, uint32_t, uint64_t, uint64_t) {}
void Retried(void*, uint64_t, uint64_t) {}
void Lease(void*, const char*, const char*, uint64_t, int64_t, uint64_t) {}
void Loss(void*, const char*, uint64_t, uint64_t, uint64_t, uint64_t) {}
void TrimmedPartition(void*, uint32_t, uint64_t, uint64_t, uint64_t) {}
void StatPartition(void*, const wharf_stat_partition* row) {
  if (row->struct_size < sizeof(*row) || row->partition >= 4) __builtin_trap();
}
void StatConsumer(void*, const wharf_stat_consumer* row) {
  for (size_t i = 0; i < row->type_count; ++i) (void)*row->types[i];
  (void)*row->consumer;
}
void StatLane(void*, const wharf_stat_lane* row) {
  if (row->partition >= 4) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (engine == nullptr) Setup();
  FuzzedDataProvider in(data, size);
  wharf_txn* txn = nullptr;
  for (int step = 0; step < 64 && in.remaining_bytes() > 0; ++step) {
    switch (in.ConsumeIntegralInRange<int>(0, 17)) {
      case 0:
        if (txn == nullptr) Check(wharf_txn_begin(engine, &txn));
        break;
      case 1: {
        std::string table = Name(in), key = Bytes(in), value = Bytes(in);
        Check(
            wharf_txn_put(txn, table.c_str(), key.data(), key.size(), value.data(), value.size()));
        break;
      }
      case 2: {
        std::string table = Name(in), key = Bytes(in);
        Check(wharf_txn_delete(txn, table.c_str(), key.data(), key.size()));
        break;
      }
      case 3: {
        std::string type = Name(in), key = Bytes(in), payload = Bytes(in);
        Check(wharf_txn_emit(txn, type.c_str(), key.data(), key.size(), payload.data(),
                             payload.size()));
        break;
      }
      case 4: {
        std::string type = Name(in), key = Bytes(in), payload = Bytes(in);
        size_t n = in.ConsumeIntegralInRange<size_t>(0, 4);
        std::vector<std::string> names, values;
        for (size_t i = 0; i < n; ++i) {
          names.push_back(Name(in));
          values.push_back(Bytes(in));
        }
        std::vector<const char*> name_ptrs;
        std::vector<const void*> value_ptrs;
        std::vector<size_t> value_lens;
        for (size_t i = 0; i < n; ++i) {
          name_ptrs.push_back(names[i].c_str());
          value_ptrs.push_back(values[i].data());
          value_lens.push_back(values[i].size());
        }
        Check(wharf_txn_emit_v2(txn, type.c_str(), key.data(), key.size(), payload.data(),
                                payload.size(), n ? name_ptrs.data() : nullptr,
                                n ? value_ptrs.data() : nullptr, n ? value_lens.data() : nullptr, n,
                                in.ConsumeIntegral<int64_t>(), in.ConsumeIntegral<uint32_t>()));
        break;
      }
      case 5: {
        std::string table = Name(in), key = Bytes(in);
        void* value = nullptr;
        size_t value_len = 0;
        Check(in.ConsumeBool()
                  ? wharf_get(engine, table.c_str(), key.data(), key.size(), &value, &value_len)
                  : wharf_txn_get(txn, table.c_str(), key.data(), key.size(), &value, &value_len));
        wharf_free(value);
        break;
      }
      case 6:
        if (txn != nullptr) {
          uint64_t last = 0;
          Check(wharf_txn_commit(txn, in.ConsumeBool() ? &last : nullptr));
          txn = nullptr;
        }
        break;
      case 7:
        wharf_txn_abort(txn);
        txn = nullptr;
        break;
      case 8: {
        size_t count = 0;
        Check(wharf_read_facts(engine, in.ConsumeIntegral<uint32_t>() % 6,
                               in.ConsumeIntegral<uint64_t>() % 1000,
                               in.ConsumeIntegralInRange<size_t>(0, 100), Fact, &count, &count));
        break;
      }
      case 9: {
        std::string consumer = Name(in);
        Check(wharf_cursor_set(engine, consumer.c_str(), in.ConsumeIntegral<uint64_t>()));
        break;
      }
      case 10: {
        std::string consumer = Name(in);
        uint64_t id = 0;
        Check(wharf_cursor_get(engine, consumer.c_str(), in.ConsumeIntegral<uint32_t>(), &id));
        break;
      }
      case 11: {
        std::string from = Name(in), to = Name(in);
        Check(
            wharf_cursor_copy_v2(engine, from.c_str(), to.c_str(), in.ConsumeIntegral<uint8_t>()));
        break;
      }
      case 12: {
        std::string consumer = Name(in);
        Check(wharf_cursor_delete(engine, consumer.c_str()));
        Check(wharf_cursor_list(engine, Cursor, nullptr));
        break;
      }
      case 13: {
        std::string type = Name(in);
        const char* types[] = {type.c_str()};
        uint8_t declared = 0;
        Check(wharf_is_declared(engine, type.c_str(), &declared));
        if (in.ConsumeBool()) Check(wharf_declare_types(engine, types, 1));
        break;
      }
      case 14: {
        std::string key = Bytes(in);
        uint32_t partition = 0;
        Check(wharf_partition_of(engine, key.data(), key.size(), &partition));
        if (partition >= 4) __builtin_trap();
        break;
      }
      case 15: {
        // NULL where a pointer is required: refused with InvalidArgument, never dereferenced.
        uint64_t id = 0;
        void* value = nullptr;
        size_t value_len = 0;
        Check(wharf_get(engine, nullptr, "k", 1, &value, &value_len));
        Check(wharf_get(engine, "t", nullptr, 1, &value, &value_len));
        Check(wharf_get(engine, "t", "k", 1, nullptr, &value_len));
        Check(wharf_txn_put(nullptr, "t", "k", 1, "v", 1));
        Check(wharf_txn_emit(txn, nullptr, "k", 1, "p", 1));
        Check(wharf_txn_emit(txn, "A", nullptr, 3, "p", 1));
        Check(wharf_txn_emit(txn, "A", "k", 1, nullptr, 5));
        Check(wharf_cursor_get(engine, nullptr, 0, &id));
        Check(wharf_cursor_get(engine, "c", 0, nullptr));
        Check(wharf_declare_types(engine, nullptr, 3));
        Check(wharf_read_facts(engine, 0, 0, 1, nullptr, nullptr, nullptr));
        Check(wharf_open(nullptr, "", nullptr));
        break;
      }
      case 16: {
        // Options strings through wharf_open, on a second database that is opened and closed.
        std::string options = in.ConsumeRandomLengthString(200);
        // Skipped: `config` reads files (fuzz_yaml covers it); sizes could make a valid open
        // preallocate or cache gigabytes (their parsing is covered by fuzz_options).
        for (const char* skipped : {"config", "bytes", "capacity", "cache", "group", "queue"}) {
          if (options.find(skipped) != std::string::npos) options.clear();
        }
        if (options.empty()) break;
        wharf_engine* other = nullptr;
        Check(wharf_open((dir + "/other").c_str(), options.c_str(), &other));
        Check(wharf_close(other));
        break;
      }
      case 17: {
        // The administration calls with fuzzed consumers, ids, counts, flags and struct sizes.
        std::string consumer = Name(in);
        std::vector<uint64_t> ids;
        for (size_t n = in.ConsumeIntegralInRange<size_t>(0, 4); n > 0; --n) {
          ids.push_back(in.ConsumeIntegralInRange<uint64_t>(0, 100));
        }
        size_t n_ids = in.ConsumeBool() ? ids.size() : in.ConsumeIntegral<size_t>();
        const uint64_t* id_ptr = in.ConsumeBool() && !ids.empty() ? ids.data() : nullptr;
        if (id_ptr != nullptr && n_ids > ids.size()) n_ids = ids.size();  // caller memory bound
        uint64_t count = 0;
        Check(wharf_dead_retry(engine, consumer.c_str(), id_ptr, n_ids,
                               in.ConsumeBool() ? Retried : nullptr, nullptr, &count));
        Check(wharf_dead_purge(engine, consumer.c_str(), id_ptr, n_ids, &count));
        Check(wharf_lease_list(engine, in.ConsumeBool() ? Lease : nullptr, nullptr));
        Check(wharf_retention_losses(engine, in.ConsumeBool() ? Loss : nullptr, nullptr));
        wharf_trim_report report{};
        report.struct_size = in.ConsumeIntegralInRange<size_t>(0, sizeof(report));
        Check(wharf_trim(engine, in.ConsumeIntegral<uint8_t>(),
                         in.ConsumeBool() ? &report : nullptr,
                         in.ConsumeBool() ? TrimmedPartition : nullptr, nullptr));
        wharf_stat_snapshot snapshot{};
        snapshot.struct_size = in.ConsumeIntegralInRange<size_t>(0, sizeof(snapshot));
        Check(wharf_stat(engine, in.ConsumeBool() ? &snapshot : nullptr,
                         in.ConsumeBool() ? StatPartition : nullptr,
                         in.ConsumeBool() ? StatConsumer : nullptr,
                         in.ConsumeBool() ? StatLane : nullptr, nullptr));
        break;
      }
    }
  }
  wharf_txn_abort(txn);
  return 0;
}
