// The parsed model: names, look-ups, and loading options from a file.
#include "engine/declarative/model.h"

#include <algorithm>
#include <set>
#include <utility>

namespace wharf::declarative {

std::string Diagnostic::ToString() const {
  return file + ":" + std::to_string(mark.line) + ":" + std::to_string(mark.column) + ": " +
         message;
}

const char* ToString(Delivery value) {
  switch (value) {
    case Delivery::kUnspecified:
      return "unspecified";
    case Delivery::kAtMostOnce:
      return "at_most_once";
    case Delivery::kAtLeastOnce:
      return "at_least_once";
  }
  return "?";
}

const char* ToString(PartitionKind value) {
  return value == PartitionKind::kKeyed ? "keyed" : "none";
}

const char* ToString(OrderKind value) {
  switch (value) {
    case OrderKind::kNone:
      return "none";
    case OrderKind::kGlobal:
      return "global";
    case OrderKind::kPartition:
      return "partition";
  }
  return "?";
}

const char* ToString(BatchOrdering value) {
  return value == BatchOrdering::kPreserved ? "preserved" : "unspecified";
}

const char* ToString(Assignment value) {
  return value == Assignment::kRoundRobin ? "round_robin" : "consistent_hash";
}

const char* ToString(DeclaredConsumerKind value) {
  switch (value) {
    case DeclaredConsumerKind::kProjection:
      return "projection";
    case DeclaredConsumerKind::kReaction:
      return "reaction";
    case DeclaredConsumerKind::kSubscriber:
      return "subscriber";
  }
  return "?";
}

const char* ToString(ProofOutcome value) {
  switch (value) {
    case ProofOutcome::kEstablished:
      return "established";
    case ProofOutcome::kFailed:
      return "failed";
    case ProofOutcome::kNotClaimed:
      return "not_claimed";
  }
  return "?";
}

const InputRuntime* Model::FindInput(std::string_view name) const {
  for (const InputRuntime& input : inputs) {
    if (input.Name() == name) return &input;
  }
  return nullptr;
}

const Pool* Model::FindPool(std::string_view id) const {
  for (const Pool& pool : pools) {
    if (pool.id == id) return &pool;
  }
  return nullptr;
}

Status LoadModel(const std::string& file, Model* model, std::vector<Diagnostic>* errors) {
  std::vector<Diagnostic> local;
  std::vector<Diagnostic>* out = errors != nullptr ? errors : &local;
  size_t before = out->size();
  ParseFile(file, model, out);
  Validate(*model, out);
  std::stable_sort(out->begin() + static_cast<std::ptrdiff_t>(before), out->end(),
                   [](const Diagnostic& a, const Diagnostic& b) {
                     return std::pair(a.mark.line, a.mark.column) <
                            std::pair(b.mark.line, b.mark.column);
                   });
  if (out->size() == before) return Status::OK();
  std::string message;
  for (size_t i = before; i < out->size(); ++i) {
    if (!message.empty()) message += "\n";
    message += (*out)[i].ToString();
  }
  return Status::InvalidArgument(message);
}

Status LoadEngineOptions(const std::string& file, EngineOptions* options) {
  Model model;
  Status s = LoadModel(file, &model);
  if (!s.ok()) return s;
  if (model.partitions) options->partitions = *model.partitions;
  if (KeyFromPayload hook = MakeKeyFromPayload(model)) options->key_from_payload = std::move(hook);
  return Status::OK();
}

Status LoadRuntimeOptions(const std::string& file, RuntimeOptions* options) {
  Model model;
  Status s = LoadModel(file, &model);
  if (!s.ok()) return s;
  if (model.inputs.empty()) return Status::OK();
  std::set<std::string> pools;
  std::set<Assignment> assignments;
  for (const InputRuntime& input : model.inputs) {
    pools.insert(input.pool);
    assignments.insert(input.assignment);
  }
  uint32_t workers = 0;
  for (const Pool& pool : model.pools) {
    if (pools.count(pool.id) != 0) workers += pool.workers;  // ids are unique once validated
  }
  if (workers > 0) options->workers = workers;
  if (assignments.size() == 1) options->assignment = *assignments.begin();
  return Status::OK();
}

Status LoadConsumerOptions(const std::string& file, const std::string& consumer_id,
                           ConsumerOptions* options) {
  Model model;
  Status s = LoadModel(file, &model);
  if (!s.ok()) return s;
  for (const DeclaredConsumer& consumer : model.consumers) {
    if (consumer.id != consumer_id) continue;
    const InputRuntime* input = model.FindInput(consumer.input);
    if (input == nullptr) return Status::Internal("validated consumer without input");
    options->consumer_id = consumer_id;
    switch (input->ordering) {
      case OrderKind::kGlobal:
        options->ordering = Ordering::kGlobal;
        break;
      case OrderKind::kPartition:
        options->ordering = Ordering::kPartition;
        break;
      case OrderKind::kNone:
        options->ordering = Ordering::kNone;
        break;
    }
    return Status::OK();
  }
  return Status::NotFound("consumer '" + consumer_id + "' is not declared in " + file);
}

}  // namespace wharf::declarative
