// What the ledger costs on the read path: AssembleView (run several times
// by every BuildContext) for a conversation with summary chunks and their
// facts, against the same view with no facts, in one run.
//
//   bazel run //services/compaction:context_view_benchmark

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "services/compaction/view/context_view.h"
#include "services/compaction/ledger/ledger.h"

namespace convstate {
namespace {

// `chunks` active chunks of `facts` facts each (about 25 tokens a line),
// then 100 live items of about 200 tokens.
ContextSnapshot Snapshot(int chunks, int facts) {
  ContextSnapshot s;
  int64_t seq = 0;
  for (int c = 0; c < chunks; ++c) {
    SummaryChunk chunk;
    chunk.chunk_id = c + 1;
    chunk.from_sequence = seq + 1;
    chunk.text = std::string(1200, 's');
    chunk.token_count = 300;
    for (int f = 0; f < facts; ++f) {
      ++seq;
      chunk.facts.push_back(LedgerFact{
          seq, seq, f % 2 ? Role::kUser : Role::kAssistant,
          absl::StrCat("Host web-", seq, " in eu-west-", f % 3, " answered in ", 100 + f,
                       " ms after the deploy of v2.", f, " by Priya Raman."),
          25});
      // As extraction leaves them.
      chunk.facts.back().token_hashes = FactTokenHashes(chunk.facts.back().text);
    }
    chunk.through_sequence = seq;
    s.active_chunks.push_back(chunk);
  }
  s.conversation.summarized_through = seq;
  for (int i = 0; i < 100; ++i) {
    Item item;
    item.sequence = ++seq;
    item.data.role = i % 2 ? Role::kAssistant : Role::kUser;
    item.data.content = absl::StrCat("Checked node-", i, " at 12:", i % 60,
                                     " and it is fine. ", std::string(700, 'x'));
    item.data.token_count = 200;
    s.live_items.push_back(item);
  }
  s.conversation.last_sequence = seq;
  return s;
}

void Assemble(benchmark::State& state) {
  const ContextSnapshot snapshot = Snapshot(6, static_cast<int>(state.range(0)));
  ModelProfile profile;
  profile.context_window = 32768;
  auto tokenizer = NewApproximateTokenizer();
  ViewOptions options;
  options.tokenizer = tokenizer.get();
  int64_t omitted = 0;
  for (auto _ : state) {
    const ContextView view = AssembleView(snapshot, profile, false, {}, options);
    omitted = view.ledger_facts_omitted;
    benchmark::DoNotOptimize(view.tokens.total);
  }
  state.counters["facts_omitted"] = static_cast<double>(omitted);
}
// Facts per chunk, six chunks, a 32k window (a 6,553-token ledger). 0: the
// baseline. 40: they fit. 100: 600 facts, about what folds (which keep
// twice the ledger's budget) let accumulate at this window; the selection
// ranks them and reads the live items' ids. 400: far past that bound.
BENCHMARK(Assemble)->Arg(0)->Arg(40)->Arg(100)->Arg(400);

}  // namespace
}  // namespace convstate

BENCHMARK_MAIN();
