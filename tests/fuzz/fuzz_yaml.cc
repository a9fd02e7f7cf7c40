// Fuzz target: the declarative YAML loader (engine/declarative/): parse, validate, prove, and the
// keyed partitioning hook of whatever model results. Every error must carry a position inside the
// text (or 0:0 for the whole file), and nothing may hang or grow without bound.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/declarative/model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace wharf::declarative;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  Model model;
  std::vector<Diagnostic> errors;
  ParseText(text, "fuzz.yaml", &model, &errors);
  Validate(model, &errors);
  for (const Diagnostic& error : errors) {
    if (error.message.empty() || error.mark.line < 0 || error.mark.column < 0) __builtin_trap();
    if (error.ToString().rfind("fuzz.yaml:", 0) != 0) __builtin_trap();
  }
  if (!errors.empty()) return 0;
  std::vector<InputProofs> proofs = Prove(model);
  if (proofs.size() != model.inputs.size()) __builtin_trap();
  if (KeyFromPayload hook = MakeKeyFromPayload(model)) {
    // The text doubles as a payload for every mapped schema.
    for (const InputRuntime& input : model.inputs) {
      for (const SchemaMapping& mapping : input.mapping) {
        std::string type =
            mapping.schema.rfind("schema.", 0) == 0 ? mapping.schema.substr(7) : mapping.schema;
        std::string key, error;
        (void)hook(type, text, &key, &error);
      }
    }
  }
  return 0;
}
