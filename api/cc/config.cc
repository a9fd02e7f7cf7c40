// wharf/config.h: the public face of the declarative model's checks (engine/declarative).
#include "wharf/config.h"

#include <algorithm>
#include <utility>

#include "engine/declarative/model.h"

namespace wharf {

Status CheckConfigFile(const std::string& file, ConfigReport* report) {
  if (report == nullptr) return Status::InvalidArgument("config report out-parameter is null");
  *report = ConfigReport();
  declarative::Model model;
  std::vector<declarative::Diagnostic> errors;
  declarative::ParseFile(file, &model, &errors);
  declarative::Validate(model, &errors);
  std::stable_sort(errors.begin(), errors.end(), [](const auto& a, const auto& b) {
    return std::pair(a.mark.line, a.mark.column) < std::pair(b.mark.line, b.mark.column);
  });
  std::string listed;
  for (const declarative::Diagnostic& error : errors) {
    report->errors.push_back(
        ConfigDiagnostic{error.mark.line, error.mark.column, error.message, error.ToString()});
    listed += (listed.empty() ? "" : "\n") + error.ToString();
  }
  report->has_runtime = model.has_runtime;
  report->usable = errors.empty() && model.has_runtime && !model.inputs.empty();
  if (!report->usable) {
    return errors.empty() ? Status::OK() : Status::InvalidArgument(listed);
  }
  for (const declarative::InputProofs& proofs : declarative::Prove(model)) {
    ConfigInput& input = report->inputs.emplace_back();
    input.input = proofs.input;
    input.consumers = proofs.consumers;
    for (const declarative::Proof& proof : proofs.proofs) {
      input.proofs.push_back(
          ConfigProof{proof.guarantee, ToString(proof.outcome), proof.scope, proof.reason});
    }
    for (const declarative::RelayReport& relay : proofs.relays) {
      input.relays.push_back(ConfigRelay{relay.id, relay.broker, relay.url, relay.target,
                                         relay.types, relay.order, relay.reason});
    }
    input.member_concurrency = proofs.member_concurrency;
  }
  return Status::OK();
}

}  // namespace wharf
