// EngineInternal: the library's own way into the parts of the public Engine and Txn that the
// public API (wharf/engine.h) does not expose, as leveldb's WriteBatchInternal: a struct of
// static functions that is the single friend of Engine and Txn, in a header users never see.
// The runtime, admin, trimming, tests and benches reach the engine's core through it; nothing
// public names the core.
//
// Thread safety: as the objects passed (Engine is thread-safe; a Txn is used by one thread).
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "wharf/engine.h"
#include "wharf/status.h"

namespace wharf::internal {

class EngineCore;
struct TxnRep;

struct EngineInternal {
  // The core an open (or closed) Engine is made of; never null.
  static const std::shared_ptr<EngineCore>& Core(const Engine& engine) { return engine.core_; }
  // A public Engine over `core` (engine/open hands it to the caller).
  static std::unique_ptr<Engine> NewEngine(std::shared_ptr<EngineCore> core) {
    return std::unique_ptr<Engine>(new Engine(std::move(core)));
  }
  // A new, empty transaction of `core` (Engine::Begin, the runtime's batches).
  static Txn NewTxn(std::shared_ptr<EngineCore> core) { return Txn(std::move(core)); }

  // The transaction's buffered writes, facts and checks (null after a move).
  static TxnRep* Rep(Txn& txn) { return txn.rep_.get(); }
  static std::unique_ptr<TxnRep>& MutableRep(Txn& txn) { return txn.rep_; }
  static EngineCore* CoreOf(const Txn& txn) { return txn.core_.get(); }

  // Txn::Emit with the origin of a fact a consumer emits: `source` (its consumer id; "" for an
  // application's fact) and `depth` (the emitting fact's depth + 1; 0 for an application's fact).
  // The same checks and errors as Txn::Emit (engine/core/engine.cc).
  static Status EmitWithOrigin(Txn& txn, std::string_view type, std::string_view key,
                               std::string_view payload, const EmitOptions& options,
                               std::string_view source, uint32_t depth);
};

}  // namespace wharf::internal
