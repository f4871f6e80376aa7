// What recall costs a replica that holds a copy of the history
// (history_cache.h), by part, on tools/replay_data's platform programme
// (tool outputs of 300 to 2,500 tokens whose lines do not name their
// subject): making the copy, bringing it up by one turn, the search, and
// ranking the lines of its candidates, for a history of the programme
// alone (its 488 items) and of 10,000 items that end with it.
//
//   bazel run -c opt //services/api:recall_benchmark --
//     $PWD/tools/replay_data/platform.jsonl $PWD/tools/replay_data/platform_facts.jsonl
//     $PWD/tools/replay_data/platform_probes.jsonl
// (one command line).

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "services/compaction/recall/recall.h"
#include "services/tokenizer/bpe_tokenizer.h"
#include "services/tokenizer/tokens.h"
#include "storage/history_index.h"
#include "tools/replay_lib.h"

namespace convstate {
namespace {

replay::Conversation* g_conversation = nullptr;
std::vector<std::string>* g_questions = nullptr;
const Tokenizer* g_tokenizer = nullptr;

// Every word of `text` with `salt` appended: the programme's text, as
// another conversation's would be, with words of its own.
std::string Salted(const std::string& text, int salt) {
  if (salt == 0) return text;
  const std::string suffix = absl::StrCat("q", salt);
  std::string out;
  out.reserve(text.size() + text.size() / 4);
  for (size_t i = 0; i < text.size(); ++i) {
    out += text[i];
    const bool word = absl::ascii_isalnum(static_cast<unsigned char>(text[i]));
    const bool ends = i + 1 == text.size() || !absl::ascii_isalnum(static_cast<unsigned char>(text[i + 1]));
    if (word && ends) out += suffix;
  }
  return out;
}

// A history of `count` items that ends with the programme: before it, the
// programme's items again with words of their own (Salted), so that the
// question's words are as rare as in the programme alone while the index
// grows to `count` items.
std::vector<Item> History(int64_t count) {
  std::vector<Item> items;
  const std::vector<replay::ReplayItem>& source = g_conversation->items;
  const int64_t n = static_cast<int64_t>(source.size());
  int64_t turn_base = 0;
  for (int64_t k = 0; k < count; ++k) {
    const int64_t from_end = count - k;  // The last n items are the programme.
    const int salt = from_end <= n ? 0 : static_cast<int>((from_end - 1) / n);
    const replay::ReplayItem& r = source[static_cast<size_t>((n - from_end % n) % n)];
    if (k > 0 && r.turn < items.back().turn_index - turn_base) turn_base = items.back().turn_index;
    Item item = replay::StoredItem(r, k + 1);
    item.turn_index = turn_base + r.turn;
    item.data.content = Salted(r.content, salt);
    item.data.tool_call_id = absl::StrCat(r.call_id, salt);
    items.push_back(std::move(item));
  }
  return items;
}

std::unique_ptr<HistoryIndex> IndexOf(const std::vector<Item>& items) {
  auto index = std::make_unique<HistoryIndex>();
  for (const Item& item : items) index->Add(item);
  return index;
}

HistorySearch SearchOf(const RecallQuery& query) {
  HistorySearch search = SearchFor(query);
  search.compacted_only = true;
  search.max_items = kRecallCandidates;
  return search;
}

// Making a replica's copy of the whole history.
void BM_MakeCopy(benchmark::State& state) {
  const std::vector<Item> items = History(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(IndexOf(items));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_MakeCopy)->Arg(488)->Arg(10000)->Unit(benchmark::kMillisecond);

// Bringing the copy up by one turn (the programme's turns average three
// items: question, call, output, answer).
void BM_CatchUpOneTurn(benchmark::State& state) {
  const std::vector<Item> items = History(state.range(0) + 4);
  const std::vector<Item> head(items.begin(), items.end() - 4);
  for (auto _ : state) {
    state.PauseTiming();
    auto index = IndexOf(head);
    state.ResumeTiming();
    for (size_t i = head.size(); i < items.size(); ++i) index->Add(items[i]);
    benchmark::DoNotOptimize(index);
  }
}
BENCHMARK(BM_CatchUpOneTurn)->Arg(488)->Unit(benchmark::kMicrosecond);

// The search of a user's question over the copy (every probe question of
// the file, in turn).
void BM_Search(benchmark::State& state) {
  const std::vector<Item> items = History(state.range(0));
  const auto index = IndexOf(items);
  std::vector<RecallQuery> queries;
  for (const std::string& q : *g_questions) queries.push_back(ParseRecallQuery(q));
  size_t next = 0;
  for (auto _ : state) {
    const RecallQuery& query = queries[next++ % queries.size()];
    benchmark::DoNotOptimize(
        index->Search(SearchOf(query), state.range(0), state.range(0)));
  }
}
BENCHMARK(BM_Search)->Arg(488)->Arg(10000)->Unit(benchmark::kMicrosecond);

// Ranking the lines of the candidates into the section: 2,000 tokens (a
// 32k window's), and the few tokens left in a view near its hard band (an
// 8k window's, often).
void BM_Rank(benchmark::State& state) {
  const std::vector<Item> items = History(state.range(0));
  const auto index = IndexOf(items);
  const Tokenizer* tokenizer = g_tokenizer;
  std::vector<std::pair<RecallQuery, HistoryHits>> searched;
  for (const std::string& q : *g_questions) {
    RecallQuery query = ParseRecallQuery(q);
    HistoryHits hits = index->Search(SearchOf(query), state.range(0), state.range(0));
    searched.emplace_back(std::move(query), std::move(hits));
  }
  RecallLimits limits;
  limits.max_tokens = state.range(1);
  size_t next = 0;
  for (auto _ : state) {
    const auto& [query, hits] = searched[next++ % searched.size()];
    benchmark::DoNotOptimize(RankPassages(query, hits, *tokenizer, limits));
  }
}
BENCHMARK(BM_Rank)
    ->Args({488, 2000})
    ->Args({488, 60})
    ->Args({10000, 2000})
    ->Args({10000, 60})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace convstate

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (argc != 4) {
    std::fprintf(stderr, "usage: recall_benchmark CONVERSATION.jsonl FACTS.jsonl PROBES.jsonl\n");
    return 2;
  }
  auto loaded = convstate::replay::Load(argv[1], argv[2], argv[3]);
  if (!loaded.ok()) {
    std::fprintf(stderr, "%s\n", std::string(loaded.status().message()).c_str());
    return 1;
  }
  static convstate::replay::Conversation conversation = *std::move(loaded);
  static std::vector<std::string> questions;
  // The user's message at each recall probe's turn.
  for (const convstate::replay::Probe& p : conversation.probes) {
    if (p.kind != "recall") continue;
    for (const convstate::replay::ReplayItem& item : conversation.items) {
      if (item.turn == p.turn && item.role == "user") {
        questions.push_back(item.content);
        break;
      }
    }
  }
  if (questions.empty()) {
    std::fprintf(stderr, "no recall questions in %s\n", argv[3]);
    return 1;
  }
  convstate::g_conversation = &conversation;
  convstate::g_questions = &questions;
  // The tokenizer views are counted with (cl100k_base from
  // CONVSTATE_VOCAB_DIR), else the approximate one.
  static std::unique_ptr<convstate::Tokenizer> tokenizer;
  if (const char* vocab = std::getenv("CONVSTATE_VOCAB_DIR"); vocab != nullptr && *vocab) {
    auto bpe = convstate::BpeTokenizer::LoadFile("cl100k_base",
                                                 absl::StrCat(vocab, "/cl100k_base.tiktoken"));
    if (!bpe.ok()) {
      std::fprintf(stderr, "%s\n", bpe.status().ToString().c_str());
      return 1;
    }
    tokenizer = *std::move(bpe);
    std::fprintf(stderr, "ranking counts with cl100k_base\n");
  } else {
    tokenizer = convstate::NewApproximateTokenizer();
    std::fprintf(stderr, "ranking counts with the approximate tokenizer (no CONVSTATE_VOCAB_DIR)\n");
  }
  convstate::g_tokenizer = tokenizer.get();
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
