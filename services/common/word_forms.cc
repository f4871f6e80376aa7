#include "services/common/word_forms.h"

#include <libstemmer.h>

#include <memory>

#include "absl/container/flat_hash_map.h"

namespace convstate {

const Abbreviation kAbbreviations[] = {
    {"db", "database"},          {"dbs", "databases"},        {"k8s", "kubernetes"},
    {"kube", "kubernetes"},      {"env", "environment"},      {"envs", "environments"},
    {"config", "configuration"}, {"configs", "configurations"}, {"cfg", "configuration"},
    {"conf", "configuration"},   {"auth", "authentication"},  {"repo", "repository"},
    {"repos", "repositories"},   {"prod", "production"},      {"stg", "staging"},
    {"ns", "namespace"},         {"dep", "dependency"},       {"deps", "dependencies"},
    {"msg", "message"},          {"msgs", "messages"},        {"svc", "service"},
    {"perf", "performance"},     {"infra", "infrastructure"}, {"pwd", "password"},
    {"addr", "address"},         {"dir", "directory"},        {"dirs", "directories"},
    {"tmp", "temporary"},        {"req", "request"},          {"reqs", "requests"},
};
const size_t kAbbreviationCount = sizeof(kAbbreviations) / sizeof(kAbbreviations[0]);

namespace {

const absl::flat_hash_map<absl::string_view, absl::string_view>& AbbreviationMap() {
  static const auto* const kMap = [] {
    auto* m = new absl::flat_hash_map<absl::string_view, absl::string_view>();
    for (size_t i = 0; i < kAbbreviationCount; ++i) {
      (*m)[kAbbreviations[i].abbreviation] = kAbbreviations[i].word;
    }
    return m;
  }();
  return *kMap;
}

struct StemmerDeleter {
  void operator()(sb_stemmer* s) const { sb_stemmer_delete(s); }
};

// A stemmer is not thread-safe: one per thread.
sb_stemmer* Stemmer() {
  thread_local std::unique_ptr<sb_stemmer, StemmerDeleter> stemmer(
      sb_stemmer_new("english", "UTF_8"));
  return stemmer.get();
}

}  // namespace

std::string WordForm(absl::string_view word, bool spell_out) {
  const auto& abbreviations = AbbreviationMap();
  if (auto it = abbreviations.find(word); spell_out && it != abbreviations.end()) {
    word = it->second;
  }
  for (char c : word) {
    if (c >= '0' && c <= '9') return std::string(word);
  }
  if (word.size() < 3) return std::string(word);
  sb_stemmer* stemmer = Stemmer();
  if (stemmer == nullptr) return std::string(word);  // Out of memory: the word as written.
  const sb_symbol* stem = sb_stemmer_stem(
      stemmer, reinterpret_cast<const sb_symbol*>(word.data()), static_cast<int>(word.size()));
  if (stem == nullptr) return std::string(word);
  return std::string(reinterpret_cast<const char*>(stem),
                     static_cast<size_t>(sb_stemmer_length(stemmer)));
}

}  // namespace convstate
