#include "storage/contract.h"

#include <algorithm>
#include <cmath>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "services/common/utf8.h"
#include "services/common/word_forms.h"

namespace convstate {

int64_t EstimatedPrompt(const Conversation& c, const std::vector<ItemData>& items) {
  int64_t prompt = c.system_prompt_tokens + c.pinned_instructions_tokens + c.item_tokens;
  for (const ItemData& item : items) {
    if (item.role == Role::kAssistant) break;
    prompt += item.token_count;
  }
  return prompt;
}

double UpdateCorrection(double current, int64_t reported, int64_t estimated) {
  // Below this the fixed parts of a prompt dominate and the ratio is noise.
  constexpr int64_t kMinEstimate = 64;
  // How much one report moves the factor.
  constexpr double kWeight = 0.3;
  if (reported <= 0 || estimated < kMinEstimate) return current;
  const double ratio = static_cast<double>(reported) / static_cast<double>(estimated);
  // A ratio this far off is a report about some other prompt.
  if (ratio < 0.25 || ratio > 4.0) return current;
  return current + kWeight * (ratio - current);
}

namespace {

bool IsTermChar(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool IsJoiner(char c) {
  return c == '-' || c == '.' || c == '/' || c == ':' || c == '_' || c == '@';
}

// A test runner's marks, said as the words they stand for: a failed test's
// cross (jest's "✕", "✖", "✗", "✘") and the "●" that opens jest's
// "● Suite › test" title of a failure, "fail"; a passed test's tick ("✓",
// "✔"), "pass".
constexpr absl::string_view kFailMarks[] = {"\u2715", "\u2716", "\u2717", "\u2718"};
constexpr absl::string_view kPassMarks[] = {"\u2713", "\u2714"};
constexpr absl::string_view kFailureTitle = "\u25cf";  // "●", with "›" after it.
constexpr absl::string_view kTitleStep = "\u203a";

// The word the mark at `text[i]` stands for, or "".
absl::string_view MarkAt(absl::string_view text, size_t i) {
  const absl::string_view rest = text.substr(i);
  for (absl::string_view mark : kFailMarks) {
    if (absl::StartsWith(rest, mark)) return "fail";
  }
  for (absl::string_view mark : kPassMarks) {
    if (absl::StartsWith(rest, mark)) return "pass";
  }
  if (absl::StartsWith(rest, kFailureTitle)) {
    const absl::string_view line = rest.substr(0, rest.find('\n'));
    if (absl::StrContains(line, kTitleStep)) return "fail";
  }
  return "";
}

}  // namespace

std::vector<std::string> SearchTerms(absl::string_view text) {
  // The first 65,536 characters (not bytes), as migrations/0016 indexes.
  const absl::string_view original = Utf8PrefixChars(text, 65536);
  std::string lower(original);
  for (char& c : lower) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  // Where a camel-cased word starts a part: an upper-case letter after a
  // lower-case one or a digit ("maxReplicas", "p95LatencyMs"), or before
  // one after another upper-case letter ("HTTPServer"). Byte positions are
  // the same in `lower`.
  auto upper = [&](size_t i) { return original[i] >= 'A' && original[i] <= 'Z'; };
  auto lowercase = [&](size_t i) { return original[i] >= 'a' && original[i] <= 'z'; };
  auto digit = [&](size_t i) { return original[i] >= '0' && original[i] <= '9'; };
  auto camel_break = [&](size_t i) {
    if (i == 0 || !upper(i)) return false;
    return lowercase(i - 1) || digit(i - 1) ||
           (upper(i - 1) && i + 1 < original.size() && lowercase(i + 1));
  };
  std::vector<std::string> out;
  // What `out` holds: looked through while it is short (a line's words),
  // a set once it is long (a document's).
  constexpr size_t kScanned = 24;
  absl::flat_hash_set<std::string> seen;
  auto add = [&](absl::string_view w) {
    if (w.empty() || w.size() > 200) return;
    if (out.size() < kScanned) {
      if (std::find(out.begin(), out.end(), w) == out.end()) out.emplace_back(w);
      return;
    }
    if (seen.empty()) seen.insert(out.begin(), out.end());
    if (seen.insert(std::string(w)).second) out.emplace_back(w);
  };
  // A word, in its one form (WordForm); a compound stays as written, and
  // its parts are stemmed, and spelled out as well (a host's "db" is a
  // name, the "db" of "pricing-db" the word database).
  auto add_word = [&](absl::string_view w, bool part) {
    if (w.empty() || w.size() > 200) return;
    // (A word that is no abbreviation has one form either way.)
    if (part && IsAbbreviation(w)) ForEachWordForm(w, /*spell_out=*/false, add);
    ForEachWordForm(w, /*spell_out=*/true, add);
    // A word negated by "un" holds the word too ("not yet applied" finds
    // `unapplied_deltas`); a short one ("undo", "until", "unique") is a
    // word of its own.
    if (w.size() >= 7 && absl::StartsWith(w, "un") &&
        std::all_of(w.begin(), w.end(), [](char c) { return c >= 'a' && c <= 'z'; })) {
      ForEachWordForm(w.substr(2), /*spell_out=*/false, add);
    }
  };
  // A run of letters and digits [from, to): a camel-cased one as written
  // (lowercase) beside its parts, as a compound is, when every part has two
  // characters or more ("IdP" and "iPhone" are words of their own).
  auto add_run = [&](size_t from, size_t to, bool part) {
    const absl::string_view run = absl::string_view(lower).substr(from, to - from);
    // Its camel-case parts, [start, k) each: checked before any is added
    // (most runs have none, and allocate nothing).
    bool camel = false;
    for (size_t k = from + 1, start = from; k <= to; ++k) {
      if (k < to && !camel_break(k)) continue;
      if (k - start < 2) {
        camel = false;
        break;
      }
      camel |= k < to;
      start = k;
    }
    if (!camel) {
      add_word(run, part);
      return;
    }
    // Whole, in its one form too ("CronJobs" is "cronjob").
    add_word(run, /*part=*/false);
    for (size_t k = from + 1, start = from; k <= to; ++k) {
      if (k < to && !camel_break(k)) continue;
      add_word(absl::string_view(lower).substr(start, k - start), /*part=*/true);
      start = k;
    }
  };
  size_t i = 0;
  while (i < lower.size()) {
    if (!IsTermChar(lower[i])) {
      if (static_cast<unsigned char>(lower[i]) == 0xe2) {
        if (const absl::string_view word = MarkAt(lower, i); !word.empty()) add(word);
      }
      ++i;
      continue;
    }
    // A run, and the runs joined to it one joiner at a time.
    size_t run_end = i;
    while (run_end < lower.size() && IsTermChar(lower[run_end])) ++run_end;
    size_t compound_end = run_end;
    while (compound_end + 1 < lower.size() && IsJoiner(lower[compound_end]) &&
           IsTermChar(lower[compound_end + 1])) {
      compound_end += 1;
      while (compound_end < lower.size() && IsTermChar(lower[compound_end])) ++compound_end;
    }
    if (compound_end > run_end) {
      add(absl::string_view(lower).substr(i, compound_end - i));
      // Its parts.
      size_t p = i;
      while (p < compound_end) {
        size_t q = p;
        while (q < compound_end && IsTermChar(lower[q])) ++q;
        add_run(p, q, /*part=*/true);
        p = q + 1;
      }
      i = compound_end;
    } else {
      add_run(i, run_end, /*part=*/false);
      i = run_end;
    }
  }
  return out;
}

std::vector<std::pair<size_t, absl::string_view>> TextLines(absl::string_view text) {
  std::vector<std::pair<size_t, absl::string_view>> lines;
  for (size_t pos = 0; pos <= text.size();) {
    size_t end = text.find('\n', pos);
    if (end == absl::string_view::npos) end = text.size();
    lines.emplace_back(pos, text.substr(pos, end - pos));
    pos = end + 1;
  }
  return lines;
}

std::vector<std::pair<size_t, absl::string_view>> LinePieces(absl::string_view line) {
  std::vector<std::pair<size_t, absl::string_view>> out;
  size_t at = 0;
  while (line.size() - at > kMaxPassageBytes) {
    absl::string_view rest = line.substr(at, kMaxPassageBytes);
    size_t cut = rest.rfind(". ");
    if (cut == absl::string_view::npos || cut < kMaxPassageBytes / 2) cut = rest.rfind(' ');
    if (cut == absl::string_view::npos || cut < kMaxPassageBytes / 2) {
      cut = Utf8Floor(line.substr(at), kMaxPassageBytes);
      if (cut == 0) cut = Utf8Ceil(line.substr(at), 1);
    } else {
      cut += 1;
    }
    out.emplace_back(at, line.substr(at, cut));
    at += cut;
  }
  if (at < line.size()) out.emplace_back(at, line.substr(at));
  return out;
}

ItemPieces SplitIntoPieces(absl::string_view text, bool whole_text) {
  ItemPieces out;
  absl::flat_hash_map<std::string, uint32_t> id_of;
  auto id = [&](std::string term) {
    auto [it, added] = id_of.try_emplace(std::move(term), static_cast<uint32_t>(out.terms.size()));
    if (added) {
      out.bytes += it->first.size() + sizeof(std::string);
      out.terms.push_back(it->first);
    }
    return it->second;
  };
  if (whole_text) {
    for (std::string& term : SearchTerms(text)) id(std::move(term));
    out.whole = out.terms.size();
  }
  const auto lines = TextLines(text);
  for (size_t li = 0; li < lines.size(); ++li) {
    if (absl::StripAsciiWhitespace(lines[li].second).empty()) continue;
    for (const auto& [offset, piece] : LinePieces(lines[li].second)) {
      ItemPieces::Piece p;
      p.line = static_cast<uint32_t>(li);
      p.offset = static_cast<uint32_t>(offset);
      p.size = static_cast<uint32_t>(piece.size());
      p.from = static_cast<uint32_t>(out.ids.size());
      for (std::string& term : SearchTerms(piece)) {
        p.value = p.value || IsValueTerm(term);
        p.length += TermLength(term);
        out.ids.push_back(id(std::move(term)));
      }
      p.to = static_cast<uint32_t>(out.ids.size());
      out.pieces.push_back(p);
    }
  }
  out.sorted.resize(out.terms.size());
  for (uint32_t i = 0; i < out.sorted.size(); ++i) out.sorted[i] = i;
  std::sort(out.sorted.begin(), out.sorted.end(),
            [&](uint32_t a, uint32_t b) { return out.terms[a] < out.terms[b]; });
  out.bytes += sizeof(ItemPieces) + out.pieces.size() * sizeof(ItemPieces::Piece) +
               (out.ids.size() + out.sorted.size()) * sizeof(uint32_t);
  return out;
}

int64_t ItemPieces::IdOf(absl::string_view term) const {
  auto it = std::lower_bound(sorted.begin(), sorted.end(), term,
                             [&](uint32_t id, absl::string_view t) { return terms[id] < t; });
  return it != sorted.end() && terms[*it] == term ? static_cast<int64_t>(*it) : -1;
}

bool IsValueTerm(absl::string_view t) {
  if (t.size() < 3) return false;
  for (char c : t) {
    if ((c >= '0' && c <= '9') || c == '-' || c == '.' || c == '/' || c == ':' || c == '_' ||
        c == '@') {
      return true;
    }
  }
  return false;
}

double TermLength(absl::string_view t) {
  for (char c : t) {
    if ((c < '0' || c > '9') && c != '.' && c != ',') return 1.0;
  }
  return 0.5;
}

std::vector<std::string> SurfaceProbes(absl::string_view term) {
  // Each form an abbreviation is spelled out to, and the abbreviations that
  // stand for it.
  static const auto* const kSpelledOut = [] {
    auto* forms = new absl::flat_hash_map<std::string, std::vector<std::string>>();
    for (size_t i = 0; i < kAbbreviationCount; ++i) {
      for (const std::string& form : WordForms(kAbbreviations[i].abbreviation)) {
        (*forms)[form].push_back(kAbbreviations[i].abbreviation);
      }
    }
    return forms;
  }();
  std::vector<std::string> probes;
  if (term.empty()) return probes;
  // A stem keeps its word's beginning; what it writes at its end may not
  // be in the word: an "e" ("hoping" is "hope", "relational" "relate"), an
  // "i" for a "y" ("happy" is "happi", "dying" "die"), the "l" of "bl"
  // ("possibility" is "possibl"). A word shorter than three letters, or
  // with a digit or a joiner, is kept as written.
  const bool as_written = term.size() < 3 || !std::all_of(term.begin(), term.end(), [](char c) {
    return c >= 'a' && c <= 'z';
  });
  absl::string_view kept = term;
  if (!as_written) {
    if (absl::EndsWith(kept, "e")) kept.remove_suffix(1);
    if (absl::EndsWith(kept, "i") || absl::EndsWith(kept, "y")) {
      kept.remove_suffix(1);
    } else if (absl::EndsWith(kept, "bl")) {
      kept.remove_suffix(1);
    }
    if (kept.empty()) kept = term.substr(0, 1);
  }
  probes.emplace_back(kept);
  // A test runner's marks hold the words they stand for (SearchTerms).
  if (term == "fail") {
    for (absl::string_view mark : kFailMarks) probes.emplace_back(mark);
    probes.emplace_back(kFailureTitle);
  } else if (term == "pass") {
    for (absl::string_view mark : kPassMarks) probes.emplace_back(mark);
  }
  if (auto it = kSpelledOut->find(term); it != kSpelledOut->end()) {
    for (const std::string& abbreviation : it->second) probes.push_back(abbreviation);
  }
  return probes;
}

int64_t SearchedThrough(const HistorySearch& search, const Conversation& conversation) {
  return search.compacted_only
             ? std::max(conversation.summarized_through, conversation.prune_boundary)
             : conversation.last_sequence;
}

int64_t OverridesBytes(const ProfileOverrides& overrides) {
  if (!overrides.policy.has_value()) return 0;
  const CompactionPolicy& p = *overrides.policy;
  int64_t n = static_cast<int64_t>(p.instructions.size());
  for (const KeepRule& rule : p.keep) {
    n += static_cast<int64_t>(rule.pattern.size()) + 16;
    for (const std::string& tool : rule.tool_names) n += static_cast<int64_t>(tool.size());
  }
  return n;
}

double TermWeight(int64_t items, int64_t df) {
  // PostgresStorage's search_history computes the same in SQL.
  return std::log(1.0 + (static_cast<double>(items) - static_cast<double>(df) + 0.5) /
                            (static_cast<double>(df) + 0.5));
}

int64_t MaxDocumentFrequency(const HistorySearch& search, int64_t items) {
  if (search.max_document_frequency > 0) return search.max_document_frequency;
  return std::max<int64_t>(20, std::min<int64_t>(items / 5, 400));
}

}  // namespace convstate
