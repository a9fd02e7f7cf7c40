// EffectsImpl: what a projection's or reaction's handler writes through Effects, forwarded to
// its batch's transaction, with the refusals remembered for the lane's failure policy.
//
// Thread safety: used by the one thread running the handler.
#pragma once

#include <string>
#include <string_view>

#include "engine/core/engine_core.h"
#include "engine/runtime/consumer.h"
#include "wharf/engine.h"
#include "wharf/runtime.h"

namespace wharf::internal {

class CursorChain;

// Effects implementation: forwards to the batch's Txn and remembers refusals.
//
// Batch limits: the batch's transaction is shared by its facts, so a fact's effects may cross a
// transaction limit only because earlier facts of the batch filled it. Such an effect is refused
// with `batch_full()` set and nothing forwarded: the lane then ends the batch before this fact
// and commits what it has, and the fact runs again at the start of the next batch. An effect that
// crosses a limit with this fact's own effects alone is forwarded, refused by the Txn, and settles
// the fact as `store-rejected`. The transaction's only cumulative limit is kTxnBytesMax (every
// other limit — value sizes, headers per fact — holds per operation whatever the batch holds).
class EffectsImpl {
 public:
  // `chain`: the cursor chain of the lane running the batch (null outside one); reads wait for
  // its batches in flight.
  EffectsImpl(Txn* txn, const Consumer* consumer, const Fact* trigger,
              const CursorChain* chain = nullptr)
      : txn_(txn),
        consumer_(consumer),
        trigger_(trigger),
        chain_(chain),
        batch_bytes_before_(EngineCore::RepOf(*txn)->bytes) {}
  Effects MakeEffects() { return Effects(this); }

  Status Put(std::string_view table, std::string_view key, std::string_view value);
  Status Delete(std::string_view table, std::string_view key);
  Status Get(std::string_view table, std::string_view key, std::string* value) const;
  Status Scan(std::string_view table, const KeyRange& range, size_t limit, const RowFn& row,
              ScanResult* result) const;
  Status Emit(std::string_view type, std::string_view key, std::string_view payload,
              const EmitOptions& options);

  // The first refusal ("store-rejected" or "cascade-exceeded"), if any.
  const std::string& failure_name() const { return failure_name_; }
  const Status& failure() const { return failure_; }
  // An effect would have crossed a transaction limit only because of earlier facts of the batch.
  bool batch_full() const { return batch_full_; }

 private:
  Status Note(Status status, const char* name);
  // True (and batch_full_ set) when adding `bytes` crosses kTxnBytesMax but this fact's effects
  // alone would not.
  bool CrossesBecauseOfBatch(size_t bytes);

  Txn* txn_;
  const Consumer* consumer_;
  const Fact* trigger_;
  const CursorChain* chain_;
  const size_t batch_bytes_before_;  // what earlier facts of the batch put in the transaction
  std::string failure_name_;
  Status failure_;
  bool batch_full_ = false;
};

}  // namespace wharf::internal
