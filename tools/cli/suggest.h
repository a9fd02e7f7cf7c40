// "Did you mean ...?" for the `wharf` CLI: the known name closest to a mistyped one (commands,
// options, fact types, consumers), and short lists of known names for warnings.
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace wharf::cli {

// Edits turning `a` into `b`: insertions, deletions, substitutions and transpositions of two
// adjacent characters (optimal string alignment distance, a restricted Damerau-Levenshtein).
size_t EditDistance(std::string_view a, std::string_view b);

// The candidate `word` most likely meant: the nearest by EditDistance when at most 2 edits away
// (and fewer edits than `word` has characters, so "x" does not suggest "top"), else the only
// candidate `word` (2+ characters) is a prefix of. Ties go to the earlier candidate. Empty when
// nothing is close, or when `word` is itself a candidate.
std::optional<std::string> Suggest(std::string_view word,
                                   const std::vector<std::string>& candidates);

// " (did you mean 'X'?)" for Suggest's answer, or "" when there is none.
std::string DidYouMean(std::string_view word, const std::vector<std::string>& candidates);

// "a, b, c" for at most `shown_max` names, then ", ... (N more)"; "none" when empty.
std::string NameList(const std::vector<std::string>& names, size_t shown_max = 10);

}  // namespace wharf::cli
