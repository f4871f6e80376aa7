// What a gateway relies on beyond the view itself, through the real server
// and PostgreSQL: compaction switched off per conversation, prompt-cache
// breakpoints whose prefixes stay byte-identical between compactions, a
// view hash a client can recompute from the entries, and the breakdown by
// section before and after each compaction step.

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "convstate/v1/convstate.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "services/common/sha256.h"
#include "tests/e2e_harness.h"
#include "tools/rpc/rpc_helpers.h"
#include "tests/server_process.h"
#include "tests/test_profiles.h"

namespace convstate {
namespace {

using rpc::MakeItem;
using testing::ScratchDatabase;
using testing::ServerProcess;
using rpc::SetDeadline;
using v1::ConversationState;

void AppendInt(int64_t v, std::string* out) {
  for (int shift = 56; shift >= 0; shift -= 8) {
    out->push_back(static_cast<char>((static_cast<uint64_t>(v) >> shift) & 0xff));
  }
}

// The view_hash encoding as the API documents it, written from the
// documentation: what a gateway would write to check a view.
std::string HashOf(const v1::BuildContextResponse& view, int through) {
  Sha256 hash;
  for (int i = 0; i <= through; ++i) {
    const v1::ContextEntry& e = view.entries(i);
    std::string bytes;
    for (int64_t v : {static_cast<int64_t>(e.section()), static_cast<int64_t>(e.role()),
                      static_cast<int64_t>(e.kind()), e.sequence(), e.summary_chunk_id(),
                      static_cast<int64_t>(e.pruned())}) {
      AppendInt(v, &bytes);
    }
    for (const std::string* text : {&e.content(), &e.tool_name(), &e.tool_call_id()}) {
      AppendInt(static_cast<int64_t>(text->size()), &bytes);
      bytes += *text;
    }
    hash.Update(bytes);
  }
  return hash.HexDigest();
}

class GatewayE2eTest : public testing::E2eTest {
 protected:
  void SetUp() override {
    E2eTest::SetUp();
    StartServer({"--model_profiles=" + testing::WriteTinyProfiles(), "--otel_disabled",
                 "--background_compaction=false"});
  }

  grpc::Status Create(const std::string& id, const v1::ProfileOverrides& overrides,
                      v1::Conversation* out) {
    v1::CreateConversationRequest req;
    req.set_conversation_id(id);
    req.set_model("tiny-1");
    req.set_system_prompt("You are an on-call assistant. Cite commands exactly.");
    req.set_pinned_instructions("Never restart production without asking.");
    *req.mutable_profile_overrides() = overrides;
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    return stub_->CreateConversation(&ctx, req, out);
  }

  grpc::Status Append(const std::string& id, int n) {
    v1::AppendTurnRequest req;
    req.set_conversation_id(id);
    const std::string call = absl::StrCat("call_", n);
    std::string output;
    for (int i = 0; i < 12; ++i) {
      absl::StrAppend(&output, "2026-11-22T03:", 10 + i, ":00Z worker-", i % 5, " batch ", n * 100 + i,
                      " done in ", 100 + i * 7, " ms\n");
    }
    *req.add_items() = MakeItem(v1::ROLE_USER, v1::ITEM_KIND_MESSAGE,
                                absl::StrCat("[turn ", n, "] Why is api-", n, " slow on port ",
                                             8000 + n, "?"));
    *req.add_items() =
        MakeItem(v1::ROLE_ASSISTANT, v1::ITEM_KIND_TOOL_CALL, R"({"cmd": "kubectl logs api"})",
                 "kubectl", call);
    *req.add_items() = MakeItem(v1::ROLE_TOOL, v1::ITEM_KIND_TOOL_RESULT, output, "kubectl", call);
    *req.add_items() = MakeItem(v1::ROLE_ASSISTANT, v1::ITEM_KIND_MESSAGE,
                                absl::StrCat("api-", n, " waits on db-", n, "; we decided to add "
                                             "an index and roll back release 1.", n, "."));
    v1::AppendTurnResponse out;
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    return stub_->AppendTurn(&ctx, req, &out);
  }

