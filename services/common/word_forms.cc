#include "services/common/word_forms.h"

#include <libstemmer.h>

#include <memory>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_split.h"

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
    {"mq", "message queue"},     {"idp", "identity provider"}, {"sso", "single sign on"},
    {"lb", "load balancer"},     {"vm", "virtual machine"},   {"vms", "virtual machines"},
    {"pr", "pull request"},      {"prs", "pull requests"},    {"rps", "requests per second"},
    {"qps", "queries per second"}, {"ci", "continuous integration"},
    {"etl", "extract transform load"},
    {"subs", "subscriptions"},   {"recon", "reconciliation"}, {"txn", "transaction"},
    {"txns", "transactions"},    {"impl", "implementation"},  {"fn", "function"},
    {"args", "arguments"},       {"params", "parameters"},    {"mgmt", "management"},
    {"acct", "account"},         {"accts", "accounts"},       {"amt", "amount"},
    // Units and verbs as people shorten them in questions ("the exec timeout,
    // in mins") and as settings' names end ("timeout_ms", "ttl_secs").
    {"ms", "milliseconds"},      {"secs", "seconds"},         {"mins", "minutes"},
    {"hrs", "hours"},            {"exec", "execution"},       {"avg", "average"},
    {"num", "number"},           {"mem", "memory"},           {"bw", "bandwidth"},
    {"rtt", "round trip time"},
    // Training and evaluation, as ML engineers shorten them.
    {"grad", "gradient"},        {"grads", "gradients"},      {"accum", "accumulation"},
    {"ckpt", "checkpoint"},      {"ckpts", "checkpoints"},    {"eval", "evaluation"},
    {"evals", "evaluations"},    {"seq", "sequence"},         {"seqs", "sequences"},
    {"tok", "token"},            {"toks", "tokens"},          {"ctx", "context"},
    {"alloc", "allocation"},
    // Names in code and settings, as programmers shorten them.
    {"conn", "connection"},      {"conns", "connections"},    {"src", "source"},
    {"dst", "destination"},      {"dest", "destination"},     {"pkg", "package"},
    {"pkgs", "packages"},        {"ver", "version"},          {"img", "image"},
    {"mgr", "manager"},          {"err", "error"},            {"errs", "errors"},
    {"cnt", "count"},            {"qty", "quantity"},         {"pct", "percent"},
    {"doc", "document"},         {"docs", "documents"},       {"rev", "revision"},
    {"revs", "revisions"},       {"notif", "notification"},   {"notifs", "notifications"},
    {"promo", "promotion"},      {"promos", "promotions"},    {"em", "exact match"},
    // Words of one family the stemmer leaves apart ("expiry" is "expiri",
    // "expiration" and "expire" are "expir").
    {"expiry", "expire"},        {"expiries", "expire"},
    // Kubernetes objects, as operators name them.
    {"hpa", "horizontal pod autoscaler"}, {"pdb", "pod disruption budget"},
    {"pvc", "persistent volume claim"},
    // Databases, queues and operations, as operators shorten them.
    {"wal", "write ahead log"},  {"oom", "out of memory"},    {"dlq", "dead letter queue"},
    {"rpo", "recovery point objective"}, {"rto", "recovery time objective"},
    {"cdc", "change data capture"}, {"tps", "transactions per second"},
    {"fk", "foreign key"},       {"pk", "primary key"},       {"idx", "index"},
    {"tbl", "table"},            {"col", "column"},           {"cols", "columns"},
    {"stats", "statistics"},     {"gc", "garbage collection"}, {"acl", "access control list"},
    {"az", "availability zone"}, {"util", "utilization"},     {"sched", "schedule"},
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

namespace {

// Words of one thread already stemmed: a conversation's vocabulary repeats,
// so most words are looked up, not stemmed again. Emptied when full.
constexpr size_t kMaxRemembered = 1 << 14;

// What `word` stems to: a reference into this thread's words already
// stemmed (valid until the next call), or `word` itself when it cannot be
// stemmed.
absl::string_view Stem(absl::string_view word) {
  thread_local absl::flat_hash_map<std::string, std::string> remembered;
  if (auto it = remembered.find(word); it != remembered.end()) return it->second;
  sb_stemmer* stemmer = Stemmer();
  if (stemmer == nullptr) return word;  // Out of memory: the word as written.
  const sb_symbol* stem = sb_stemmer_stem(
      stemmer, reinterpret_cast<const sb_symbol*>(word.data()), static_cast<int>(word.size()));
  if (stem == nullptr) return word;
  std::string out(reinterpret_cast<const char*>(stem),
                  static_cast<size_t>(sb_stemmer_length(stemmer)));
  if (remembered.size() >= kMaxRemembered) remembered.clear();
  return remembered.emplace(word, std::move(out)).first->second;
}

// The form of a word already spelled out (valid as Stem's is).
absl::string_view FormOf(absl::string_view word) {
  if (word.size() < 3) return word;
  for (char c : word) {
    if (c >= '0' && c <= '9') return word;
  }
  return Stem(word);
}

}  // namespace

bool IsAbbreviation(absl::string_view word) { return AbbreviationMap().contains(word); }

void ForEachWordForm(absl::string_view word, bool spell_out,
                     absl::FunctionRef<void(absl::string_view)> fn) {
  if (spell_out) {
    const auto& abbreviations = AbbreviationMap();
    if (auto it = abbreviations.find(word); it != abbreviations.end()) {
      for (absl::string_view part : absl::StrSplit(it->second, ' ')) fn(FormOf(part));
      return;
    }
  }
  fn(FormOf(word));
}

std::string WordForm(absl::string_view word, bool spell_out) {
  if (spell_out) {
    const auto& abbreviations = AbbreviationMap();
    if (auto it = abbreviations.find(word); it != abbreviations.end()) word = it->second;
  }
  return std::string(FormOf(word));
}

std::vector<std::string> WordForms(absl::string_view word, bool spell_out) {
  std::vector<std::string> forms;
  ForEachWordForm(word, spell_out, [&](absl::string_view form) { forms.emplace_back(form); });
  return forms;
}

}  // namespace convstate
