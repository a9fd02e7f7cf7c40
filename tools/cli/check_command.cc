// `wharf check FILE [--json]`: validates a declarative runtime file (SPEC.md §5) and reports, per
// input, the guarantees its declaration establishes and why, its pool's member_concurrency, and
// the relays bound to it (broker, URL, target template, order; never a password or token). Exit 0
// when valid, 1 when not.
#include <cstdio>
#include <string>
#include <vector>

#include "tools/cli/commands.h"
#include "tools/cli/output.h"
#include "wharf/config.h"

namespace wharf::cli {

int Check(const Context& context, const std::string& file) {
  ConfigReport report;
  // The report holds everything; the status only repeats its errors.
  CheckConfigFile(file, &report).PermitUncheckedError();
  const std::vector<ConfigDiagnostic>& errors = report.errors;
  const bool usable = report.usable;
  const std::vector<ConfigInput>& proofs = report.inputs;
  const char* kNoFacts = "no usable runtime facts: the engine uses its defaults";

  if (context.json) {
    Json json;
    json.BeginObject().Key("file").String(file).Key("valid").Bool(errors.empty());
    json.Key("errors").BeginArray();
    for (const ConfigDiagnostic& error : errors) {
      json.BeginObject().Key("line").Int(error.line).Key("column").Int(error.column);
      json.Key("message").String(error.message).Key("text").String(error.text).EndObject();
    }
    json.EndArray();
    json.Key("runtime_facts").Bool(usable || (!errors.empty() && report.has_runtime));
    json.Key("inputs").BeginArray();
    for (const ConfigInput& input : proofs) {
      json.BeginObject().Key("input").String(input.input).Key("consumers").BeginArray();
      for (const std::string& consumer : input.consumers) json.String(consumer);
      json.EndArray().Key("member_concurrency").Uint(input.member_concurrency);
      json.Key("proofs").BeginArray();
      for (const ConfigProof& proof : input.proofs) {
        json.BeginObject().Key("guarantee").String(proof.guarantee);
        json.Key("outcome").String(proof.outcome).Key("scope").String(proof.scope);
        json.Key("reason").String(proof.reason).EndObject();
      }
      json.EndArray().Key("relays").BeginArray();
      for (const ConfigRelay& relay : input.relays) {
        json.BeginObject().Key("id").String(relay.id).Key("broker").String(relay.broker);
        json.Key("url").String(relay.url).Key("target").String(relay.target);
        json.Key("types").BeginArray();
        for (const std::string& type : relay.types) json.String(type);
        json.EndArray().Key("order").String(relay.order);
        json.Key("reason").String(relay.reason).EndObject();
      }
      json.EndArray().EndObject();
    }
    json.EndArray();
    if (errors.empty() && !usable) json.Key("note").String(kNoFacts);
    json.EndObject();
    std::printf("%s\n", json.str().c_str());
  } else {
    for (const ConfigDiagnostic& error : errors) std::fprintf(stderr, "%s\n", error.text.c_str());
    if (!errors.empty()) {
      std::fprintf(stderr, "wharf: %s: %zu error(s)\n", file.c_str(), errors.size());
    } else if (!usable) {
      std::printf("%s: valid; %s\n", file.c_str(), kNoFacts);
    } else {
      std::printf("%s: valid\n", file.c_str());
      for (const ConfigInput& input : proofs) {
        std::string consumers;
        for (const std::string& consumer : input.consumers) {
          consumers += (consumers.empty() ? "" : ", ") + consumer;
        }
        std::string notes = consumers.empty() ? "" : "consumers: " + consumers;
        if (input.member_concurrency > 1) {
          notes += (notes.empty() ? "" : "; ") + std::string("member_concurrency ") +
                   std::to_string(input.member_concurrency);
        }
        std::printf("\ninput %s%s\n", input.input.c_str(),
                    notes.empty() ? "" : (" (" + notes + ")").c_str());
        for (const ConfigProof& proof : input.proofs) {
          std::printf("  %-13s %-11s %-15s %s\n", proof.guarantee.c_str(), proof.outcome.c_str(),
                      proof.scope.c_str(), proof.reason.c_str());
        }
        for (const ConfigRelay& relay : input.relays) {
          std::string types;
          for (const std::string& type : relay.types) types += (types.empty() ? "" : ", ") + type;
          std::printf("  relay %s: %s %s -> %s (types: %s)\n", relay.id.c_str(),
                      relay.broker.c_str(), relay.url.c_str(), relay.target.c_str(), types.c_str());
          std::printf("    order %-15s %s\n", relay.order.c_str(), relay.reason.c_str());
        }
      }
    }
  }
  return errors.empty() ? kExitOk : kExitError;
}

}  // namespace wharf::cli
