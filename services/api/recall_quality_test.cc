// Recall on conversations that look like real work, through the service on
// memory storage: tools/replay_data's platform programme (tool outputs
// whose lines do not name their subject, questions in other words than the
// stored text), asked at the turns its probe files give, after everything
// older than the recent turns was summarized. Holds the asked-for facts in
// the RECALLED section for at least 9 of the 14 facts the tuning questions
// ask for (the aim is 80%), and reports the held-out
// questions (measured only, never tuned with); an unrelated question
// recalls nothing.

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "services/api/conversation_service.h"
#include "services/compaction/summarizers/extractive.h"
#include "storage/memory_storage.h"
#include "tools/replay_lib.h"

namespace convstate {
namespace {

constexpr char kProfiles[] = R"pb(
  default_profile: "default"
  profiles {
    name: "default"
    context_window: 128000
    output_reserve: 4096
    tokenizer { encoding: "approximate" bytes_per_token: 4.0 }
  }
)pb";

struct Score {
  int asked = 0;
  int found = 0;
  int unrelated_tokens = 0;
};

v1::NewItem ToNew(const replay::ReplayItem& item) {
  v1::NewItem out;
  out.set_role(item.role == "user" ? v1::ROLE_USER
               : item.role == "tool" ? v1::ROLE_TOOL
                                     : v1::ROLE_ASSISTANT);
  out.set_kind(item.kind == "tool_call"     ? v1::ITEM_KIND_TOOL_CALL
               : item.kind == "tool_result" ? v1::ITEM_KIND_TOOL_RESULT
                                            : v1::ITEM_KIND_MESSAGE);
  out.set_content(item.content);
  out.set_tool_name(item.tool_name);
  out.set_tool_call_id(item.call_id);
  return out;
}

// Replays `conv` into a fresh conversation of `window` tokens; before each
// recall probe, summarizes all but the recent turns and asks the probe's
// question as pending input.
Score Measure(const replay::Conversation& conv, int64_t window, const std::string& label) {
  Score score;
  auto models = ModelRegistry::FromText(kProfiles, "");
  EXPECT_TRUE(models.ok());
  std::unique_ptr<Storage> storage = NewMemoryStorage();
  std::unique_ptr<Summarizer> summarizer = NewExtractiveSummarizer();
  ConversationService::Options options;
  options.background_compaction = false;
  ConversationService service(options, models->get(), storage.get(), summarizer.get());
  const CallContext ctx{};
  v1::CreateConversationRequest create;
  create.set_conversation_id("p");
  create.set_model("default");
  create.set_system_prompt(conv.system_prompt);
  create.mutable_profile_overrides()->set_context_window(window);
  create.mutable_profile_overrides()->set_output_reserve(window / 8);
  EXPECT_TRUE(service.CreateConversation(ctx, create).ok());
  size_t next = 0;
  for (const replay::Probe& probe : conv.probes) {
    if (probe.kind != "recall") continue;
    // Turn by turn, as a gateway appends them.
    while (next < conv.items.size() && conv.items[next].turn < probe.turn) {
      v1::AppendTurnRequest append;
      append.set_conversation_id("p");
      const int turn = conv.items[next].turn;
      while (next < conv.items.size() && conv.items[next].turn == turn) {
        *append.add_items() = ToNew(conv.items[next++]);
      }
      const auto appended = service.AppendTurn(ctx, append);
      EXPECT_TRUE(appended.ok()) << appended.status();
    }
    v1::CompactRequest compact;
    compact.set_conversation_id("p");
    compact.set_mode(v1::CompactRequest::MODE_SUMMARIZE);
    (void)service.Compact(ctx, compact);  // Nothing new to summarize is no failure here.
    size_t question = next;
    while (question < conv.items.size() && conv.items[question].role != "user") ++question;
    v1::BuildContextRequest build;
    build.set_conversation_id("p");
    *build.add_pending_input() = ToNew(conv.items[question]);
    auto view = service.BuildContext(ctx, build);
    EXPECT_TRUE(view.ok()) << view.status();
    if (!view.ok()) continue;
    std::string recalled;
    for (const v1::ContextEntry& e : view->entries()) {
      if (e.section() == v1::SECTION_RECALLED) recalled = e.content();
    }
    const int found = replay::FactsIn(conv.facts, probe.fact_ids, recalled);
    score.asked += static_cast<int>(probe.fact_ids.size());
    score.found += found;
    if (probe.fact_ids.empty()) score.unrelated_tokens += static_cast<int>(view->tokens().recalled());
    std::printf("%s %ld turn %d: %d of %zu (%ld tokens) %s\n", label.c_str(),
                static_cast<long>(window), probe.turn, found, probe.fact_ids.size(),
                static_cast<long>(view->tokens().recalled()),
                conv.items[question].content.substr(0, 90).c_str());
    // RECALL_DEBUG=1: what was recalled where a fact was missed.
    if ((found < static_cast<int>(probe.fact_ids.size()) || probe.fact_ids.empty()) &&
        std::getenv("RECALL_DEBUG") != nullptr) {
      std::printf("%s\n", recalled.c_str());
    }
  }
  return score;
}

std::string RunfilePath(const std::string& runfile) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  return absl::StrCat(srcdir ? srcdir : ".", "/", workspace ? workspace : "convstate", "/",
                      runfile);
}

