// Runtime: delivers durable facts to named consumers, in order within each partition, on a pool of
// worker threads.
//
//   #include "wharf/runtime.h"
//
//   wharf::Status IndexOrders(wharf::Engine& engine) {
//     wharf::Status s = engine.DeclareTypes({"OrderCreated"});
//     if (!s.ok()) return s;
//     wharf::Runtime runtime(&engine, {});
//     s = runtime.Project("order-index", {"OrderCreated"},
//                         [](const wharf::Fact& fact, wharf::Effects& effects) {
//                           // Committed together with the cursor: exactly once.
//                           return effects.Put("by-customer", fact.key, fact.payload).ok()
//                                      ? wharf::Outcome::kHandled
//                                      : wharf::Outcome::kFailed;
//                         });
//     if (s.ok()) s = runtime.Start();  // workers deliver in the background
//     // ... serve; Stop() (or the destructor) before the engine closes
//     return s;
//   }
//
// Consumers:
//   projection  effects (state writes) commit together with the cursor advance: exactly once.
//   reaction    like a projection, and may emit facts (depth = trigger depth + 1, <= max_depth).
//   subscriber  side effects at the edge: the cursor advances only after the handler returned
//               kHandled, so a fact is delivered at least once; idempotency (by fact id) is the
//               handler's. kFailed / kRetry / a throw keep the cursor and retry with backoff;
//               kRejected gives up on the fact (dead letter) and moves on. SubscribeAsync takes a
//               handler that completes each delivery later (Delivery::Done), and
//               `key_concurrency` lets facts of different keys be in the handler at once.
//   tap         a live stream with no cursor and a bounded inbox: at most once; a tap that falls
//               behind is severed (told through on_severed), never allowed to grow memory.
//
// Delivery is sequential per (consumer, partition) lane unless a subscriber asks for
// `key_concurrency` > 1 (then ordered per key within the lane). Handlers of different lanes run
// concurrently on different workers, so a handler shared by partitions must be thread-safe. A throw
// is caught and treated as kFailed, its what() becoming the failure's reason (or give one with
// SetFailureReason). Handlers must not call Drain/Stop.
//
// Thread safety: registration, Start, Drain and Stop are called from one thread (not from a
// handler). The Runtime must be destroyed (or stopped) before its Engine is closed. In a process
// forked from the one that made it, Stop() and the destructor abandon it (no thread joined, no
// cursor or lease written; see wharf/engine.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "wharf/engine.h"
#include "wharf/fact.h"
#include "wharf/options.h"
#include "wharf/status.h"

namespace wharf {

// What a handler did with a fact. Values are part of the C ABI (wharf_outcome).
enum class Outcome : uint8_t {
  kHandled = 0,   // done: the cursor passes it (with the effects)
  kRejected = 1,  // refused for good: settle as failed, dead letter, cursor passes it
  kFailed = 2,    // failed: projections/reactions settle as failed (dead letter, pass);
                  // subscribers keep the cursor and retry with backoff
  kRetry = 3,     // transient: keep the cursor, retry the fact after a backoff
};

enum class ConsumerKind : uint8_t { kProjection, kReaction, kSubscriber, kTap };
const char* ToString(ConsumerKind kind);

// How lanes are spread over workers (`assignment`).
enum class Assignment : uint8_t {
  // "consistent_hash" (default): jump hash with bounded loads; mostly stable under pool size
  // changes, and every worker holds the same number of lanes (at most one more).
  kConsistentHash,
  kRoundRobin,  // "round_robin"
};

class RelaySink;  // wharf/relay.h
class Runtime;

namespace internal {
class DeliveryState;
class RuntimeImpl;
class EffectsImpl;
struct RuntimeInternal;
}  // namespace internal

// The transaction a projection or reaction handler writes its effects into. Valid only during
// the handler call. Errors (bad input, emits from a projection, an undeclared type) are returned
// here and also settle the fact as failed with reason `store-rejected`.
class Effects {
 public:
  Status Put(std::string_view table, std::string_view key, std::string_view value);
  Status Delete(std::string_view table, std::string_view key);
  // Reads state as the handler's batch sees it: committed state overlaid with the effects written
  // so far in the batch, by earlier facts of the same batch and by this handler call (a fact that
  // failed had its effects discarded: they are not seen), so a read-modify-write projection (a
  // counter, a running total) is exact at any batch_facts. It does not wait for durability, as
  // Engine::Get does (the batch commits after what it read, so it is never durable without it),
  // only for the lane's earlier batches still committing. The C ABI's wharf_txn_get on an
  // effects transaction is this call.
  //
  // Reads are validated as a transaction's are (wharf/engine.h, "Isolation"): the batch reads
  // from one snapshot, taken at its first read, and when another writer (the application, another
  // consumer) changed a row it read before the batch commits, the commit is refused and the lane
  // delivers the batch's facts again from the consumer's durable position (trace event
  // `read-conflict`): their effects are applied exactly once, on the current row.
  Status Get(std::string_view table, std::string_view key, std::string* value) const;
  // Visits rows of `table` in `range` as the batch sees them (as Get), validated as Txn::Scan's.
  // Arguments and errors as Txn::Scan.
  Status Scan(std::string_view table, const KeyRange& range, size_t limit, const RowFn& row,
              ScanResult* result = nullptr) const;
  // Reactions only. The fact's source is the consumer id; its depth the trigger's depth + 1.
  Status Emit(std::string_view type, std::string_view key, std::string_view payload,
              const EmitOptions& options = {});

