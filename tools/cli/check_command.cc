// `wharf check FILE [--json] [--strict] [--require GUARANTEE]...`: validates a declarative runtime
// file and reports, per input, the guarantees its declaration establishes and why, its pool's
// member_concurrency, and the relays bound to it (broker, URL, target template, order; never a
// password or token). Exit 0 when valid, 1 when not; 4 (kExitUnproven) when valid but a guarantee
// --strict or --require asks for is not established, for CI to fail on.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "tools/cli/commands.h"
#include "tools/cli/output.h"
#include "wharf/config.h"

namespace wharf::cli {
namespace {

// A guarantee of one input that the options ask for and the file does not establish.
struct Unproven {
  std::string input;
  const ConfigProof* proof;
  std::string asked;  // "--strict" or "--require GUARANTEE"
};

// --strict: every claimed guarantee established (a failed proof is a claim the declaration cannot
// back). --require G: G established for every input, claimed or not; a file declaring no input
// proves nothing, so each required guarantee is then unproven for no input ("").
std::vector<Unproven> FindUnproven(const std::vector<ConfigInput>& inputs,
                                   const CheckOptions& options) {
  std::vector<Unproven> unproven;
  if (!options.require.empty() && inputs.empty()) {
    for (const std::string& guarantee : options.require) {
      unproven.push_back({"", nullptr, "--require " + guarantee});
    }
  }
  for (const ConfigInput& input : inputs) {
    for (const ConfigProof& proof : input.proofs) {
      const bool required = std::find(options.require.begin(), options.require.end(),
                                      proof.guarantee) != options.require.end();
      if (required && proof.outcome != "established") {
        unproven.push_back({input.input, &proof, "--require " + proof.guarantee});
      } else if (options.strict && proof.outcome == "failed") {
        unproven.push_back({input.input, &proof, "--strict"});
      }
    }
  }
  return unproven;
}

}  // namespace

int Check(const Context& context, const std::string& file, const CheckOptions& options) {
  ConfigReport report;
  // The report holds everything; the status only repeats its errors.
  CheckConfigFile(file, &report).PermitUncheckedError();
  const std::vector<ConfigDiagnostic>& errors = report.errors;
  const bool usable = report.usable;
  const std::vector<ConfigInput>& proofs = report.inputs;
  const char* kNoFacts = "no usable runtime facts: the engine uses its defaults";
  const bool asked = options.strict || !options.require.empty();
  const std::vector<Unproven> unproven =
      errors.empty() && asked ? FindUnproven(proofs, options) : std::vector<Unproven>();

  if (context.json) {
    wire::JsonWriter json;
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
    if (asked && errors.empty()) {
      // What --strict / --require found missing (empty: the file proves what was asked).
      json.Key("unproven").BeginArray();
      for (const Unproven& missing : unproven) {
        json.BeginObject().Key("input").String(missing.input).Key("asked").String(missing.asked);
        if (missing.proof != nullptr) {
          json.Key("guarantee").String(missing.proof->guarantee);
          json.Key("outcome").String(missing.proof->outcome);
        }
        json.EndObject();
      }
      json.EndArray();
    }
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
  if (!errors.empty()) return kExitError;
  if (!context.json) {
    for (const Unproven& missing : unproven) {
      if (missing.proof == nullptr) {
        std::fprintf(stderr, "wharf: %s: %s: no input is declared, so nothing is proven\n",
                     file.c_str(), missing.asked.c_str());
      } else {
        std::fprintf(stderr, "wharf: %s: input %s: %s is %s, not established (%s)\n", file.c_str(),
                     missing.input.c_str(), missing.proof->guarantee.c_str(),
                     missing.proof->outcome.c_str(), missing.asked.c_str());
      }
    }
  }
  return unproven.empty() ? kExitOk : kExitUnproven;
}

}  // namespace wharf::cli
