// `wharf check FILE [--json]`: validates a declarative runtime file (SPEC.md §5) and reports, per
// input, the guarantees its declaration establishes and why. Exit 0 when valid, 1 when not.
#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "engine/declarative/model.h"
#include "tools/cli/commands.h"
#include "tools/cli/output.h"

namespace wharf::cli {

int Check(const Context& context, const std::string& file) {
  using namespace wharf::declarative;
  Model model;
  std::vector<Diagnostic> errors;
  ParseFile(file, &model, &errors);
  Validate(model, &errors);
  std::stable_sort(errors.begin(), errors.end(), [](const Diagnostic& a, const Diagnostic& b) {
    return std::pair(a.mark.line, a.mark.column) < std::pair(b.mark.line, b.mark.column);
  });
  bool usable = errors.empty() && model.has_runtime && !model.inputs.empty();
  std::vector<InputProofs> proofs;
  if (usable) proofs = Prove(model);
  const char* kNoFacts = "no usable runtime facts: the engine uses its defaults";

  if (context.json) {
    Json json;
    json.BeginObject().Key("file").String(file).Key("valid").Bool(errors.empty());
    json.Key("errors").BeginArray();
    for (const Diagnostic& error : errors) {
      json.BeginObject().Key("line").Int(error.mark.line).Key("column").Int(error.mark.column);
      json.Key("message").String(error.message).Key("text").String(error.ToString()).EndObject();
    }
    json.EndArray();
    json.Key("runtime_facts").Bool(usable || (!errors.empty() && model.has_runtime));
    json.Key("inputs").BeginArray();
    for (const InputProofs& input : proofs) {
      json.BeginObject().Key("input").String(input.input).Key("consumers").BeginArray();
      for (const std::string& consumer : input.consumers) json.String(consumer);
      json.EndArray().Key("proofs").BeginArray();
      for (const Proof& proof : input.proofs) {
        json.BeginObject().Key("guarantee").String(proof.guarantee);
        json.Key("outcome").String(ToString(proof.outcome)).Key("scope").String(proof.scope);
        json.Key("reason").String(proof.reason).EndObject();
      }
      json.EndArray().EndObject();
    }
    json.EndArray();
    if (errors.empty() && !usable) json.Key("note").String(kNoFacts);
    json.EndObject();
    std::printf("%s\n", json.str().c_str());
  } else {
    for (const Diagnostic& error : errors) std::fprintf(stderr, "%s\n", error.ToString().c_str());
    if (!errors.empty()) {
      std::fprintf(stderr, "wharf: %s: %zu error(s)\n", file.c_str(), errors.size());
    } else if (!usable) {
      std::printf("%s: valid; %s\n", file.c_str(), kNoFacts);
    } else {
      std::printf("%s: valid\n", file.c_str());
      for (const InputProofs& input : proofs) {
        std::string consumers;
        for (const std::string& consumer : input.consumers) {
          consumers += (consumers.empty() ? "" : ", ") + consumer;
        }
        std::printf("\ninput %s%s\n", input.input.c_str(),
                    consumers.empty() ? "" : (" (consumers: " + consumers + ")").c_str());
        for (const Proof& proof : input.proofs) {
          std::printf("  %-13s %-11s %-15s %s\n", proof.guarantee.c_str(), ToString(proof.outcome),
                      proof.scope.c_str(), proof.reason.c_str());
        }
      }
    }
  }
  return errors.empty() ? kExitOk : kExitError;
}

}  // namespace wharf::cli