 private:
  friend class internal::EffectsImpl;
  explicit Effects(internal::EffectsImpl* impl) : impl_(impl) {}
  internal::EffectsImpl* impl_;
};

// Called from inside a handler, on the thread running it: the text recorded with the fact if the
// handler then returns kRejected, kFailed or kRetry (trace event, dead letter, `wharf dead list`),
// e.g. "bad order 97". The last call of a handler call counts; it is forgotten when the handler
// returns. Without it, a throw's what() (or the outcome's name) is the reason. Longer than
// kFailureReasonBytesMax: cut there. Outside a handler it has no effect.
void SetFailureReason(std::string_view reason);
inline constexpr size_t kFailureReasonBytesMax = 4096;

// Inside a handler, on the thread running it: which delivery of the fact this call is. 1 on the
// first; +1 on each redelivery of that fact to that consumer in this process, continuing across
// restarts for a fact the consumer keeps failing on (its retry record holds the count). 0 outside
// a handler. (The fact itself is shared by every consumer, so the count is not one of its fields.)
uint32_t DeliveryAttempt();

// One fact handed to an asynchronous subscriber (Runtime::SubscribeAsync), completed once, later,
// from any thread, with Done(). A copyable handle to state shared with the runtime (which keeps
// the fact alive for it); thread-safe. The delivery holds the fact's place in its key's order
// until it is done: facts of the same key wait for it.
class Delivery {
 public:
  Delivery() = default;  // empty: Done() refuses it
  explicit operator bool() const { return state_ != nullptr; }
  // The fact delivered, valid while any copy of this handle lives. Empty handle: a blank fact.
  const Fact& fact() const;
  // Which delivery of the fact this is (DeliveryAttempt()).
  uint32_t attempt() const;
  // Not done, timed out nor abandoned yet (a snapshot: it may change at once).
  bool pending() const;
  // Completes the delivery. kHandled: done, the cursor may pass the fact. kRejected: dead letter
  // (`handler-rejected: <reason>`), the fact's key moves on. kFailed / kRetry: delivered again
  // after a backoff (up to max_attempts). `reason` (cut at kFailureReasonBytesMax) says why.
  // Only the first Done counts. InvalidArgument naming the fact when the delivery is no longer
  // pending (done already, timed out after handler_timeout_ms and delivered again, or abandoned
  // because the consumer moved to another instance or the runtime stopped), for an empty
  // handle, or an outcome that is not one of the four; Closed when the runtime stopped after the
  // delivery began (the fact is delivered again when the consumer runs next).
  Status Done(Outcome outcome, std::string_view reason = {}) const;