replay::Conversation Load(const std::string& probes, const std::string& name = "platform") {
  auto conv = replay::Load(RunfilePath(absl::StrCat("tools/replay_data/", name, ".jsonl")),
                           RunfilePath(absl::StrCat("tools/replay_data/", name, "_facts.jsonl")),
                           RunfilePath(probes));
  EXPECT_TRUE(conv.ok()) << conv.status();
  return conv.ok() ? *std::move(conv) : replay::Conversation{};
}

TEST(RecallQualityTest, FindsWhatTheUserMeansOnAConversationLikeRealWork) {
  const replay::Conversation tuning = Load("tools/replay_data/platform_probes.jsonl");
  const replay::Conversation held_out = Load("tools/replay_data/platform_heldout_probes.jsonl");
  ASSERT_GE(tuning.turns(), 120);
  for (int64_t window : {8192, 16384, 32768}) {
    const Score t = Measure(tuning, window, "tuning");
    const Score h = Measure(held_out, window, "held-out");
    std::printf("window %ld: tuning %d of %d, held-out %d of %d\n", static_cast<long>(window),
                t.found, t.asked, h.found, h.asked);
    // The aim is 80%; what the ranking reaches here today (9 or 10 of 14;
    // 12 or 13 through a real server, BENCHMARKS.md), held so that it does
    // not fall back.
    EXPECT_GE(t.found, 9) << "window " << window << ": " << t.found << " of " << t.asked;
    EXPECT_EQ(t.unrelated_tokens, 0) << "an unrelated question recalled something";
    EXPECT_EQ(h.unrelated_tokens, 0) << "an unrelated question recalled something";
  }
}

// A coding session (file reads, test runs, git logs, deployment configs):
// the value's line names a constant, a test or a hash; which module it
// belongs to, only the call's path and the user's message say. Held-out
// questions measured, never tuned with.
TEST(RecallQualityTest, FindsWhatTheDeveloperMeansInACodingSession) {
  const replay::Conversation tuning = Load("tools/replay_data/coding_probes.jsonl", "coding");
  const replay::Conversation held_out =
      Load("tools/replay_data/coding_heldout_probes.jsonl", "coding");
  ASSERT_GE(tuning.turns(), 120);
  for (int64_t window : {8192, 16384, 32768}) {
    const Score t = Measure(tuning, window, "coding tuning");
    const Score h = Measure(held_out, window, "coding held-out");
    std::printf("window %ld: coding tuning %d of %d, held-out %d of %d\n",
                static_cast<long>(window), t.found, t.asked, h.found, h.asked);
    // The aim is 80%; what the ranking reaches today (7 of 11), held so
    // that it does not fall back.
    EXPECT_GE(t.found, 7) << "window " << window << ": " << t.found << " of " << t.asked;
    EXPECT_EQ(t.unrelated_tokens, 0) << "an unrelated question recalled something";
    EXPECT_EQ(h.unrelated_tokens, 0) << "an unrelated question recalled something";
  }
}

}  // namespace
}  // namespace convstate
