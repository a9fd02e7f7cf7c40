// EngineService: a part of an open engine that lives in a layer above the core (replication,
// retention, the admin socket, the metrics exports). The core owns the services attached to it
// and stops them in Close without knowing their types; the engine is composed in engine/open, and
// each layer reaches its own service through its slot (RetentionOf in engine/retention,
// ReplicatorOf in engine/replicate, ...).
//
// Thread safety: EngineCore::Close calls OnClose once per step, from the closing thread.
#pragma once

#include <cstddef>
#include <cstdint>

namespace wharf::internal {

// One slot per kind of service; within a step of Close, services stop in this order.
enum class ServiceSlot : uint8_t {
  kReplicator,       // option replicate
  kMetricsTextfile,  // option metrics_textfile
  kMetricsListener,  // option metrics_listen
  kAdminServer,      // option admin_socket
  kRetention,        // always
};
inline constexpr size_t kServiceSlots = static_cast<size_t>(ServiceSlot::kRetention) + 1;

// The steps of EngineCore::Close, in order (a running backup was stopped before the first).
enum class CloseStep : uint8_t {
  kEngineOpen,        // calls still succeed: end what uses the engine (a snapshot, a last write)
  kEngineClosed,      // calls answer Closed: stop serving (a request in progress finishes)
  kCommitterStopped,  // every queued commit is written and no more come
};

class EngineService {
 public:
  virtual ~EngineService() = default;
  // Called at every step of Close, in order; a service acts on the steps it cares about.
  virtual void OnClose(CloseStep step) = 0;
};

}  // namespace wharf::internal