 private:
  friend class internal::DeliveryState;
  explicit Delivery(std::shared_ptr<internal::DeliveryState> state) : state_(std::move(state)) {}
  std::shared_ptr<internal::DeliveryState> state_;
};

using ProjectFn = std::function<Outcome(const Fact& fact, Effects& effects)>;
using SubscribeFn = std::function<Outcome(const Fact& fact)>;
// An asynchronous subscriber's handler: starts the work for `fact` and returns at once; the work
// calls delivery.Done(...) when it finished (on any thread, possibly before the handler
// returned). A throw before Done counts as kFailed with the exception's text.
using AsyncSubscribeFn = std::function<void(const Fact& fact, Delivery delivery)>;
using TapFn = std::function<void(const Fact& fact)>;

// Which version of a fact's payload a consumer receives (ConsumerOptions::payload_version).
enum class PayloadVersion : uint8_t { kLatest, kStored };

struct ConsumerOptions {
  // Cursor name; empty: the consumer's name. Two consumers never share one (error 026).
  std::string consumer_id;
  // Facts per batch commit; 0: the kind's default (projection 100, reaction 20, subscriber 10).
  uint32_t batch_facts = 0;
  // Reactions: deepest cascade accepted; 0: the runtime's max_depth.
  uint32_t max_depth = 0;
  // `partition` (default): in order within each partition; `global`: one order over all facts
  // (one lane); `none`: no promise (delivered like `partition`).
  Ordering ordering = Ordering::kPartition;
  // Taps: facts waiting in the inbox, at most; one more severs the tap.
  uint32_t tap_inbox_facts = 1024;
  // Subscribers (1..kKeyConcurrencyMax): facts of different keys in the handler at once, per
  // lane. Facts of one key are handed over in id order and never overlap; the cursor advances
  // over the contiguous prefix of finished facts, and facts finished beyond it are not handed
  // over again while the process lives (after a crash they may be: at least once). A fact that
  // keeps failing holds back only the later facts of its key. Needs ordering partition or none.
  // 1: one fact at a time (a synchronous handler then runs in batches, as before).
  uint32_t key_concurrency = 1;
  // Subscribers delivering concurrently or asynchronously: facts a lane holds beyond its cursor
  // (in the handler, waiting for their key, retrying, or finished), at most; reaching it is
  // back-pressure. 0: max(1024, 16 x key_concurrency); else >= key_concurrency.
  uint32_t key_window_facts = 0;
  // Deliveries of one fact, at most: after the last failed one the fact goes to the dead letters
  // (`attempts-exhausted`) and its key moves on. 0: no limit (kRetry and a failing subscriber
  // retry for ever). Counted across restarts for the fact a lane keeps failing on.
  uint32_t max_attempts = 0;
  // Asynchronous subscribers: a delivery not done within this counts as failed (trace
  // `handler-timeout`) and is delivered again; its late Done is refused. >= 1.
  uint32_t handler_timeout_ms = 30'000;
  // Taps: called once when the tap is severed (from an engine thread).
  std::function<void()> on_severed;
  // kLatest: facts arrive at their type's declared version, upcast from the stored one
  // (Engine::RegisterUpcaster); kStored: as stored (Fact::v == Fact::stored_v; no upcaster runs,
  // so no chain needs to be complete). A relay with relay_payload=stored publishes the stored
  // bytes.
  PayloadVersion payload_version = PayloadVersion::kLatest;
};

struct TraceEvent {
  enum class Level : uint8_t { kInfo, kWarning, kError };
  Level level = Level::kInfo;
  std::string name;      // e.g. "handler-failed", "store-rejected", "subscriber-failed"
  std::string consumer;  // consumer id, or empty
  uint64_t fact_id = 0;  // 0 when not about one fact
  std::string reason;    // for a handler's failure: the text it gave (SetFailureReason) or threw
  // For an event about a delivery of `fact_id`: which delivery it was (1: the first; counted
  // across restarts for a fact a subscriber keeps failing). 0 when not about a delivery.
  uint32_t attempt = 0;
};
using TraceFn = std::function<void(const TraceEvent& event)>;

// Most worker threads one runtime may have (`workers`). More lanes than this share workers; a
// higher value is refused (InvalidArgument) rather than spending seconds creating threads.
inline constexpr uint32_t kWorkersMax = 1024;
// Most batches one lane may have in flight (`lane_batches_in_flight`).
inline constexpr uint32_t kLaneBatchesInFlightMax = 64;
// Most facts of one lane in a subscriber's handler at once (`key_concurrency`), and most facts a
// lane may hold beyond its cursor (`key_window_facts`).
inline constexpr uint32_t kKeyConcurrencyMax = 4096;
inline constexpr uint32_t kKeyWindowFactsMax = 1u << 20;

struct RuntimeOptions {
  // `instance`: this runtime's id (leases) and its name in the metrics (label `runtime`); empty:
  // a random UUID for leases, and "default" in the metrics (ConsumerMetrics::instance).
  std::string instance;
  // `workers`: threads delivering facts (0..kWorkersMax); 0 makes an API-only instance that
  // delivers nothing.
  uint32_t workers = 2;
  // `assignment`: lanes to workers.
  Assignment assignment = Assignment::kConsistentHash;
  // `max_depth`: deepest reaction cascade (depth of an emitted fact) accepted.
  uint32_t max_depth = 16;
  // `lease_ms`, `renew_ms`: consumer leases (several instances on one engine).
  uint32_t lease_ms = 30'000;
  uint32_t renew_ms = 10'000;
  // `cursor_persist_ms`: cursors advanced over skipped facts are persisted within this delay.
  uint32_t cursor_persist_ms = 5'000;
  // `backoff_initial_ms`, `backoff_max_ms`: retry delays after transient failures (doubling from
  // the initial delay up to the maximum; initial <= max).
  uint32_t backoff_initial_ms = 10;
  uint32_t backoff_max_ms = 5'000;
  // `timer_tick_ms`: how often due timers are released while started.
  uint32_t timer_tick_ms = 50;
  // `lane_batches_in_flight` (1..kLaneBatchesInFlightMax): batches of one lane (a consumer's
  // partition) committing at once. With more than 1, a lane collects, handles and submits its
  // next batch while the previous one is being synced; a refused batch takes those after it
  // along, and the lane starts again from its durable position (effects stay exactly once). A
  // projection or reaction reading state (Effects::Get) waits for its lane's batches in flight.
  uint32_t lane_batches_in_flight = 8;
  // Every trace event goes here; empty: warnings and errors are logged to stderr.
  TraceFn trace;
  // Registers consumers that options declare rather than code: called with this runtime by
  // Start() or the first Drain() (the first of them to be called), before the consumers are
  // checked. Its error fails that call, and the consumers it registered are dropped (it runs
  // again at the next call); once it succeeded it is not called again. `config=FILE` sets it to
  // register the relays the file declares, so that a file alone runs them. Called on the thread
  // calling Start/Drain.
  std::function<Status(Runtime& runtime)> register_at_start;
};

// Parses "key=value;..." (keys as the field names above) into *options, then checks the result
// with ValidateRuntimeOptions. Unknown key, bad value or inconsistent result: InvalidArgument
// naming it, *options unchanged.
Status ParseRuntimeOptions(std::string_view text, RuntimeOptions* options);

// Checks the options as a whole: workers <= kWorkersMax, 1 <= lane_batches_in_flight <=
// kLaneBatchesInFlightMax, renew_ms < lease_ms,
// backoff_initial_ms <= backoff_max_ms, every interval >= 1 ms. InvalidArgument naming the
// options and their values. Runtime::Start and Runtime::Drain call it too.
Status ValidateRuntimeOptions(const RuntimeOptions& options);

class Runtime {
 public:
  // `engine` must outlive the runtime.
  Runtime(Engine* engine, RuntimeOptions options);
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;
  ~Runtime();  // Stop()

