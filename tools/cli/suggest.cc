#include "tools/cli/suggest.h"

#include <algorithm>
#include <cassert>

namespace wharf::cli {

size_t EditDistance(std::string_view a, std::string_view b) {
  // Three rows of the dynamic-programming table: two back for the transposition case.
  std::vector<size_t> before(b.size() + 1), previous(b.size() + 1), current(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) previous[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    current[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t substitution = previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, substitution});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        current[j] = std::min(current[j], before[j - 2] + 1);
      }
    }
    std::swap(before, previous);
    std::swap(previous, current);
  }
  return previous[b.size()];
}

std::optional<std::string> Suggest(std::string_view word,
                                   const std::vector<std::string>& candidates) {
  constexpr size_t kEditsMax = 2;
  if (std::find(candidates.begin(), candidates.end(), word) != candidates.end()) {
    return std::nullopt;
  }
  const std::string* nearest = nullptr;
  size_t nearest_edits = kEditsMax + 1;
  for (const std::string& candidate : candidates) {
    const size_t edits = EditDistance(word, candidate);
    if (edits < nearest_edits && edits < word.size()) {
      nearest = &candidate;
      nearest_edits = edits;
    }
  }
  if (nearest != nullptr) return *nearest;
  const std::string* prefixed = nullptr;
  if (word.size() < 2) return std::nullopt;
  for (const std::string& candidate : candidates) {
    if (candidate.size() > word.size() && candidate.compare(0, word.size(), word) == 0) {
      if (prefixed != nullptr) return std::nullopt;  // ambiguous
      prefixed = &candidate;
    }
  }
  if (prefixed != nullptr) return *prefixed;
  return std::nullopt;
}

std::string DidYouMean(std::string_view word, const std::vector<std::string>& candidates) {
  std::optional<std::string> suggestion = Suggest(word, candidates);
  return suggestion ? " (did you mean '" + *suggestion + "'?)" : "";
}

std::string NameList(const std::vector<std::string>& names, size_t shown_max) {
  assert(shown_max > 0);
  if (names.empty()) return "none";
  std::string out;
  const size_t shown = std::min(names.size(), shown_max);
  for (size_t i = 0; i < shown; ++i) out += (i == 0 ? "" : ", ") + names[i];
  if (shown < names.size()) out += ", ... (" + std::to_string(names.size() - shown) + " more)";
  return out;
}

}  // namespace wharf::cli
