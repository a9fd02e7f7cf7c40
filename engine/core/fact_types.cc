#include "engine/core/fact_types.h"

#include <algorithm>
#include <exception>
#include <utility>

#include "engine/base/assert.h"
#include "engine/base/exception_text.h"

namespace wharf::internal {

const FactTypes::Type* FactTypes::Find(std::string_view name) const {
  auto it = types_.find(name);
  return it == types_.end() ? nullptr : &it->second;
}

std::vector<DeclaredType> FactTypes::List() const {
  std::vector<DeclaredType> list;
  list.reserve(types_.size());
  for (const auto& [name, type] : types_) {
    list.push_back({name, type.version, type.first_version});
  }
  std::sort(list.begin(), list.end(),
            [](const DeclaredType& a, const DeclaredType& b) { return a.name < b.name; });
  return list;
}

std::shared_ptr<const FactTypes> FactTypes::Of(const std::vector<DeclaredType>& declared) {
  auto types = std::make_shared<FactTypes>();
  for (const DeclaredType& type : declared) {
    WHARF_ASSERT(type.first_version >= 1 && type.first_version <= type.version);  // decoded so
    types->types_.emplace(type.name, Type{type.version, type.first_version, {}});
    types->upcasting_ = types->upcasting_ || type.version > type.first_version;
  }
  return types;
}

std::shared_ptr<const FactTypes> FactTypes::With(std::string_view name, Type type) const {
  WHARF_ASSERT(type.first_version >= 1 && type.first_version <= type.version);
  auto copy = std::make_shared<FactTypes>(*this);
  copy->types_.insert_or_assign(std::string(name), std::move(type));
  copy->upcasting_ = std::any_of(copy->types_.begin(), copy->types_.end(), [](const auto& entry) {
    return entry.second.version > entry.second.first_version;
  });
  return copy;
}

std::string FactTypes::EmitError(std::string_view name, uint32_t v, uint32_t* stored_v) const {
  const Type* type = Find(name);
  if (type == nullptr) {
    return "fact type '" + std::string(name) + "' is not declared (Engine::DeclareTypes)";
  }
  *stored_v = v == 0 ? type->version : v;
  if (v == 0) return {};
  if (v > type->version) {
    return "fact type '" + std::string(name) + "' is declared at version " +
           std::to_string(type->version) + "; version " + std::to_string(v) +
           " is above it (Engine::DeclareType raises it)";
  }
  if (v < type->first_version) {
    return "fact type '" + std::string(name) + "' was first declared at version " +
           std::to_string(type->first_version) + "; version " + std::to_string(v) +
           " is below it, and no upcaster can lift it";
  }
  return {};
}

uint32_t FactTypes::MissingStep(const Type& type) {
  for (uint32_t from = type.first_version; from < type.version; ++from) {
    if (!type.upcasters.contains(from)) return from;
  }
  return 0;
}

bool FactTypes::Upcast(std::string_view name, const Type& type, Fact* fact, std::string* error) {
  WHARF_DASSERT(fact->v == fact->stored_v);  // lifted once, from the stored version
  auto step = [&](uint32_t from) {           // named only on failure (this runs for every fact)
    return "upcasting '" + std::string(name) + "' from version " + std::to_string(from) + " to " +
           std::to_string(from + 1);
  };
  for (uint32_t from = fact->v; from < type.version; ++from) {
    auto it = type.upcasters.find(from);
    if (it == type.upcasters.end()) {
      *error = step(from) + ": no upcaster is registered for it";
      return false;
    }
    try {
      fact->payload = it->second(fact->payload);
    } catch (const std::exception& e) {
      *error = step(from) + ": " + ExceptionText(e);  // the upcaster's reason, as it gave it
      return false;
    } catch (...) {
      *error = step(from) + ": the upcaster threw a non-standard exception";
      return false;
    }
    if (fact->payload.empty()) {  // as Emit refuses: a consumer never receives an empty payload
      *error = step(from) + ": the upcaster returned an empty payload (facts are never empty)";
      return false;
    }
    fact->v = from + 1;
  }
  return true;
}

}  // namespace wharf::internal
