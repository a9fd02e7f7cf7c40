// admin.cc: cursors, dead letters, leases, trim, stat and metrics (wharf.h ADMINISTRATION and
// METRICS). Every call reads or commits through the engine, so each runs on libuv's pool and
// resolves a promise; callback rows are copied there and turned into objects on the JavaScript
// thread.
#include "admin.h"

#include <memory>
#include <string>
#include <vector>

#include "engine.h"
#include "fact_copy.h"

namespace wharf_node {
namespace {

#define WHARF_NAPI_FN(name) napi_value name(napi_env env, napi_callback_info info)

// Reads the arguments, the first an open engine: false (a JavaScript error pending) otherwise.
bool EngineArg(napi_env env, napi_callback_info info, size_t argc, napi_value* argv,
               wharf_engine** engine) {
  if (!Args(env, info, argc, argv)) return false;
  EngineHandle* handle = GetEngine(env, argv[0]);
  if (handle == nullptr) return false;
  *engine = handle->engine;
  return true;
}

// Reads (engine, name) — the pattern of most admin calls.
bool EngineAndName(napi_env env, napi_callback_info info, size_t argc, napi_value* argv,
                   wharf_engine** engine, const char* what, std::string* name) {
  return EngineArg(env, info, argc, argv, engine) && GetName(env, argv[1], what, name);
}

bool GetIds(napi_env env, napi_value value, std::vector<uint64_t>* ids) {
  bool is_array = false;
  napi_is_array(env, value, &is_array);
  if (!is_array) {
    ThrowInvalid(env, "factIds must be an array of fact ids");
    return false;
  }
  uint32_t count = 0;
  napi_get_array_length(env, value, &count);
  for (uint32_t i = 0; i < count; ++i) {
    napi_value element;
    napi_get_element(env, value, i, &element);
    uint64_t id = 0;
    const std::string what = "factIds[" + std::to_string(i) + "]";
    if (!GetU64(env, element, what.c_str(), &id)) return false;
    ids->push_back(id);
  }
  return true;
}

WHARF_NAPI_FN(CursorGet) {
  napi_value argv[3];
  wharf_engine* engine = nullptr;
  std::string consumer;
  uint32_t partition = 0;
  if (!EngineAndName(env, info, 3, argv, &engine, "consumer", &consumer) ||
      !GetU32(env, argv[2], "partition", &partition)) {
    return nullptr;
  }
  auto fact_id = std::make_shared<uint64_t>(0);
  return RunAsync(
      env, "wharf.cursorGet",
      [=] {
        return CallResult::From(
            wharf_cursor_get(engine, consumer.c_str(), partition, fact_id.get()));
      },
      [fact_id](napi_env js) { return U64(js, *fact_id); });
}

WHARF_NAPI_FN(CursorSet) {
  napi_value argv[3];
  wharf_engine* engine = nullptr;
  std::string consumer;
  uint64_t fact_id = 0;
  if (!EngineAndName(env, info, 3, argv, &engine, "consumer", &consumer) ||
      !GetU64(env, argv[2], "factId", &fact_id)) {
    return nullptr;
  }
  return RunAsync(
      env, "wharf.cursorSet",
      [=] { return CallResult::From(wharf_cursor_set(engine, consumer.c_str(), fact_id)); },
      nullptr);
}

WHARF_NAPI_FN(CursorCopy) {
  napi_value argv[4];
  wharf_engine* engine = nullptr;
  std::string from, to;
  bool force = false;
  if (!EngineAndName(env, info, 4, argv, &engine, "from", &from) ||
      !GetName(env, argv[2], "to", &to)) {
    return nullptr;
  }
  napi_get_value_bool(env, argv[3], &force);
  return RunAsync(
      env, "wharf.cursorCopy",
      [=] {
        return CallResult::From(wharf_cursor_copy_v2(engine, from.c_str(), to.c_str(), force));
      },
      nullptr);
}

WHARF_NAPI_FN(CursorDelete) {
  napi_value argv[2];
  wharf_engine* engine = nullptr;
  std::string consumer;
  if (!EngineAndName(env, info, 2, argv, &engine, "consumer", &consumer)) return nullptr;
  return RunAsync(
      env, "wharf.cursorDelete",
      [=] { return CallResult::From(wharf_cursor_delete(engine, consumer.c_str())); }, nullptr);
}

WHARF_NAPI_FN(LeaseRelease) {
  napi_value argv[2];
  wharf_engine* engine = nullptr;
  std::string consumer;
  if (!EngineAndName(env, info, 2, argv, &engine, "consumer", &consumer)) return nullptr;
  return RunAsync(
      env, "wharf.leaseRelease",
      [=] { return CallResult::From(wharf_lease_release(engine, consumer.c_str())); }, nullptr);
}

struct CursorRow {
  std::string consumer;
  uint32_t partition;
  uint64_t fact_id, epoch;
};

WHARF_NAPI_FN(CursorList) {
  napi_value argv[1];
  wharf_engine* engine = nullptr;
  if (!EngineArg(env, info, 1, argv, &engine)) return nullptr;
  auto rows = std::make_shared<std::vector<CursorRow>>();
  return RunAsync(
      env, "wharf.cursorList",
      [engine, rows] {
        return CallResult::From(wharf_cursor_list(
            engine,
            [](void* ctx, const char* consumer, uint32_t partition, uint64_t fact_id,
               uint64_t epoch) {
              static_cast<std::vector<CursorRow>*>(ctx)->push_back(
                  CursorRow{consumer, partition, fact_id, epoch});
            },
            rows.get()));
      },
      [rows](napi_env js) {
        napi_value array;
        napi_create_array_with_length(js, rows->size(), &array);
        for (size_t i = 0; i < rows->size(); ++i) {
          const CursorRow& row = (*rows)[i];
          napi_value object;
          napi_create_object(js, &object);
          SetNamed(js, object, "consumer", String(js, row.consumer.c_str()));
          SetNamed(js, object, "partition", Number(js, row.partition));
          SetNamed(js, object, "factId", U64(js, row.fact_id));
          SetNamed(js, object, "epoch", U64(js, row.epoch));
          napi_set_element(js, array, static_cast<uint32_t>(i), object);
        }
        return array;
      });
}

struct DeadRow {
  std::string consumer, reason;
  FactCopy fact;
};

WHARF_NAPI_FN(DeadLetters) {
  napi_value argv[2];
  wharf_engine* engine = nullptr;
  std::string consumer;
  if (!EngineArg(env, info, 2, argv, &engine) ||
      !GetOptionalName(env, argv[1], "consumer", &consumer)) {
    return nullptr;
  }
  auto rows = std::make_shared<std::vector<DeadRow>>();
  return RunAsync(
      env, "wharf.deadLetters",
      [engine, consumer, rows] {
        return CallResult::From(wharf_dead_letters(
            engine, consumer.c_str(),
            [](void* ctx, const char* name, const char* reason, const wharf_fact* fact) {
              static_cast<std::vector<DeadRow>*>(ctx)->push_back(
                  DeadRow{name, reason, FactCopy::From(fact, wharf_dead_letter_attempt(fact))});
            },
            rows.get()));
      },
      [rows](napi_env js) {
        napi_value array;
        napi_create_array_with_length(js, rows->size(), &array);
        for (size_t i = 0; i < rows->size(); ++i) {
          const DeadRow& row = (*rows)[i];
          napi_value object;
          napi_create_object(js, &object);
          SetNamed(js, object, "consumer", String(js, row.consumer.c_str()));
          SetNamed(js, object, "reason", String(js, row.reason.c_str()));
          SetNamed(js, object, "fact", FactToJs(js, row.fact));
          napi_set_element(js, array, static_cast<uint32_t>(i), object);
        }
        return array;
      });
}

WHARF_NAPI_FN(DeadPurge) {
  napi_value argv[3];
  wharf_engine* engine = nullptr;
  std::string consumer;
  std::vector<uint64_t> ids;
  if (!EngineAndName(env, info, 3, argv, &engine, "consumer", &consumer) ||
      !GetIds(env, argv[2], &ids)) {
    return nullptr;
  }
  auto purged = std::make_shared<uint64_t>(0);
  return RunAsync(
      env, "wharf.deadPurge",
      [=] {
        return CallResult::From(
            wharf_dead_purge(engine, consumer.c_str(), ids.data(), ids.size(), purged.get()));
      },
      [purged](napi_env js) { return U64(js, *purged); });
}

WHARF_NAPI_FN(DeadRetry) {
  napi_value argv[3];
  wharf_engine* engine = nullptr;
  std::string consumer;
  std::vector<uint64_t> ids;
  if (!EngineAndName(env, info, 3, argv, &engine, "consumer", &consumer) ||
      !GetIds(env, argv[2], &ids)) {
    return nullptr;
  }
  auto retried = std::make_shared<std::vector<std::pair<uint64_t, uint64_t>>>();
  return RunAsync(
      env, "wharf.deadRetry",
      [=] {
        return CallResult::From(wharf_dead_retry(
            engine, consumer.c_str(), ids.data(), ids.size(),
            [](void* ctx, uint64_t dead_fact_id, uint64_t new_fact_id) {
              static_cast<std::vector<std::pair<uint64_t, uint64_t>>*>(ctx)->emplace_back(
                  dead_fact_id, new_fact_id);
            },
            retried.get(), nullptr));
      },
      [retried](napi_env js) {
        napi_value array;
        napi_create_array_with_length(js, retried->size(), &array);
        for (size_t i = 0; i < retried->size(); ++i) {
          napi_value object;
          napi_create_object(js, &object);
          SetNamed(js, object, "deadFactId", U64(js, (*retried)[i].first));
          SetNamed(js, object, "newFactId", U64(js, (*retried)[i].second));
          napi_set_element(js, array, static_cast<uint32_t>(i), object);
        }
        return array;
      });
}

struct LeaseRow {
  std::string consumer, owner;
  uint64_t epoch;
  int64_t expires_at_ms;
  uint64_t open_epoch;
};

WHARF_NAPI_FN(LeaseList) {
  napi_value argv[1];
  wharf_engine* engine = nullptr;
  if (!EngineArg(env, info, 1, argv, &engine)) return nullptr;
  auto rows = std::make_shared<std::vector<LeaseRow>>();
  return RunAsync(
      env, "wharf.leaseList",
      [engine, rows] {
        return CallResult::From(wharf_lease_list(
            engine,
            [](void* ctx, const char* consumer, const char* owner, uint64_t epoch,
               int64_t expires_at_ms, uint64_t open_epoch) {
              static_cast<std::vector<LeaseRow>*>(ctx)->push_back(
                  LeaseRow{consumer, owner, epoch, expires_at_ms, open_epoch});
            },
            rows.get()));
      },
      [rows](napi_env js) {
        napi_value array;
        napi_create_array_with_length(js, rows->size(), &array);
        for (size_t i = 0; i < rows->size(); ++i) {
          const LeaseRow& row = (*rows)[i];
          napi_value object;
          napi_create_object(js, &object);
          SetNamed(js, object, "consumer", String(js, row.consumer.c_str()));
          SetNamed(js, object, "owner", String(js, row.owner.c_str()));
          SetNamed(js, object, "epoch", U64(js, row.epoch));
          SetNamed(js, object, "expiresAtMs", Number(js, static_cast<double>(row.expires_at_ms)));
          SetNamed(js, object, "openEpoch", U64(js, row.open_epoch));
          napi_set_element(js, array, static_cast<uint32_t>(i), object);
        }
        return array;
      });
}

WHARF_NAPI_FN(Trim) {
  napi_value argv[2];
  wharf_engine* engine = nullptr;
  if (!EngineArg(env, info, 2, argv, &engine)) return nullptr;
  bool dry_run = false;
  napi_get_value_bool(env, argv[1], &dry_run);
  auto report = std::make_shared<wharf_trim_report>();
  report->struct_size = sizeof(wharf_trim_report);
  return RunAsync(
      env, "wharf.trim",
      [engine, dry_run, report] {
        return CallResult::From(
            wharf_trim(engine, dry_run ? 1 : 0, report.get(), nullptr, nullptr));
      },
      [report](napi_env js) {
        napi_value object;
        napi_create_object(js, &object);
        SetNamed(js, object, "consumerCount", U64(js, report->consumer_count));
        SetNamed(js, object, "factCount", U64(js, report->fact_count));
        SetNamed(js, object, "bytes", U64(js, report->bytes));
        return object;
      });
}

struct ConsumerRow {
  std::string consumer;
  bool registered;
  std::vector<std::string> types;
  uint64_t lag_facts, facts_behind, fact_id_min, fact_id_max;
  int64_t oldest_commit_ms;
  bool retrying;
  uint64_t retrying_fact_id;
  uint32_t retrying_attempt;
  std::string last_error;
};

struct StatResult {
  wharf_stat_snapshot snapshot{};
  std::vector<ConsumerRow> consumers;
};

void CollectConsumer(void* ctx, const wharf_stat_consumer* row) {
  ConsumerRow copy{row->consumer,
                   row->registered != 0,
                   {},
                   row->lag_facts,
                   row->facts_behind,
                   row->fact_id_min,
                   row->fact_id_max,
                   row->oldest_commit_ms,
                   false,
                   0,
                   0,
                   ""};
  for (size_t i = 0; i < row->type_count; ++i) copy.types.emplace_back(row->types[i]);
  if (row->struct_size >= offsetof(wharf_stat_consumer, last_error_ms) + sizeof(int64_t)) {
    copy.retrying = row->retrying != 0;
    copy.retrying_fact_id = row->retrying_fact_id;
    copy.retrying_attempt = row->retrying_attempt;
    copy.last_error = row->last_error == nullptr ? "" : row->last_error;
  }
  static_cast<StatResult*>(ctx)->consumers.push_back(std::move(copy));
}

napi_value StatToJs(napi_env env, const StatResult& stat) {
  const wharf_stat_snapshot& s = stat.snapshot;
  napi_value object, consumers;
  napi_create_object(env, &object);
  SetNamed(env, object, "durableLsn", U64(env, s.durable_lsn));
  SetNamed(env, object, "lastLsn", U64(env, s.last_lsn));
  SetNamed(env, object, "factCount", U64(env, s.fact_count));
  SetNamed(env, object, "factBytes", U64(env, s.fact_bytes));
  SetNamed(env, object, "deadLetterCount", U64(env, s.dead_letter_count));
  SetNamed(env, object, "timerCount", U64(env, s.timer_count));
  SetNamed(env, object, "nextTimerDueMs", Number(env, static_cast<double>(s.next_timer_due_ms)));
  napi_create_array_with_length(env, stat.consumers.size(), &consumers);
  for (size_t i = 0; i < stat.consumers.size(); ++i) {
    const ConsumerRow& row = stat.consumers[i];
    napi_value consumer, types;
    napi_create_object(env, &consumer);
    napi_create_array_with_length(env, row.types.size(), &types);
    for (size_t t = 0; t < row.types.size(); ++t) {
      napi_set_element(env, types, static_cast<uint32_t>(t), String(env, row.types[t].c_str()));
    }
    SetNamed(env, consumer, "consumer", String(env, row.consumer.c_str()));
    SetNamed(env, consumer, "registered", Boolean(env, row.registered));
    SetNamed(env, consumer, "types", types);
    SetNamed(env, consumer, "lagFacts", U64(env, row.lag_facts));
    SetNamed(env, consumer, "factsBehind", U64(env, row.facts_behind));
    SetNamed(env, consumer, "factIdMin", U64(env, row.fact_id_min));
    SetNamed(env, consumer, "factIdMax", U64(env, row.fact_id_max));
    SetNamed(env, consumer, "oldestCommitMs",
             Number(env, static_cast<double>(row.oldest_commit_ms)));
    SetNamed(env, consumer, "retrying", Boolean(env, row.retrying));
    SetNamed(env, consumer, "retryingFactId", U64(env, row.retrying_fact_id));
    SetNamed(env, consumer, "retryingAttempt", Number(env, row.retrying_attempt));
    SetNamed(env, consumer, "lastError", String(env, row.last_error.c_str()));
    napi_set_element(env, consumers, static_cast<uint32_t>(i), consumer);
  }
  SetNamed(env, object, "consumers", consumers);
  return object;
}

WHARF_NAPI_FN(Stat) {
  napi_value argv[1];
  wharf_engine* engine = nullptr;
  if (!EngineArg(env, info, 1, argv, &engine)) return nullptr;
  auto stat = std::make_shared<StatResult>();
  stat->snapshot.struct_size = WHARF_STAT_SNAPSHOT_SIZE_V1;  // the strings after it are unused
  return RunAsync(
      env, "wharf.stat",
      [engine, stat] {
        return CallResult::From(
            wharf_stat(engine, &stat->snapshot, nullptr, CollectConsumer, nullptr, stat.get()));
      },
      [stat](napi_env js) { return StatToJs(js, *stat); });
}

struct Sample {
  std::string name, labels;
  double value;
};

WHARF_NAPI_FN(Metrics) {
  napi_value argv[1];
  wharf_engine* engine = nullptr;
  if (!EngineArg(env, info, 1, argv, &engine)) return nullptr;
  auto samples = std::make_shared<std::vector<Sample>>();
  return RunAsync(
      env, "wharf.metrics",
      [engine, samples] {
        return CallResult::From(wharf_metrics(
            engine,
            [](void* ctx, const char* name, const char* labels, double value) {
              static_cast<std::vector<Sample>*>(ctx)->push_back(Sample{name, labels, value});
            },
            samples.get()));
      },
      [samples](napi_env js) {
        napi_value array;
        napi_create_array_with_length(js, samples->size(), &array);
        for (size_t i = 0; i < samples->size(); ++i) {
          napi_value object;
          napi_create_object(js, &object);
          SetNamed(js, object, "name", String(js, (*samples)[i].name.c_str()));
          SetNamed(js, object, "labels", String(js, (*samples)[i].labels.c_str()));
          SetNamed(js, object, "value", Number(js, (*samples)[i].value));
          napi_set_element(js, array, static_cast<uint32_t>(i), object);
        }
        return array;
      });
}

WHARF_NAPI_FN(MetricsText) {
  napi_value argv[1];
  wharf_engine* engine = nullptr;
  if (!EngineArg(env, info, 1, argv, &engine)) return nullptr;
  auto text = std::make_shared<std::string>();
  return RunAsync(
      env, "wharf.metricsText",
      [engine, text] {
        char* owned = nullptr;
        wharf_status status = wharf_metrics_text(engine, &owned);
        if (status == WHARF_OK) {
          text->assign(owned);
          wharf_free(owned);
        }
        return CallResult::From(status);
      },
      [text](napi_env js) { return String(js, text->c_str(), text->size()); });
}

}  // namespace

void RegisterAdmin(napi_env env, napi_value exports) {
  Export(env, exports, "cursorGet", CursorGet);
  Export(env, exports, "cursorSet", CursorSet);
  Export(env, exports, "cursorCopy", CursorCopy);
  Export(env, exports, "cursorDelete", CursorDelete);
  Export(env, exports, "cursorList", CursorList);
  Export(env, exports, "deadLetters", DeadLetters);
  Export(env, exports, "deadPurge", DeadPurge);
  Export(env, exports, "deadRetry", DeadRetry);
  Export(env, exports, "leaseList", LeaseList);
  Export(env, exports, "leaseRelease", LeaseRelease);
  Export(env, exports, "trim", Trim);
  Export(env, exports, "stat", Stat);
  Export(env, exports, "metrics", Metrics);
  Export(env, exports, "metricsText", MetricsText);
}

}  // namespace wharf_node
