#include "engine/core/table_versions.h"

#include <algorithm>
#include <exception>
#include <utility>

#include "engine/base/assert.h"
#include "engine/base/bytes_text.h"
#include "engine/base/exception_text.h"

namespace wharf::internal {

const TableVersions::Table* TableVersions::Find(std::string_view name) const {
  auto it = tables_.find(name);
  return it == tables_.end() ? nullptr : &it->second;
}

uint32_t TableVersions::VersionOf(std::string_view name) const {
  const Table* table = Find(name);
  return table == nullptr ? 1 : table->version;
}

std::vector<DeclaredTable> TableVersions::List() const {
  std::vector<DeclaredTable> list;
  list.reserve(tables_.size());
  for (const auto& [name, table] : tables_) list.push_back({name, table.version});
  std::sort(list.begin(), list.end(),
            [](const DeclaredTable& a, const DeclaredTable& b) { return a.name < b.name; });
  return list;
}

std::shared_ptr<const TableVersions> TableVersions::Of(
    const std::map<std::string, uint32_t>& declared) {
  auto tables = std::make_shared<TableVersions>();
  for (const auto& [name, version] : declared) {
    WHARF_ASSERT(version >= 2);  // decoded so
    tables->tables_.emplace(name, Table{version, {}});
  }
  return tables;
}

std::shared_ptr<const TableVersions> TableVersions::With(std::string_view name, Table table) const {
  WHARF_ASSERT(table.version >= 2);
  auto copy = std::make_shared<TableVersions>(*this);
  copy->tables_.insert_or_assign(std::string(name), std::move(table));
  return copy;
}

Status TableVersions::Migrate(std::string_view name, std::string_view key, uint32_t stored_v,
                              std::string* row) const {
  const Table* table = Find(name);
  if (table == nullptr) return Status::OK();                  // at version 1: nothing is older
  auto failed = [&](uint32_t from, const std::string& why) {  // built only on failure
    return Status::NotSupported("table '" + std::string(name) + "', key " + DescribeBytes(key) +
                                ": migrating the row from version " + std::to_string(from) +
                                " to " + std::to_string(from + 1) + ": " + why);
  };
  for (uint32_t from = stored_v; from < table->version; ++from) {
    auto it = table->migrations.find(from);
    if (it == table->migrations.end()) {
      return failed(from, "no migration is registered for it (Engine::RegisterMigration)");
    }
    try {
      *row = it->second(*row);
    } catch (const std::exception& e) {
      return failed(from, ExceptionText(e));  // the migration's reason, as it gave it
    } catch (...) {
      return failed(from, "the migration threw a non-standard exception");
    }
  }
  return Status::OK();
}

}  // namespace wharf::internal
