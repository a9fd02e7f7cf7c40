// FactTypes: the fact types a database declares, the payload version of each, and the upcasters
// that lift a stored payload to it.
//
// A type is declared at a version (persisted: tables::meta) and may be raised later; producers
// emit any version from the one it was first declared at up to the declared one, and consumers
// receive every fact at the declared version: a lane lifts an older payload one step at a time
// through the upcasters registered on the engine (not persisted: the application registers them on
// every open).
//
// Thread safety: a FactTypes is immutable. The engine core swaps in a new one on every change
// (declare, register), so a lane reads one snapshot for a whole batch without holding a lock.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/base/string_hash.h"
#include "wharf/engine.h"
#include "wharf/fact.h"

namespace wharf::internal {

class FactTypes {
 public:
  struct Type {
    uint32_t version = 1;        // declared: producers emit at most this, consumers receive it
    uint32_t first_version = 1;  // the oldest version its facts can have
    std::map<uint32_t, Upcaster> upcasters;  // by the version each one lifts from
  };

  const Type* Find(std::string_view name) const;
  // The declared types, in name order.
  std::vector<DeclaredType> List() const;
  // Some type is declared above its first version: only then can a fact need upcasting.
  bool upcasting() const { return upcasting_; }

  // The types a database declares (as read from its meta records), without upcasters.
  static std::shared_ptr<const FactTypes> Of(const std::vector<DeclaredType>& declared);
  // A copy with `name` declared as `type` (added or replaced).
  std::shared_ptr<const FactTypes> With(std::string_view name, Type type) const;

  // Why a fact of `name` at version `v` (0: the declared one) may not be emitted, or "" when it
  // may, with the version it is stored at in *stored_v.
  std::string EmitError(std::string_view name, uint32_t v, uint32_t* stored_v) const;
  // The first version of `type`'s chain (first_version .. version - 1) without an upcaster from
  // it, or 0 when the chain is complete.
  static uint32_t MissingStep(const Type& type);
  // Lifts *fact, stored at an older version of `type`, to the declared version: fact->v and
  // fact->payload change, fact->stored_v stays. False, with *error saying which step and why, when
  // a step is missing or its upcaster throws (*fact is then unspecified). A fact already at (or, if
  // written before versions were checked, above) the declared version is left as it is.
  static bool Upcast(std::string_view name, const Type& type, Fact* fact, std::string* error);

 private:
  std::unordered_map<std::string, Type, StringViewHash, std::equal_to<>> types_;
  bool upcasting_ = false;
};

}  // namespace wharf::internal