  grpc::Status Build(const std::string& id, v1::BuildContextResponse* view,
                     std::vector<v1::CompactionCompleted>* steps = nullptr) {
    v1::BuildContextRequest req;
    req.set_conversation_id(id);
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    auto reader = stub_->StreamBuildContext(&ctx, req);
    v1::BuildContextEvent event;
    while (reader->Read(&event)) {
      if (event.has_compaction_completed() && steps != nullptr) {
        steps->push_back(event.compaction_completed());
      }
      if (event.has_context()) *view = event.context();
    }
    return reader->Finish();
  }
};

TEST_F(GatewayE2eTest, CompactionSwitchedOffKeepsTheViewFullThenRefusesItWithTheTotals) {
  v1::ProfileOverrides off;
  off.set_compaction_enabled(false);
  v1::Conversation created;
  ASSERT_TRUE(Create("off", off, &created).ok());
  ASSERT_TRUE(created.profile_overrides().has_compaction_enabled());
  EXPECT_FALSE(created.profile_overrides().compaction_enabled());

  grpc::Status status;
  int turns = 0;
  for (; turns < 60; ++turns) {
    ASSERT_TRUE(Append("off", turns).ok());
    v1::BuildContextResponse view;
    status = Build("off", &view);
    if (!status.ok()) break;
    EXPECT_EQ(view.context_status(), v1::CONTEXT_STATUS_FULL) << "turn " << turns;
    EXPECT_LE(view.tokens().total(), view.tokens().context_window());
  }
  ASSERT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  EXPECT_NE(status.error_message().find("window is 4096"), std::string::npos)
      << status.error_message();
  EXPECT_NE(status.error_message().find("compaction is switched off"), std::string::npos);

  // Nothing was summarized or pruned, and Compact is refused.
  v1::ListSummariesRequest list;
  list.set_conversation_id("off");
  list.set_include_superseded(true);
  v1::ListSummariesResponse chunks;
  grpc::ClientContext lctx;
  SetDeadline(lctx);
  ASSERT_TRUE(stub_->ListSummaries(&lctx, list, &chunks).ok());
  EXPECT_EQ(chunks.chunks_size(), 0);
  v1::CompactRequest compact;
  compact.set_conversation_id("off");
  v1::CompactResponse compacted;
  grpc::ClientContext cctx;
  SetDeadline(cctx);
  EXPECT_EQ(stub_->Compact(&cctx, compact, &compacted).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
}

TEST_F(GatewayE2eTest, CachePrefixesStayIdenticalUntilACompactionWhichSaysWhatItInvalidated) {
  v1::Conversation created;
  ASSERT_TRUE(Create("cache", {}, &created).ok());
  v1::BuildContextResponse previous;
  int compactions_seen = 0;
  int stable_pairs = 0;
  int invalidations = 0;
  bool saw_breakdown = false;
  for (int n = 0; n < 40; ++n) {
    ASSERT_TRUE(Append("cache", n).ok());
    v1::BuildContextResponse view;
    std::vector<v1::CompactionCompleted> steps;
    ASSERT_TRUE(Build("cache", &view, &steps).ok());
    // The hash a client computes from the entries is the server's.
    ASSERT_GT(view.entries_size(), 0);
    EXPECT_EQ(HashOf(view, view.entries_size() - 1), view.view_hash());
    for (const v1::CacheBreakpoint& b : view.cache_breakpoints()) {
      EXPECT_EQ(HashOf(view, b.last_entry()), b.prefix_hash()) << n;
    }
    ASSERT_GE(view.cache_breakpoints_size(), 1);
    EXPECT_EQ(view.cache_breakpoints(0).kind(), v1::CACHE_BREAKPOINT_KIND_PINNED);
    EXPECT_EQ(view.cache_breakpoints(0).last_entry(), 1);  // System prompt, pinned.

    for (const v1::CompactionCompleted& step : steps) {
      saw_breakdown = true;
      EXPECT_EQ(step.before().total(), step.tokens_before()) << step.tier();
      EXPECT_EQ(step.after().total(), step.tokens_after()) << step.tier();
      EXPECT_EQ(step.before().system(), step.after().system());
      if (step.tier() == "prune") {
        EXPECT_LT(step.after().tool_results(), step.before().tool_results());
      }
      if (step.tier() == "summarize") {
        EXPECT_GT(step.after().summaries(), 0);
      }
    }
    if (n > 0) {
      if (view.compaction_version() == previous.compaction_version()) {
        // No compaction in between: every breakpoint's prefix is the same.
        ++stable_pairs;
        EXPECT_EQ(view.invalidated_breakpoint(), v1::CACHE_BREAKPOINT_KIND_UNSPECIFIED);
        ASSERT_EQ(view.cache_breakpoints_size(), previous.cache_breakpoints_size()) << n;
        for (int b = 0; b < view.cache_breakpoints_size(); ++b) {
          EXPECT_EQ(view.cache_breakpoints(b).prefix_hash(),
                    previous.cache_breakpoints(b).prefix_hash())
              << "turn " << n << " breakpoint " << b;
        }
      } else if (!steps.empty()) {
        ++compactions_seen;
        // A compaction during this call: the first earlier prefix the new
        // view does not begin with, as the client can check for itself.
        v1::CacheBreakpointKind expected = v1::CACHE_BREAKPOINT_KIND_UNSPECIFIED;
        for (const v1::CacheBreakpoint& b : previous.cache_breakpoints()) {
          if (b.last_entry() >= view.entries_size() || HashOf(view, b.last_entry()) != b.prefix_hash()) {
            expected = b.kind();
            break;
          }
        }
        EXPECT_EQ(view.invalidated_breakpoint(), expected) << "turn " << n;
        if (expected != v1::CACHE_BREAKPOINT_KIND_UNSPECIFIED) ++invalidations;
        EXPECT_EQ(view.cache_breakpoints(0).prefix_hash(),
                  previous.cache_breakpoints(0).prefix_hash());
      }
    }
    previous = view;
  }
  EXPECT_GE(compactions_seen, 2);
  EXPECT_GE(invalidations, 1);
  EXPECT_GE(stable_pairs, 5);
  EXPECT_TRUE(saw_breakdown);
}

TEST_F(GatewayE2eTest, AfterTheProviderRefusesAViewItNeverComesBackAndTheAuditSaysWhy) {
  v1::Conversation created;
  ASSERT_TRUE(Create("refused", {}, &created).ok());
  for (int n = 0; n < 6; ++n) ASSERT_TRUE(Append("refused", n).ok());
  v1::BuildContextResponse refused;
  ASSERT_TRUE(Build("refused", &refused).ok());
  const int64_t prompt = refused.tokens().total() - refused.tokens().output_reserve();

  // The gateway's inference call failed with "context too long": the
  // provider counted 40% more than the estimate.
  v1::BuildContextRequest req;
  req.set_conversation_id("refused");
  req.set_provider_overflow(true);
  req.set_provider_reported_tokens(prompt * 14 / 10);
  v1::BuildContextResponse recovered;
  {
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    const grpc::Status s = stub_->BuildContext(&ctx, req, &recovered);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  EXPECT_NE(recovered.view_hash(), refused.view_hash());
  // Counts are corrected by 1.4 now, and the prompt stays under nine
  // tenths of what was refused.
  const int64_t limit = prompt * 14 / 10 * 9 / 10;
  EXPECT_LE(recovered.tokens().total() - recovered.tokens().output_reserve(), limit);

  // Later calls keep the lesson: the refused view does not come back.
  for (int n = 6; n < 9; ++n) {
    v1::BuildContextResponse view;
    ASSERT_TRUE(Build("refused", &view).ok());
    EXPECT_NE(view.view_hash(), refused.view_hash());
    EXPECT_LE(view.tokens().total() - view.tokens().output_reserve(), limit);
    ASSERT_TRUE(Append("refused", n).ok());
  }

  v1::ListCompactionEventsRequest list;
  list.set_conversation_id("refused");
  v1::ListCompactionEventsResponse audit;
  grpc::ClientContext lctx;
  SetDeadline(lctx);
  ASSERT_TRUE(stub_->ListCompactionEvents(&lctx, list, &audit).ok());
  int overflow_rows = 0;
  for (const v1::CompactionEvent& e : audit.events()) {
    if (e.event() != "provider_overflow") continue;
    ++overflow_rows;
    EXPECT_EQ(e.tokens_before(), prompt);
    EXPECT_EQ(e.tokens_after(), prompt * 14 / 10);
    EXPECT_NE(e.detail_json().find(refused.view_hash()), std::string::npos) << e.detail_json();
    EXPECT_NE(e.detail_json().find("prompt_limit"), std::string::npos) << e.detail_json();
  }
  EXPECT_EQ(overflow_rows, 1);
}

TEST_F(GatewayE2eTest, AContinuationResumesFromTheSummariesAndLedgerWithProvenance) {
  v1::Conversation created;
  ASSERT_TRUE(Create("session-1", {}, &created).ok());
  for (int n = 0; n < 30; ++n) {
    ASSERT_TRUE(Append("session-1", n).ok());
    v1::BuildContextResponse view;
    ASSERT_TRUE(Build("session-1", &view).ok());
  }
  v1::ListSummariesRequest list;
  list.set_conversation_id("session-1");
  v1::ListSummariesResponse before;
  {
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    ASSERT_TRUE(stub_->ListSummaries(&ctx, list, &before).ok());
  }
  ASSERT_GT(before.chunks_size(), 0) << "the first session should have been summarized";

  v1::CreateConversationRequest resume;
  resume.set_conversation_id("session-2");
  resume.set_continue_from("session-1");
  v1::Conversation resumed;
  {
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    const grpc::Status s = stub_->CreateConversation(&ctx, resume, &resumed);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  EXPECT_EQ(resumed.continued_from(), "session-1");
  EXPECT_EQ(resumed.model(), "tiny-1");
  EXPECT_EQ(resumed.item_count(), 0);

  // The source was summarized through its end first: nothing of it is
  // left behind.
  v1::ListSummariesResponse source;
  {
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    ASSERT_TRUE(stub_->ListSummaries(&ctx, list, &source).ok());
  }
  EXPECT_GT(source.chunks_size(), before.chunks_size());
  {
    v1::BuildContextResponse left;
    ASSERT_TRUE(Build("session-1", &left).ok());
    for (const v1::ContextEntry& e : left.entries()) {
      EXPECT_NE(e.section(), v1::SECTION_LIVE) << "left unsummarized: " << e.sequence();
    }
  }

  list.set_conversation_id("session-2");
  v1::ListSummariesResponse carried;
  {
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    ASSERT_TRUE(stub_->ListSummaries(&ctx, list, &carried).ok());
  }
  ASSERT_EQ(carried.chunks_size(), source.chunks_size());
  size_t source_facts = 0, carried_facts = 0;
  for (int i = 0; i < carried.chunks_size(); ++i) {
    EXPECT_EQ(carried.chunks(i).source_conversation_id(), "session-1");
    EXPECT_EQ(carried.chunks(i).source_chunk_id(), source.chunks(i).chunk_id());
    EXPECT_EQ(carried.chunks(i).text(), source.chunks(i).text());
    source_facts += source.chunks(i).facts_size();
    carried_facts += carried.chunks(i).facts_size();
  }
  EXPECT_EQ(carried_facts, source_facts);

  // The first view of the new session: the summaries and the ledger, no
  // item of the old one.
  ASSERT_TRUE(Append("session-2", 100).ok());
  v1::BuildContextResponse view;
  ASSERT_TRUE(Build("session-2", &view).ok());
  int summaries = 0;
  for (const v1::ContextEntry& e : view.entries()) {
    if (e.section() == v1::SECTION_SUMMARY) ++summaries;
    if (e.section() == v1::SECTION_LIVE) {
      EXPECT_GE(e.sequence(), 1);
    }
  }
  EXPECT_EQ(summaries, source.chunks_size());
  if (source_facts > 0) {
    EXPECT_GT(view.tokens().ledger(), 0);
  }

  v1::ListCompactionEventsRequest events;
  events.set_conversation_id("session-2");
  v1::ListCompactionEventsResponse audit;
  grpc::ClientContext ctx;
  SetDeadline(ctx);
  ASSERT_TRUE(stub_->ListCompactionEvents(&ctx, events, &audit).ok());
  ASSERT_GE(audit.events_size(), 1);
  EXPECT_EQ(audit.events(0).event(), "continued");
}

TEST_F(GatewayE2eTest, ReasoningStaysVerbatimWhenRecentAndIsDroppedOrSummarizedByPolicy) {
  for (const std::string model : {"tiny-1", "brief-1"}) {
    SCOPED_TRACE(model);
    const bool drop = model == "brief-1";
    const std::string id = "reasoning-" + model;
    v1::CreateConversationRequest create;
    create.set_conversation_id(id);
    create.set_model(model);
    create.set_system_prompt("You are an on-call assistant.");
    v1::Conversation created;
    {
      grpc::ClientContext ctx;
      SetDeadline(ctx);
      ASSERT_TRUE(stub_->CreateConversation(&ctx, create, &created).ok());
    }
    int summarized = 0, dropped = 0, kept_last = -1;
    for (int n = 0; n < 30; ++n) {
      v1::AppendTurnRequest req;
      req.set_conversation_id(id);
      std::string filler;
      for (int i = 0; i < 8; ++i) absl::StrAppend(&filler, " The batch ", n * 10 + i, " finished late.");
      *req.add_items() = MakeItem(v1::ROLE_USER, v1::ITEM_KIND_MESSAGE,
                                  absl::StrCat("[turn ", n, "] Why is api-", n, " slow?", filler));
      *req.add_items() = MakeItem(v1::ROLE_ASSISTANT, v1::ITEM_KIND_REASONING,
                                  absl::StrCat("Thinking about turn ", n, ":", filler));
      *req.add_items() = MakeItem(v1::ROLE_ASSISTANT, v1::ITEM_KIND_MESSAGE,
                                  absl::StrCat("api-", n, " waits on db-", n, ".", filler));
      v1::AppendTurnResponse out;
      {
        grpc::ClientContext ctx;
        SetDeadline(ctx);
        ASSERT_TRUE(stub_->AppendTurn(&ctx, req, &out).ok());
      }
      v1::BuildContextResponse view;
      std::vector<v1::CompactionCompleted> steps;
      ASSERT_TRUE(Build(id, &view, &steps).ok());
      for (const v1::CompactionCompleted& step : steps) {
        if (step.tier() != "summarize") continue;
        summarized += step.reasoning_summarized();
        dropped += step.reasoning_dropped();
        kept_last = step.reasoning_kept();
      }
      // Reasoning is only ever a live item of the conversation, verbatim.
      for (const v1::ContextEntry& e : view.entries()) {
        if (e.kind() != v1::ITEM_KIND_REASONING) continue;
        EXPECT_EQ(e.section(), v1::SECTION_LIVE);
        EXPECT_EQ(e.content().rfind("Thinking about turn ", 0), 0u);
      }
    }
    EXPECT_GT(summarized + dropped, 0) << "no summary took reasoning in";
    EXPECT_EQ(drop ? summarized : dropped, 0);
    EXPECT_GE(kept_last, 1);
    v1::ListCompactionEventsRequest events;
    events.set_conversation_id(id);
    v1::ListCompactionEventsResponse audit;
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    ASSERT_TRUE(stub_->ListCompactionEvents(&ctx, events, &audit).ok());
    int rows = 0;
    for (const v1::CompactionEvent& e : audit.events()) rows += e.event() == "reasoning_downgraded";
    EXPECT_GT(rows, 0);
  }
}

TEST_F(GatewayE2eTest, AModelChangeRebudgetsAndTheNextViewCompactsIfItMust) {
  v1::Conversation created;
  ASSERT_TRUE(Create("switch", {}, &created).ok());
  ASSERT_TRUE(Append("switch", 0).ok());
  v1::BuildContextResponse small;
  ASSERT_TRUE(Build("switch", &small).ok());
  ASSERT_EQ(small.tokens().context_window(), 4096);
  ASSERT_FALSE(small.tokens().approximate());

  // To a large model with another tokenizer: the same items, counted again.
  auto update = [&](const std::string& model) {
    v1::UpdateConversationRequest req;
    req.set_conversation_id("switch");
    req.set_model(model);
    v1::Conversation out;
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    const grpc::Status s = stub_->UpdateConversation(&ctx, req, &out);
    EXPECT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(out.model(), model);
  };
  update("big-model");
  v1::BuildContextResponse big;
  ASSERT_TRUE(Build("switch", &big).ok());
  EXPECT_EQ(big.tokens().context_window(), 128000);
  EXPECT_TRUE(big.tokens().approximate());
  EXPECT_NE(big.tokens().live(), small.tokens().live());
  for (int n = 1; n < 30; ++n) {
    ASSERT_TRUE(Append("switch", n).ok());
    ASSERT_TRUE(Build("switch", &big).ok());
    EXPECT_EQ(big.context_status(), v1::CONTEXT_STATUS_FULL) << "128k holds it all";
  }
  // Back to the small window: the next view compacts to fit it.
  update("tiny-2");
  v1::BuildContextResponse back;
  std::vector<v1::CompactionCompleted> steps;
  ASSERT_TRUE(Build("switch", &back, &steps).ok());
  EXPECT_EQ(back.tokens().context_window(), 4096);
  EXPECT_LE(back.tokens().total(), 4096);
  EXPECT_FALSE(steps.empty());
  EXPECT_NE(back.context_status(), v1::CONTEXT_STATUS_FULL);

  v1::ListCompactionEventsRequest list;
  list.set_conversation_id("switch");
  v1::ListCompactionEventsResponse audit;
  grpc::ClientContext ctx;
  SetDeadline(ctx);
  ASSERT_TRUE(stub_->ListCompactionEvents(&ctx, list, &audit).ok());
  int updates = 0;
  for (const v1::CompactionEvent& e : audit.events()) updates += e.event() == "conversation_updated";
  EXPECT_EQ(updates, 2);
}

TEST_F(GatewayE2eTest, GetContextAtRebuildsEveryPastViewWithTheSameHash) {
  v1::Conversation created;
  ASSERT_TRUE(Create("audited", {}, &created).ok());
  struct Seen {
    int64_t version, compaction_version;
    std::string hash;
    int entries;
  };
  std::vector<Seen> seen;
  for (int n = 0; n < 30; ++n) {
    ASSERT_TRUE(Append("audited", n).ok());
    v1::BuildContextResponse view;
    ASSERT_TRUE(Build("audited", &view).ok());
    seen.push_back({view.version(), view.compaction_version(), view.view_hash(),
                    view.entries_size()});
    if (n == 10) {  // A pin, a new system prompt: later views differ, past ones do not.
      v1::PinItemRequest pin;
      pin.set_conversation_id("audited");
      pin.set_sequence(view.entries(2).sequence() > 0 ? view.entries(2).sequence() : 1);
      v1::Item pinned;
      grpc::ClientContext pctx;
      SetDeadline(pctx);
      (void)stub_->PinItem(&pctx, pin, &pinned);
      v1::UpdateConversationRequest update;
      update.set_conversation_id("audited");
      update.set_system_prompt("You are an on-call assistant. Be brief.");
      v1::Conversation out;
      grpc::ClientContext uctx;
      SetDeadline(uctx);
      ASSERT_TRUE(stub_->UpdateConversation(&uctx, update, &out).ok());
    }
  }
  int compactions = 0;
  for (size_t i = 1; i < seen.size(); ++i) {
    compactions += seen[i].compaction_version != seen[i - 1].compaction_version;
  }
  ASSERT_GE(compactions, 3) << "the views should span several compactions";
  for (const Seen& s : seen) {
    v1::GetContextAtRequest req;
    req.set_conversation_id("audited");
    req.set_version(s.version);
    req.set_compaction_version(s.compaction_version);
    v1::BuildContextResponse past;
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    const grpc::Status status = stub_->GetContextAt(&ctx, req, &past);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(past.view_hash(), s.hash) << "version " << s.version << " compaction_version "
                                        << s.compaction_version;
    EXPECT_EQ(past.entries_size(), s.entries);
    EXPECT_EQ(past.version(), s.version);
    EXPECT_EQ(past.compaction_version(), s.compaction_version);
  }
  // Without a compaction_version: the last state the version reached.
  v1::GetContextAtRequest latest;
  latest.set_conversation_id("audited");
  latest.set_version(seen.back().version);
  v1::BuildContextResponse last;
  {
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    ASSERT_TRUE(stub_->GetContextAt(&ctx, latest, &last).ok());
  }
  EXPECT_EQ(last.view_hash(), seen.back().hash);
  latest.set_version(seen.back().version + 5);
  grpc::ClientContext ctx;
  SetDeadline(ctx);
  EXPECT_EQ(stub_->GetContextAt(&ctx, latest, &last).error_code(), grpc::StatusCode::OUT_OF_RANGE);
}

}  // namespace
}  // namespace convstate
