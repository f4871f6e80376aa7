// Replays a conversation file through a running convstate server at one or
// more context windows and prints what the windows kept; see replay_lib.h.
//
//   replay --target=127.0.0.1:50051 --conversation=FILE --facts=FILE
//          [--probes=FILE] [--windows=8192,16384,32768] [--model=gpt-4o]
//          [--reserve_fraction=0.125] [--max_turns=0] [--dump=PREFIX]
//          [--recall_budget=F]   (0: without the RECALLED section)
//          [--recall_off_too]    (each window again without it, timed beside)
//          [--keep]              (leave the conversations stored)
//
// --dump writes each final view to PREFIX.<window>.txt, and the recalled
// section at each recall question to PREFIX.<window>.recall.txt.
//
// The target must be a loopback address: the replay sends a few hundred
// calls per window and nothing else.

#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "tools/replay_lib.h"

int main(int argc, char** argv) {
  using convstate::replay::Options;
  Options base;
  std::string conversation, facts, probes, dump;
  std::vector<int64_t> windows = {8192, 16384, 32768};
  bool recall_off_too = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    bool ok = true;
    if (name == "--target") {
      base.target = value;
    } else if (name == "--conversation") {
      conversation = value;
    } else if (name == "--facts") {
      facts = value;
    } else if (name == "--probes") {
      probes = value;
    } else if (name == "--dump") {
      dump = value;
    } else if (name == "--model") {
      base.model = value;
    } else if (name == "--reserve_fraction") {
      ok = absl::SimpleAtod(value, &base.reserve_fraction) && base.reserve_fraction >= 0 &&
           base.reserve_fraction < 1;
    } else if (name == "--recall_budget") {
      ok = absl::SimpleAtod(value, &base.recall_budget) && base.recall_budget >= 0 &&
           base.recall_budget < 1;
    } else if (name == "--keep") {
      base.keep = true;
    } else if (name == "--recall_off_too") {
      recall_off_too = true;
    } else if (name == "--max_turns") {
      ok = absl::SimpleAtoi(value, &base.max_turns) && base.max_turns >= 0;
    } else if (name == "--windows") {
      windows.clear();
      for (absl::string_view w : absl::StrSplit(value, ',', absl::SkipEmpty())) {
        int64_t n = 0;
        ok = ok && absl::SimpleAtoi(w, &n) && n > 0;
        windows.push_back(n);
      }
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr, "replay: bad argument %s (see the comment at the top of replay_main.cc)\n",
                   arg.c_str());
      return 2;
    }
  }
  if (base.target.empty() || conversation.empty() || facts.empty()) {
    std::fprintf(stderr, "replay: --target, --conversation and --facts are required\n");
    return 2;
  }
  if (!absl::StartsWith(base.target, "127.") && !absl::StartsWith(base.target, "localhost:") &&
      !absl::StartsWith(base.target, "[::1]:")) {
    std::fprintf(stderr, "replay: --target must be a loopback address\n");
    return 2;
  }
  auto conv = convstate::replay::Load(conversation, facts, probes);
  if (!conv.ok()) {
    std::fprintf(stderr, "replay: %s\n", std::string(conv.status().message()).c_str());
    return 1;
  }
  std::vector<convstate::replay::Result> results;
  std::vector<std::string> cost;
  for (int64_t w : windows) {
    Options o = base;
    o.window = w;
    o.conversation_id = absl::StrCat("replay-", w, "-", getpid());
    std::fprintf(stderr, "replay: %d turns at a %lld-token window...\n", conv->turns(),
                 static_cast<long long>(w));
    auto r = convstate::replay::Run(*conv, o);
    if (!r.ok()) {
      std::fprintf(stderr, "replay: %s\n", std::string(r.status().message()).c_str());
      return 1;
    }
    if (!dump.empty()) {
      FILE* f = std::fopen(absl::StrCat(dump, ".", w, ".txt").c_str(), "w");
      if (f != nullptr) {
        std::fputs(r->final_view.c_str(), f);
        std::fclose(f);
      }
      f = std::fopen(absl::StrCat(dump, ".", w, ".recall.txt").c_str(), "w");
      if (f != nullptr) {
        for (const auto& q : r->recalls) {
          std::fprintf(f, "=== turn %d: %d of %d asked-for facts in the view\n%s", q.turn,
                       q.in_view, q.asked, q.recalled_text.c_str());
        }
        std::fclose(f);
      }
    }
    results.push_back(*r);
    if (recall_off_too) {
      // The same window without the RECALLED section, right after: what
      // recall costs a BuildContext, from the same run.
      o.recall_budget = 0;
      o.conversation_id = absl::StrCat("replay-", w, "-off-", getpid());
      auto off = convstate::replay::Run(*conv, o);
      if (!off.ok()) {
        std::fprintf(stderr, "replay: %s\n", std::string(off.status().message()).c_str());
        return 1;
      }
      cost.push_back(absl::StrFormat(
          "window %d: BuildContext with the message pending, recall on p50 %.2f ms, p90 %.2f ms, "
          "p99 %.2f ms; off p50 %.2f ms, p90 %.2f ms, p99 %.2f ms (%d calls each; %d and %d of "
          "them compacted)",
          w, r->BuildPercentile(0.5) / 1000, r->BuildPercentile(0.9) / 1000,
          r->BuildPercentile(0.99) / 1000, off->BuildPercentile(0.5) / 1000,
          off->BuildPercentile(0.9) / 1000, off->BuildPercentile(0.99) / 1000,
          static_cast<int>(r->build_micros.size()), r->builds_compacting,
          off->builds_compacting));
    }
  }
  std::fputs(convstate::replay::Report(results).c_str(), stdout);
  if (!cost.empty()) std::printf("\nrecall's cost, same run:\n  %s\n", absl::StrJoin(cost, "\n  ").c_str());
  // Where the view did worse than FIFO or lost a rule: said, and exit 3.
  int losses = 0;
  for (const auto& r : results) {
    for (const std::string& loss : convstate::replay::LossesToFifo(r)) {
      std::printf("%s%s\n", losses++ == 0 ? "\nworse than FIFO or a rule lost:\n  " : "  ",
                  loss.c_str());
    }
  }
  return losses == 0 ? 0 : 3;
}
