// NatsJetStreamSink: relays facts to NATS JetStream (wharf/relay.h).
//
// Each fact is one message on the subject its template names, with the header Nats-Msg-Id
// "<id_prefix>:<fact id>": JetStream drops a message whose id it saw within the stream's duplicate
// window (2 minutes by default) and acknowledges it as a duplicate. A fact of a restored
// database's incarnation (not 0; wharf/backup.h) has the id "<id_prefix>:<incarnation as 16 hex
// digits>:<fact id>" and the header Wharf-Incarnation (the same 16 digits): the original database
// may have published other facts under the same fact ids, which the window must not drop. Facts
// of incarnation 0 keep the short id, so streams written before incarnations existed still
// recognise their redeliveries. The batch is published at once
// (up to in_flight messages before their acknowledgements are awaited), each with a reply subject
// of its own under one inbox per call, and the acknowledgements are matched back to the facts.
// The fact's type, key, partition, commit time and id travel as headers Wharf-Type, Wharf-Key,
// Wharf-Partition, Wharf-Commit-Ms, Wharf-Fact-Id; its headers as headers; the payload as data.
// A key that would not arrive as it is in a header (not UTF-8, a control byte, a space at either
// end) travels base64-encoded as Wharf-Key-B64 instead; a fact whose type, source or headers a
// header cannot carry at all (CR, LF, NUL) is refused for good, a dead letter (header_text.h).
//
// JetStream keeps one order per stream, and a subject's facts come from one lane (the subject
// template must hold {partition} unless ordering=global, as for Redis), so per-partition order
// holds within each subject.
//
// With tls=1 (or tls_ca / tls_cert / tls_key) the connection is TLS (nats.c over OpenSSL): the
// server's certificate is verified against tls_ca (else the system's CAs), and tls_cert/tls_key
// are presented to a server that verifies clients.
//
// Thread safety: one connection (nats.c connections are thread-safe), one inbox subscription
// per chunk of a Publish call. Cancel (any thread) closes the inbox subscriptions awaiting
// acknowledgements, so that their calls return at once; a connect in progress runs to its
// timeout, and the calls waiting for it then give up.
#pragma once

#include <string>
#include <vector>

#include "engine/base/mutex.h"
#include "engine/relay/outcome_counters.h"
#include "engine/relay/relay_config.h"
#include "engine/replicate/nats_link.h"
#include "wharf/relay.h"

struct __natsConnection;
struct __natsSubscription;

namespace wharf::internal {

// The connection settings of `config` (NatsConnect, engine/replicate/nats_link.h, connects).
NatsConnectOptions NatsConnectOptionsOf(const RelayConfig& config);

// Loads the TLS files of `config` (if tls) as the connection will: InvalidArgument naming the
// option and nats.c's text (e.g. a file that is not PEM). Called by MakeRelaySink.
Status CheckNatsTls(const RelayConfig& config);

class NatsJetStreamSink : public RelaySink {
 public:
  explicit NatsJetStreamSink(RelayConfig config);
  ~NatsJetStreamSink() override;

  Status Validate(const std::string& relay_name, Ordering ordering) override;
  // Before any Publish (not concurrently with one).
  void SetIncarnations(const Incarnations& incarnations) override;
  void Publish(std::span<const Fact* const> facts, std::vector<PublishOutcome>* outcomes) override;
  Counters counters() const override;
  void Cancel() override;

 private:
  // The connection, connecting (and creating the stream) first if needed. nullptr: *error (also
  // when Cancel was called since the Publish call began, at `cancels`).
  __natsConnection* Connection(uint64_t cancels, std::string* error);
  // Publishes facts [begin, end) and reads their acknowledgements. False: stop the batch.
  bool PublishChunk(__natsConnection* connection, uint64_t cancels,
                    std::span<const Fact* const> facts, size_t begin, size_t end,
                    std::vector<PublishOutcome>* outcomes);
  uint64_t cancels() const;

  const RelayConfig config_;
  std::string id_prefix_;
  Incarnations incarnations_;  // set before any Publish, then only read
  Mutex mutex_;                // one connect at a time
  __natsConnection* connection_ WHARF_GUARDED_BY(mutex_) = nullptr;
  mutable Mutex waiting_mutex_;
  // Inboxes awaiting acks.
  std::vector<__natsSubscription*> waiting_ WHARF_GUARDED_BY(waiting_mutex_);
  uint64_t cancels_ WHARF_GUARDED_BY(waiting_mutex_) = 0;  // Cancel calls so far
  OutcomeCounters counters_;
};

}  // namespace wharf::internal
