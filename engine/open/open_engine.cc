#include "engine/open/open_engine.h"

#include "engine/admin/socket/address.h"
#include "engine/admin/socket/server.h"
#include "engine/core/engine_core.h"
#include "engine/metrics/http_listener.h"
#include "engine/metrics/textfile_writer.h"
#include "engine/replicate/replicator.h"
#include "engine/retention/retention.h"

namespace wharf {

Status Engine::Open(const std::string& path, const EngineOptions& options,
                    std::unique_ptr<Engine>* engine) {
  if (engine == nullptr) return Status::InvalidArgument("engine output pointer is null");
  return internal::OpenEngine(path, options, internal::EngineHooks(), engine);
}

namespace internal {

namespace {

// Starts the services that serve the open engine from outside (each only when its option asks
// for it) and attaches them to its core, which stops them at Close.
Status StartServing(Engine* engine, EngineCore* core, const EngineOptions& options) {
  const std::string socket_path = admin_socket::SocketPathFor(core->path(), options.admin_socket);
  if (!socket_path.empty()) {
    std::unique_ptr<admin_socket::AdminServer> server;
    Status s = admin_socket::AdminServer::Start(engine, socket_path, admin_socket::ServerLimits(),
                                                &server);
    if (!s.ok()) return s;
    core->Attach(ServiceSlot::kAdminServer, std::move(server));
  }
  if (!options.metrics_textfile.empty()) {
    std::unique_ptr<TextfileWriter> writer;
    Status s = TextfileWriter::Start(engine, options.metrics_textfile, options.metrics_interval_ms,
                                     {}, &writer);
    if (!s.ok()) return s;
    core->Attach(ServiceSlot::kMetricsTextfile, std::move(writer));
  }
  if (!options.metrics_listen.empty()) {
    std::unique_ptr<HttpListener> listener;
    Status s = HttpListener::Start(engine, options.metrics_listen, HttpListenerLimits(), &listener);
    if (!s.ok()) return s;
    core->Attach(ServiceSlot::kMetricsListener, std::move(listener));
  }
  return Status::OK();
}

}  // namespace

Status OpenEngine(const std::string& path, const EngineOptions& options, const EngineHooks& hooks,
                  std::unique_ptr<Engine>* engine) {
  ReplicateConfig replicate;
  Status s = ReplicateConfigOf(options, &replicate);
  if (!s.ok()) return s;
  // Replication takes part in the core's opening: it may bring a copy up to date with its stream
  // (the store then reopens) and takes the committer's groups from the first one.
  std::unique_ptr<Replicator> replicator;
  EngineCore::OpenSteps steps;
  if (!options.replicate.empty()) {
    steps.store_opened = [&](Store* store, bool* reopen) {
      return Replicator::Prepare(options, store, &replicator, reopen);
    };
    steps.committer_made = [&](EngineCore* core) {
      if (replicator == nullptr) return Status::OK();
      Status attached = replicator->Attach(core->committer());
      if (attached.ok()) core->LimitTxnBytes(replicator->txn_bytes_max());
      return attached;
    };
  }
  std::shared_ptr<EngineCore> core;
  s = EngineCore::Open(path, options, hooks, steps, &core);
  if (!s.ok()) return s;
  Replicator* replicating = replicator.get();
  if (replicator != nullptr) core->Attach(ServiceSlot::kReplicator, std::move(replicator));
  auto retention = std::make_unique<Retention>(core.get());
  retention->Start();
  core->Attach(ServiceSlot::kRetention, std::move(retention));
  EngineCore* raw = core.get();
  *engine = EngineInternal::NewEngine(std::move(core));
  for (const DeclaredType& type : options.types) {
    if (!s.ok()) break;
    s = (*engine)->DeclareType(type.name, type.version);
    if (!s.ok()) s = s.WithMessage("declaring the configured types: " + s.message());
  }
  for (const DeclaredTable& table : options.tables) {
    if (!s.ok()) break;
    s = (*engine)->DeclareTable(table.name, table.version);
    if (!s.ok()) s = s.WithMessage("declaring the configured tables: " + s.message());
  }
  // The base snapshot, when the stream needs one, is uploaded before the engine is handed out.
  if (s.ok() && replicating != nullptr) s = replicating->Start(engine->get());
  if (s.ok()) s = StartServing(engine->get(), raw, options);
  if (!s.ok()) engine->reset();  // closes it
  return s;
}

}  // namespace internal
}  // namespace wharf