  // Registration, before Start(). InvalidArgument: empty/oversized name, no types, after Start.
  Status Project(std::string name, std::vector<std::string> types, ProjectFn handler,
                 ConsumerOptions options = {});
  Status React(std::string name, std::vector<std::string> types, ProjectFn handler,
               ConsumerOptions options = {});
  Status Subscribe(std::string name, std::vector<std::string> types, SubscribeFn handler,
                   ConsumerOptions options = {});
  // A subscriber whose handler completes its deliveries later (AsyncSubscribeFn, Delivery).
  Status SubscribeAsync(std::string name, std::vector<std::string> types, AsyncSubscribeFn handler,
                        ConsumerOptions options = {});
  Status Tap(std::string name, std::vector<std::string> types, TapFn handler,
             ConsumerOptions options = {});
  // A relay (wharf/relay.h): a subscriber whose lanes hand whole batches to `sink` (shared by
  // its lanes; the runtime keeps it alive). Default batch_facts: 256. InvalidArgument as
  // above, or the sink's Validate() refusal.
  Status Relay(std::string name, std::vector<std::string> types, std::shared_ptr<RelaySink> sink,
               ConsumerOptions options = {});

  // Checks identities (duplicate consumer id: error 026; undeclared type: named), loads cursors
  // and starts the workers and the timer loop. Fails without side effects.
  Status Start();
  // Delivers everything pending (releasing due timers first) to every durable consumer and
  // returns when all are caught up with the durable LSN, whether or not Start() was called.
  // Ignores leases: for tests and tools, not next to running workers of other instances.
  Status Drain();
  // Finishes the batches in flight, persists cursors, stops the threads. Idempotent. A relay's
  // publishes in progress are cancelled: it returns within the relay's timeout_ms whatever its
  // broker does (wharf/relay.h).
  Status Stop();

  // Releases timers due now into the outbox (also done by the timer loop). Returns how many.
  Status ReleaseDueTimers(size_t* released = nullptr);

  const std::string& instance() const;

 private:
  friend struct internal::RuntimeInternal;
  std::unique_ptr<internal::RuntimeImpl> impl_;
};

}  // namespace wharf
