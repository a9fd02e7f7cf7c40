// Relays: durable consumers that hand facts to a broker.
//
//   #include "wharf/relay.h"
//   #include "wharf/runtime.h"
//
//   wharf::Status RelayToRedis(wharf::Runtime& runtime) {  // before runtime.Start()
//     std::unique_ptr<wharf::RelaySink> sink;
//     wharf::Status s = wharf::MakeRelaySink(
//         "kind=redis_streams;url=redis://127.0.0.1:6379;stream=wharf:{partition}", &sink);
//     if (!s.ok()) return s;
//     return runtime.Relay("to-redis", {"OrderCreated"}, std::move(sink));
//   }
//
// A relay is delivered like a subscriber (at least once, in id order per partition lane, its
// cursor in the same transaction as its dead letters) but a batch at a time: the lane hands the
// batch's facts to its RelaySink, on a thread of the relay's own (never a worker, which other
// consumers share), which publishes them pipelined and says, per fact, what the broker answered.
// The cursor passes a prefix of the batch: the acknowledged facts, those the broker already had (a
// redelivery after a crash), and those it refused for good (each becomes a dead letter named
// "broker-rejected" with the broker's text). The first transient failure ends the batch before its
// fact, which is published again after the runtime's backoff; facts after it that the broker did
// take are then reported as already published.
//
// A sink's broker must recognise a redelivered fact by an id derived from the fact id (Redis
// Streams: the entry id; NATS JetStream: Nats-Msg-Id), so that redelivery is idempotent. Adding a
// broker (e.g. Kafka) is implementing RelaySink; the engine needs no change.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "wharf/fact.h"
#include "wharf/options.h"
#include "wharf/status.h"

namespace wharf {

// What the broker answered for one fact.
enum class PublishResult : uint8_t {
  kAcknowledged = 0,  // stored by the broker
  kDuplicate = 1,     // the broker already held it (a redelivery): passed, not added again
  kRejected = 2,      // refused for good (too large, wrong type, ...): dead letter with `error`
  kTransient = 3,     // not stored (connection lost, timeout, broker loading): retry later
};
const char* ToString(PublishResult result);

struct PublishOutcome {
  PublishResult result = PublishResult::kTransient;
  std::string error;  // the broker's or the client's text, for kRejected and kTransient
};

// Which incarnation of the database emitted a fact (wharf/backup.h): a restored database starts a
// new one at the first id after its backup's point, and facts up to the point keep the one that
// emitted them. A broker that de-duplicates by fact id must see the incarnation too: the original
// database may have published other facts under the ids a restored one gives out.
struct Incarnations {
  // (first fact id, incarnation), ascending; facts below the first start are of incarnation 0.
  std::vector<std::pair<uint64_t, uint64_t>> starts;

  uint64_t Of(uint64_t fact_id) const {
    uint64_t incarnation = 0;
    for (const auto& [first_id, number] : starts) {
      if (fact_id < first_id) break;
      incarnation = number;
    }
    return incarnation;
  }
};

// Publishes facts to one broker. Thread safety: Publish is called concurrently by the lanes of
// different partitions (never twice at once by one lane); implementations must be thread-safe.
class RelaySink {
 public:
  virtual ~RelaySink() = default;
  // Checked when the relay is registered, with its consumer options: InvalidArgument if the
  // sink cannot keep the per-lane order it needs (e.g. a Redis stream template that would let
  // two partition lanes interleave into one stream without ordering=global). Called once, before
  // any Publish (a sink serves one relay; it may keep the name, e.g. for message ids).
  virtual Status Validate(const std::string& relay_name, Ordering ordering) = 0;
  // Called after Validate and before any Publish with the incarnations of the database the relay
  // publishes from. The shipped sinks put a fact's incarnation into the id the broker
  // de-duplicates by (unchanged for incarnation 0) and into the message. The default ignores it,
  // which is right only for a sink whose broker does not de-duplicate by fact id.
  virtual void SetIncarnations(const Incarnations& incarnations) { (void)incarnations; }
  // Publishes `facts` (in id order within each partition) with as many in flight as the sink
  // allows, and fills `outcomes` with one outcome per fact, in the same order. Must not throw.
  // Runs on a thread of the relay's own (up to 4 per relay, one call per lane at a time), never
  // on a runtime worker: a broker that is down or never answers delays this relay only.
  virtual void Publish(std::span<const Fact* const> facts,
                       std::vector<PublishOutcome>* outcomes) = 0;
  // The runtime stops: Publish calls in progress should return soon, their facts not answered
  // yet transient (they are published again when the relay next runs). Any thread; may be called
  // several times; later Publish calls work as usual. The default does nothing: the runtime's
  // Stop() then waits for Publish to return by itself. The shipped sinks return at once, or
  // within timeout_ms when a connect is in progress.
  virtual void Cancel() {}
  // Counters for tests, metrics and `wharf stat` (any thread).
  struct Counters {
    uint64_t acknowledged = 0;
    uint64_t duplicates = 0;
    uint64_t rejected = 0;
    uint64_t transient = 0;
  };
  virtual Counters counters() const = 0;
};

// Makes a sink from "key=value;..." options. Keys common to every kind:
//   kind         redis_streams | nats_jetstream (required)
//   url          the broker (redis://host:port, nats://host:port)
//   timeout_ms   connect and per-reply timeout (default 5000); Runtime::Stop() returns within it
//   in_flight    publishes in flight at most per lane (default 1024)
// redis_streams: stream (template; default wharf:{partition}), user, password, maxlen (0: no
//   trimming; else XADD MAXLEN ~ N).
// nats_jetstream: subject (template; default wharf.{type}.{partition}), user, password, token,
//   id_prefix (Nats-Msg-Id is "<id_prefix>:<fact id>", "<id_prefix>:<incarnation>:<fact id>" for
//   a fact of incarnation not 0; default: the relay's name; give each engine its own when several
//   publish into one stream), create_stream (a stream name: created if missing, over the
//   subjects "<the template's literal first tokens>.>"), tls (1: connect over TLS), tls_ca (PEM
//   CA file the server's certificate must chain to; default the system's), tls_cert + tls_key
//   (PEM client certificate chain and key); any tls_* file implies tls=1 and must be readable
//   and PEM when the sink is made. redis_streams offers no TLS (hiredis 0.14).
// Templates may use {type}, {partition} and {incarnation} (the fact's, 16 lowercase hex digits).
// Unknown key, bad value or missing kind: InvalidArgument naming it, *sink unchanged. Does not
// connect: brokers are reached when the relay first publishes (a broker that is down is a transient
// failure, retried).
Status MakeRelaySink(std::string_view options_text, std::unique_ptr<RelaySink>* sink);

}  // namespace wharf
