#include "services/compaction/summarizers/extractive.h"
#include "services/compaction/engine/compaction_runner.h"

#include <atomic>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "storage/forwarding_storage.h"
#include "storage/memory_storage.h"

namespace convstate {
namespace {

// Answers with whatever the test scripted; counts calls.
class ScriptedSummarizer final : public Summarizer {
 public:
  std::function<absl::StatusOr<SummaryResult>(const SummaryRequest&)> answer;
  int calls = 0;
  absl::StatusOr<SummaryResult> Summarize(const SummaryRequest& req) override {
    ++calls;
    return answer(req);
  }
};

class CompactionRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto registry = ModelRegistry::FromText(R"pb(
      profiles {
        name: "p"
        context_window: 2000
        output_reserve: 100
        token_floor: 0
        tokenizer { encoding: "approximate" bytes_per_token: 1.0 }
        recent { turns: 1 max_tokens: 400 }
        per_message_tokens: 0
      }
    )pb", "");
    ASSERT_TRUE(registry.ok()) << registry.status();
    registry_ = std::move(*registry);
    profile_ = **registry_->Resolve("p");
    NewConversation nc;
    nc.key = {"t", "c"};
    nc.model = "p";
    ASSERT_TRUE(storage_->CreateConversation(ctx_, nc).ok());
  }

  void AppendTurns(int turns, int bytes) {
    for (int i = 0; i < turns; ++i) {
      AppendRequest req;
      req.key = {"t", "c"};
      for (Role role : {Role::kUser, Role::kAssistant}) {
        ItemData d;
        d.role = role;
        d.content = absl::StrCat(std::string(bytes, 'x'), " turn ", i);
        d.token_count = static_cast<int64_t>(d.content.size());
        req.items.push_back(d);
      }
      ASSERT_TRUE(storage_->AppendItems(ctx_, req).ok());
    }
  }

  absl::StatusOr<CompactionOutcome> Run(CompactionMode mode, bool background = false,
                                        CallContext ctx = {}) {
    auto snap = storage_->LoadContext(ctx_, {"t", "c"});
    if (!snap.ok()) return snap.status();
    CompactionRunner::Options options;
    options.holder = "runner";
    options.lease = absl::Seconds(10);
    options.clock = &clock_;
    CompactionRunner runner(options, storage_.get(), &summarizer_);
    return runner.Run(ctx, *snap, profile_, {}, mode, "", nullptr, background);
  }

  static absl::StatusOr<SummaryResult> Short(const SummaryRequest&) {
    SummaryResult r;
    r.text = "short summary";
    r.model = "scripted";
    return r;
  }

  // The summarizer answers Short once `go_on` is notified; `summarizing`
  // is notified when the first request arrives.
  void HoldSummaries(absl::Notification& summarizing, absl::Notification& go_on) {
    summarizer_.answer = [&](const SummaryRequest& req) -> absl::StatusOr<SummaryResult> {
      if (!summarizing.HasBeenNotified()) summarizing.Notify();
      go_on.WaitForNotification();
      return Short(req);
    };
  }

  std::vector<std::string> Events() {
    std::vector<std::string> out;
    const auto events = AllCompactionEvents(*storage_, ctx_, {"t", "c"});
    EXPECT_TRUE(events.ok()) << events.status();
    for (const auto& e : *events) out.push_back(e.event);
    return out;
  }

  std::unique_ptr<ModelRegistry> registry_;
  ResolvedProfile profile_;
  // Starts at the real time so that deadlines read by either clock agree.
  FakeClock clock_{absl::Now()};
  std::unique_ptr<Storage> storage_ = NewMemoryStorage(&clock_);
  ScriptedSummarizer summarizer_;
  CallContext ctx_;
};

bool Has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

void AppendFactTurns(Storage& storage, const CallContext& ctx, int turns, int filler_bytes) {
  for (int i = 0; i < turns; ++i) {
    AppendRequest req;
    req.key = {"t", "c"};
    ItemData user;
    user.role = Role::kUser;
    user.content = absl::StrCat("Ticket INC-", 4000 + i, " is about host db-", i, ".");
    ItemData assistant;
    assistant.role = Role::kAssistant;
    assistant.content = "I will look into that and let you know what I find. ";
    if (filler_bytes == 0) assistant.content.clear();
    while (static_cast<int>(assistant.content.size()) < filler_bytes) {
      assistant.content += "It should not take long, and nothing needs to change yet. ";
    }
    for (ItemData* d : {&user, &assistant}) {
      if (d == &assistant && filler_bytes == 0) continue;  // The user's facts alone.
      d->token_count = static_cast<int64_t>(d->content.size());
      req.items.push_back(*d);
    }
    ASSERT_TRUE(storage.AppendItems(ctx, req).ok());
  }
}

TEST_F(CompactionRunnerTest, ASummaryKeepsItsSpansFactsVerbatimInTheLedger) {
  AppendFactTurns(*storage_, ctx_, 5, 300);
  summarizer_.answer = [](const SummaryRequest& req) {
    return NewExtractiveSummarizer()->Summarize(req);
  };
  auto out = Run(CompactionMode::kSummarize);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_GT(out->chunk_id, 0);
  std::string ledger;
  for (const ViewEntry& e : out->view.entries) {
    if (e.section == Section::kLedger) ledger = e.content;
  }
  // Every ticket and host of the summarized turns, verbatim, with the item
  // it came from.
  for (int i = 0; i < 4; ++i) {
    EXPECT_NE(ledger.find(absl::StrCat("- U#", 2 * i + 1, ": Ticket INC-", 4000 + i,
                                       " is about host db-", i, ".")),
              std::string::npos)
        << ledger;
  }
  EXPECT_GT(out->view.tokens.ledger, 0);
  auto chunks = AllSummaries(*storage_, ctx_, {"t", "c"}, false);
  ASSERT_TRUE(chunks.ok());
  ASSERT_EQ(chunks->size(), 1u);
  ASSERT_TRUE(chunks->front().recall.has_value());
  EXPECT_DOUBLE_EQ(*chunks->front().recall, 1.0);
  EXPECT_EQ(chunks->front().facts.size(), 4u);
  // The summary itself does not repeat what the ledger holds.
  EXPECT_EQ(chunks->front().text.find("INC-4000"), std::string::npos) << chunks->front().text;
}

// A span of little but facts cannot shrink without losing some. While the
// window has room nothing is dropped to make it: no progress, nothing
// committed, every fact still in the view.
TEST_F(CompactionRunnerTest, ASpanOfLittleButFactsIsLeftAloneWhileTheWindowHasRoom) {
  AppendFactTurns(*storage_, ctx_, 5, 0);  // Nothing but facts: no room to gain.
  summarizer_.answer = [](const SummaryRequest& req) {
    return NewExtractiveSummarizer()->Summarize(req);
  };
  auto out = Run(CompactionMode::kSummarize);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->chunk_id, 0);
  const auto events = Events();
  EXPECT_TRUE(Has(events, "no_progress"));
  EXPECT_FALSE(Has(events, "facts_dropped"));
  auto chunks = AllSummaries(*storage_, ctx_, {"t", "c"}, false);
  ASSERT_TRUE(chunks.ok());
  EXPECT_TRUE(chunks->empty());
  std::string text;
  for (const ViewEntry& e : out->view.entries) text += e.content + "\n";
  for (int i = 0; i < 5; ++i) {
    EXPECT_NE(text.find(absl::StrCat("Ticket INC-", 4000 + i)), std::string::npos) << text;
  }
}

// Under real pressure (the view would not fit) the oldest facts of such a
// span give way until the view shrinks, and the audit row names each one.
TEST_F(CompactionRunnerTest, UnderPressureASpanOfFactsGivesUpItsOldestAndNamesThem) {
  AppendFactTurns(*storage_, ctx_, 5, 0);  // A short span of nothing but facts, beside
  {                                         // pinned content that takes the view past
    AppendRequest req;                      // 0.95 of 2,000.
    req.key = {"t", "c"};
    ItemData pinned;
    pinned.role = Role::kUser;
    pinned.pinned = true;
    pinned.content = std::string(1800, 'p');
    pinned.token_count = 1800;
    req.items.push_back(pinned);
    ASSERT_TRUE(storage_->AppendItems(ctx_, req).ok());
  }
  summarizer_.answer = [](const SummaryRequest& req) {
    return NewExtractiveSummarizer()->Summarize(req);
  };
  auto out = Run(CompactionMode::kSummarize);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_GT(out->chunk_id, 0);
  const auto events = AllCompactionEvents(*storage_, ctx_, {"t", "c"});
  ASSERT_TRUE(events.ok());
  bool named = false;
  for (const CompactionEvent& e : *events) {
    if (e.event != "facts_dropped") continue;
    EXPECT_NE(e.detail.find("would not fit"), std::string::npos) << e.detail;
    named = e.detail.find("Ticket INC-4000") != std::string::npos;
  }
  if (!named) {
    for (const CompactionEvent& e : *events) ADD_FAILURE() << e.event << " " << e.detail;
  }
  EXPECT_TRUE(named) << "the dropped facts are not named";
  auto chunks = AllSummaries(*storage_, ctx_, {"t", "c"}, false);
  ASSERT_EQ(chunks->size(), 1u);
  ASSERT_TRUE(chunks->front().recall.has_value());
  EXPECT_LT(*chunks->front().recall, 1.0);
  EXPECT_LT(out->view.tokens.total, out->tokens_before);
}

// Four short items, summarized on request: the chunk never commits with a
// text that says nothing but its header.
TEST_F(CompactionRunnerTest, NoChunkSaysNothing) {
  AppendFactTurns(*storage_, ctx_, 2, 120);
  summarizer_.answer = [](const SummaryRequest& req) {
    return NewExtractiveSummarizer()->Summarize(req);
  };
  auto out = Run(CompactionMode::kSummarize);
  ASSERT_TRUE(out.ok()) << out.status();
  auto chunks = AllSummaries(*storage_, ctx_, {"t", "c"}, false);
  ASSERT_TRUE(chunks.ok());
  for (const SummaryChunk& c : *chunks) {
    const size_t colon = c.text.find(":\n");
    EXPECT_NE(colon, std::string::npos) << "header only: " << c.text;
    EXPECT_GT(c.text.size(), colon + 3) << c.text;
  }
  // And a summarizer that answers with a header alone makes no progress.
  summarizer_.answer = [](const SummaryRequest&) -> absl::StatusOr<SummaryResult> {
    SummaryResult r;
    r.text = "Summary of items #1-#4:";
    r.model = "scripted";
    return r;
  };
  AppendFactTurns(*storage_, ctx_, 3, 400);
  auto again = Run(CompactionMode::kSummarize);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->chunk_id, 0);
  EXPECT_TRUE(Has(Events(), "no_progress"));
}

// Storage whose compaction commits fail (a broken connection, an encoding
// error): everything else goes to `base`.
class FailingCommits final : public ForwardingStorage {
 public:
  using ForwardingStorage::ForwardingStorage;
  absl::StatusOr<CompactionResult> CommitCompaction(const CallContext&,
                                                    const CompactionCommit&) override {
    return absl::InternalError("invalid byte sequence for encoding \"UTF8\"");
  }
};

TEST_F(CompactionRunnerTest, ACompactionThatCannotBeStoredFallsBackToAFittingView) {
  AppendTurns(5, 300);  // ~3,000 tokens in a 2,000 window.
  summarizer_.answer = Short;
  FailingCommits failing(storage_.get());
  CompactionRunner::Options options;
  options.clock = &clock_;
  CompactionRunner runner(options, &failing, &summarizer_);
  auto out = runner.Run(ctx_, *storage_->LoadContext(ctx_, {"t", "c"}), profile_, {},
                        CompactionMode::kByBand, "", nullptr);
  // The caller gets a view that fits, never the storage error.
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->view.status, ContextStatus::kTruncated);
  EXPECT_LE(out->view.tokens.total, 2000);
  // The audit says why.
  const auto events = AllCompactionEvents(*storage_, ctx_, {"t", "c"});
  ASSERT_TRUE(events.ok());
  bool failed = false, truncated = false;
  for (const CompactionEvent& e : *events) {
    failed |= e.event == "failed" &&
              e.detail.find("commit: invalid byte sequence") != std::string::npos;
    truncated |=
        e.event == "truncated" && e.detail.find("could not be stored") != std::string::npos;
  }
  EXPECT_TRUE(failed);
  EXPECT_TRUE(truncated);
  EXPECT_TRUE(AllSummaries(*storage_, ctx_, {"t", "c"}, true)->empty());
}

TEST_F(CompactionRunnerTest, OversizedSummaryIsCutAndAudited) {
  AppendTurns(5, 300);  // ~3000 tokens in a 2000 window.
  summarizer_.answer = [](const SummaryRequest& req) -> absl::StatusOr<SummaryResult> {
    SummaryResult r;
    r.text = std::string(req.max_tokens * 5, 'y');
    r.model = "verbose";
    return r;
  };
  auto out = Run(CompactionMode::kByBand);
  ASSERT_TRUE(out.ok()) << out.status();
  auto chunks = AllSummaries(*storage_, ctx_, {"t", "c"}, true);
  ASSERT_EQ(chunks->size(), 1u);
  EXPECT_LT(chunks->at(0).text.size(), 5 * 1000u);
  EXPECT_TRUE(Has(Events(), "summary_oversize"));
  EXPECT_TRUE(Has(Events(), "completed"));
  EXPECT_LE(out->view.tokens.total, 2000);
}

TEST_F(CompactionRunnerTest, NoProgressIsRecordedAndNotRetried) {
  // A zone of one tiny turn (about 16 tokens): no summary within the
  // minimum budget of 32 tokens can be smaller than it.
  AppendTurns(2, 1);
  summarizer_.answer = [](const SummaryRequest& req) -> absl::StatusOr<SummaryResult> {
    SummaryResult r;
    r.text = req.transcript;  // No compression at all.
    r.model = "echo";
    return r;
  };
  auto out = Run(CompactionMode::kSummarize);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(summarizer_.calls, 1);
  EXPECT_TRUE(Has(Events(), "no_progress"));
  EXPECT_TRUE(AllSummaries(*storage_, ctx_, {"t", "c"}, true)->empty());
  // A second run tries once more, once: there is no loop.
  ASSERT_TRUE(Run(CompactionMode::kSummarize).ok());
  EXPECT_EQ(summarizer_.calls, 2);
}

TEST_F(CompactionRunnerTest, SummarizerFailureTruncatesTheViewOnly) {
  AppendTurns(5, 300);
  summarizer_.answer = [](const SummaryRequest&) -> absl::StatusOr<SummaryResult> {
    return absl::UnavailableError("circuit open");
  };
  auto out = Run(CompactionMode::kByBand);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->view.status, ContextStatus::kTruncated);
  EXPECT_LT(out->view.tokens.total, 1600);  // Under the hard threshold.
  EXPECT_TRUE(Has(Events(), "failed"));
  EXPECT_TRUE(Has(Events(), "truncated"));
  // Storage keeps everything.
  EXPECT_EQ(storage_->GetConversation(ctx_, {"t", "c"})->item_count, 10);
  EXPECT_EQ(storage_->GetConversation(ctx_, {"t", "c"})->summarized_through, 0);
}

TEST_F(CompactionRunnerTest, WaitsForAnotherCompactionThenPlansAgain) {
  AppendTurns(5, 300);
  summarizer_.answer = Short;
  // Another replica holds the lease for 500 ms (of the fake clock).
  auto other = storage_->TryAcquireCompactionLease(ctx_, {"t", "c"}, "other",
                                                   absl::Milliseconds(500));
  ASSERT_TRUE(other.ok() && other->has_value());
  auto out = Run(CompactionMode::kByBand, false, CallContext{clock_.Now() + absl::Seconds(5)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_GT(out->chunk_id, 0);
  const auto events = AllCompactionEvents(*storage_, ctx_, {"t", "c"});
  ASSERT_FALSE(events->empty());
  EXPECT_EQ(events->front().event, "threshold_hit");
  EXPECT_NE(events->front().detail.find("\"lock_wait_ms\":5"), std::string::npos)
      << events->front().detail;
  // The lease is given back.
  EXPECT_FALSE(storage_->GetConversation(ctx_, {"t", "c"})->lease_active);
}

TEST_F(CompactionRunnerTest, GivesUpAtTheDeadlineWhileAnotherCompacts) {
  AppendTurns(5, 300);
  summarizer_.answer = Short;
  ASSERT_TRUE(storage_->TryAcquireCompactionLease(ctx_, {"t", "c"}, "other", absl::Seconds(60))
                  ->has_value());
  auto out = Run(CompactionMode::kByBand, false, CallContext{clock_.Now() + absl::Milliseconds(200)});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kDeadlineExceeded) << out.status();
  EXPECT_EQ(summarizer_.calls, 0);
}

TEST_F(CompactionRunnerTest, ACancelledCallStopsWaitingForTheLease) {
  AppendTurns(5, 300);
  summarizer_.answer = Short;
  ASSERT_TRUE(storage_->TryAcquireCompactionLease(ctx_, {"t", "c"}, "other", absl::Seconds(60))
                  ->has_value());
  int polls = 0;
  CallContext ctx{clock_.Now() + absl::Seconds(30), [&polls] { return ++polls > 3; }};
  auto out = Run(CompactionMode::kByBand, false, ctx);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kCancelled) << out.status();
  EXPECT_EQ(summarizer_.calls, 0);
  // Stopped at once, not at the 30 s deadline.
  EXPECT_LT(polls, 10);
}

TEST_F(CompactionRunnerTest, TheLeaseIsGivenBackAfterTheSummarizerOutlivedTheCaller) {
  AppendTurns(5, 300);
  // The summarizer hangs past the caller's deadline.
  summarizer_.answer = [this](const SummaryRequest&) -> absl::StatusOr<SummaryResult> {
    clock_.Advance(absl::Seconds(6));
    return absl::DeadlineExceededError("summarizer did not answer in time");
  };
  auto out = Run(CompactionMode::kByBand, false, CallContext{clock_.Now() + absl::Seconds(5)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->view.status, ContextStatus::kTruncated);
  // Well before the 10 s lease would expire, another compaction can start.
  EXPECT_FALSE(storage_->GetConversation(ctx_, {"t", "c"})->lease_active);
  auto again = storage_->TryAcquireCompactionLease(ctx_, {"t", "c"}, "next", absl::Seconds(1));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->has_value());
}

// A clock whose waits block until the test lets them go, so that the test
// decides when the waiting request looks at the lease again.
class GatedClock final : public Clock {
 public:
  absl::Time Now() const override { return now_; }
  void SleepFor(absl::Duration) const override {}
  void WaitWithTimeout(absl::CondVar&, absl::Mutex& mu, absl::Duration) const override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    mu.Unlock();
    waiting_.Notify();
    gate_.WaitForNotification();
    mu.Lock();
  }
  void Open() { gate_.Notify(); }
  void AwaitWaiter() { waiting_.WaitForNotification(); }

 private:
  const absl::Time now_ = absl::Now();
  mutable absl::Notification waiting_;
  mutable absl::Notification gate_;
};

TEST_F(CompactionRunnerTest, OneRequestWaitsForTheLeaseTheOthersGetTheViewAtOnce) {
  AppendTurns(5, 300);
  summarizer_.answer = Short;
  auto other = storage_->TryAcquireCompactionLease(ctx_, {"t", "c"}, "other", absl::Seconds(60));
  ASSERT_TRUE(other.ok() && other->has_value());
  GatedClock clock;
  CompactionRunner::Options options;
  options.holder = "runner";
  options.lease = absl::Seconds(10);
  options.clock = &clock;
  options.waiting_calls = 1;
  CompactionRunner runner(options, storage_.get(), &summarizer_);
  const CallContext ctx{absl::Now() + absl::Seconds(30)};
  absl::StatusOr<CompactionOutcome> first;
  std::thread waiter([&] {
    first = runner.Run(ctx, *storage_->LoadContext(ctx_, {"t", "c"}), profile_, {},
                       CompactionMode::kByBand, "", nullptr);
  });
  clock.AwaitWaiter();
  // A second request for the same conversation, past the calls that may
  // wait, does not wait: it gets the view now, fitted to the window, and
  // calls no summarizer.
  auto second = runner.Run(ctx, *storage_->LoadContext(ctx_, {"t", "c"}), profile_, {},
                           CompactionMode::kByBand, "", nullptr);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_LE(second->view.tokens.total, 2000);
  EXPECT_EQ(second->chunk_id, 0);
  EXPECT_EQ(summarizer_.calls, 0);
  // The other holder finishes; the waiter takes the lease and compacts.
  ASSERT_TRUE(storage_->ReleaseCompactionLease(ctx_, {"t", "c"}, **other).ok());
  clock.Open();
  waiter.join();
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_GT(first->chunk_id, 0);
  EXPECT_EQ(summarizer_.calls, 1);
}

// The real clock, noting which threads waited on it.
class WatchedClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
  void SleepFor(absl::Duration d) const override { absl::SleepFor(d); }
  void WaitWithTimeout(absl::CondVar& cv, absl::Mutex& mu, absl::Duration d) const override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    {
      absl::MutexLock lock(&seen_mu_);
      waited_.insert(std::this_thread::get_id());
    }
    cv.WaitWithTimeout(&mu, d);
  }
  size_t threads_waited() const {
    absl::MutexLock lock(&seen_mu_);
    return waited_.size();
  }

 private:
  mutable absl::Mutex seen_mu_;
  mutable std::set<std::thread::id> waited_ ABSL_GUARDED_BY(seen_mu_);
};

// Calls that come while a compaction of their conversation runs in this
// process wait for it and share what it stored: one summary, and every
// call gets the compacted view, none a truncated one.
TEST_F(CompactionRunnerTest, CallsThatComeDuringACompactionShareIt) {
  AppendTurns(5, 300);
  absl::Notification summarizing, go_on;
  HoldSummaries(summarizing, go_on);
  WatchedClock clock;
  CompactionRunner::Options options;
  options.holder = "runner";
  options.lease = absl::Seconds(10);
  options.poll = absl::Milliseconds(5);
  options.clock = &clock;
  options.waiting_calls = 2;
  CompactionRunner runner(options, storage_.get(), &summarizer_);
  const CallContext ctx{absl::Now() + absl::Seconds(30)};
  const ContextSnapshot before = *storage_->LoadContext(ctx_, {"t", "c"});
  absl::StatusOr<CompactionOutcome> first;
  std::thread holder([&] {
    first = runner.Run(ctx, before, profile_, {}, CompactionMode::kByBand, "", nullptr);
  });
  summarizing.WaitForNotification();
  std::vector<absl::StatusOr<CompactionOutcome>> later(3);
  std::vector<std::thread> calls;
  std::atomic<int> returned{0};
  for (size_t i = 0; i < later.size(); ++i) {
    calls.emplace_back([&, i] {
      later[i] = runner.Run(ctx, before, profile_, {}, CompactionMode::kByBand, "", nullptr);
      returned.fetch_add(1);
    });
  }
  // Two wait (one for the lease, one behind it); the third, past
  // waiting_calls, gets the view as it stands at once, truncated to fit.
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while ((clock.threads_waited() < 2 || returned.load() < 1) && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(clock.threads_waited(), 2u);
  EXPECT_EQ(returned.load(), 1);
  go_on.Notify();
  holder.join();
  for (std::thread& t : calls) t.join();
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_GT(first->chunk_id, 0);
  EXPECT_EQ(summarizer_.calls, 1);
  int shared = 0, truncated = 0;
  for (const absl::StatusOr<CompactionOutcome>& out : later) {
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->chunk_id, 0);  // Stored nothing of its own.
    if (out->view.status == ContextStatus::kTruncated) {
      ++truncated;
    } else {
      ++shared;
      EXPECT_EQ(out->compaction_version, first->compaction_version);
      EXPECT_EQ(out->view.tokens.total, first->view.tokens.total);
    }
  }
  EXPECT_EQ(shared, 2);
  EXPECT_EQ(truncated, 1);
}

TEST_F(CompactionRunnerTest, BackgroundSkipsWhenSomeoneElseIsCompacting) {
  AppendTurns(5, 300);
  summarizer_.answer = Short;
  ASSERT_TRUE(storage_->TryAcquireCompactionLease(ctx_, {"t", "c"}, "other", absl::Seconds(60))
                  ->has_value());
  const absl::Time before = clock_.Now();
  auto out = Run(CompactionMode::kAuto, /*background=*/true);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(clock_.Now(), before);  // No waiting.
  EXPECT_EQ(summarizer_.calls, 0);
  EXPECT_TRUE(AllSummaries(*storage_, ctx_, {"t", "c"}, true)->empty());
}

// Storage that counts the compaction leases asked of it.
class CountedLeases final : public ForwardingStorage {
 public:
  using ForwardingStorage::ForwardingStorage;
  absl::StatusOr<std::optional<CompactionLease>> TryAcquireCompactionLease(
      const CallContext& c, const ConversationKey& k, const std::string& h,
      absl::Duration d) override {
    asked.fetch_add(1);
    return ForwardingStorage::TryAcquireCompactionLease(c, k, h, d);
  }
  std::atomic<int> asked{0};
};

// While this process holds a conversation's lease, a background
// compaction of it does not ask the storage (an UPDATE of the
// conversation's row in PostgreSQL) only to be refused; once it is given
// back, the next compaction asks again.
TEST_F(CompactionRunnerTest, ALeaseThisProcessHoldsIsNotAskedForAgain) {
  AppendTurns(5, 300);
  absl::Notification summarizing, go_on;
  HoldSummaries(summarizing, go_on);
  CountedLeases counted(storage_.get());
  CompactionRunner::Options options;
  options.clock = &clock_;
  CompactionRunner runner(options, &counted, &summarizer_);
  absl::StatusOr<CompactionOutcome> first;
  std::thread holder([&] {
    first = runner.Run(ctx_, *storage_->LoadContext(ctx_, {"t", "c"}), profile_, {},
                       CompactionMode::kByBand, "", nullptr);
  });
  summarizing.WaitForNotification();
  EXPECT_EQ(counted.asked.load(), 1);
  auto background = runner.Run(ctx_, *storage_->LoadContext(ctx_, {"t", "c"}), profile_, {},
                               CompactionMode::kAuto, "", nullptr, /*background=*/true);
  ASSERT_TRUE(background.ok()) << background.status();
  EXPECT_EQ(background->chunk_id, 0);
  EXPECT_EQ(counted.asked.load(), 1);
  go_on.Notify();
  holder.join();
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_GT(first->chunk_id, 0);
  AppendTurns(5, 300);
  auto next = runner.Run(ctx_, *storage_->LoadContext(ctx_, {"t", "c"}), profile_, {},
                         CompactionMode::kAuto, "", nullptr, /*background=*/true);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(counted.asked.load(), 2);
}

// The lease expires while the summarizer is still working and another
// replica takes it: the first one's commit is fenced out, nothing it wrote
// lands, and the call still answers from what is stored.
TEST_F(CompactionRunnerTest, AHolderThatLostItsLeaseCannotCommit) {
  AppendTurns(5, 300);
  summarizer_.answer = [this](const SummaryRequest&) -> absl::StatusOr<SummaryResult> {
    clock_.Advance(absl::Seconds(11));  // Past the 10 s lease.
    auto thief = storage_->TryAcquireCompactionLease(ctx_, {"t", "c"}, "other", absl::Seconds(60));
    EXPECT_TRUE(thief.ok() && thief->has_value());
    SummaryResult r;
    r.text = "too late";
    r.model = "scripted";
    return r;
  };
  auto out = Run(CompactionMode::kByBand);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(AllSummaries(*storage_, ctx_, {"t", "c"}, true)->empty());
  EXPECT_EQ(storage_->GetConversation(ctx_, {"t", "c"})->summarized_through, 0);
  // The view still fits: it is truncated rather than overflowing.
  EXPECT_LE(out->view.tokens.total, 2000);
}

// An append that lands while the summarizer works is kept: the compaction
// still commits (it covers only what it read), and the next view shows it.
TEST_F(CompactionRunnerTest, AppendsDuringACompactionAreKeptAndShownNext) {
  AppendTurns(5, 300);
  summarizer_.answer = [this](const SummaryRequest&) -> absl::StatusOr<SummaryResult> {
    AppendRequest late;
    late.key = {"t", "c"};
    ItemData d;
    d.role = Role::kUser;
    d.content = "arrived during the compaction";
    d.token_count = 5;
    late.items.push_back(d);
    EXPECT_TRUE(storage_->AppendItems(ctx_, late).ok());
    return Short(SummaryRequest{});
  };
  auto out = Run(CompactionMode::kByBand);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_GT(out->chunk_id, 0);
  auto snap = storage_->LoadContext(ctx_, {"t", "c"});
  ASSERT_TRUE(snap.ok());
  bool shown = false;
  for (const Item& item : snap->live_items) shown |= item.data.content == "arrived during the compaction";
  EXPECT_TRUE(shown);
  EXPECT_EQ(snap->conversation.item_count, 12);  // 10 items, the late one, the marker.
}

TEST_F(CompactionRunnerTest, EachStepReportsAndAuditsItsBreakdownBeforeAndAfter) {
  AppendTurns(8, 200);
  summarizer_.answer = Short;
  std::vector<CompactionProgress> steps;
  auto snap = storage_->LoadContext(ctx_, {"t", "c"});
  ASSERT_TRUE(snap.ok());
  CompactionRunner::Options options;
  options.clock = &clock_;
  CompactionRunner runner(options, storage_.get(), &summarizer_);
  auto out = runner.Run(ctx_, *snap, profile_, {}, CompactionMode::kSummarize, "",
                        [&](const CompactionProgress& p) { steps.push_back(p); });
  ASSERT_TRUE(out.ok()) << out.status();
  bool summarized = false;
  for (const CompactionProgress& p : steps) {
    if (p.kind != CompactionProgress::Kind::kCompleted || p.tier != Tier::kSummarize) continue;
    summarized = true;
    ASSERT_TRUE(p.before_tokens.has_value() && p.after_tokens.has_value());
    EXPECT_EQ(p.before_tokens->total, p.tokens_before);
    EXPECT_EQ(p.after_tokens->total, p.tokens_after);
    EXPECT_EQ(p.before_tokens->summaries, 0);
    EXPECT_GT(p.after_tokens->summaries, 0);
    EXPECT_LT(p.after_tokens->live, p.before_tokens->live);
  }
  EXPECT_TRUE(summarized);
  const auto events = AllCompactionEvents(*storage_, ctx_, {"t", "c"});
  ASSERT_TRUE(events.ok());
  bool audited = false;
  for (const CompactionEvent& e : *events) {
    if (e.event != "completed") continue;
    audited = true;
    EXPECT_NE(e.detail.find("\"before\":{"), std::string::npos) << e.detail;
    EXPECT_NE(e.detail.find("\"after\":{"), std::string::npos) << e.detail;
    EXPECT_NE(e.detail.find("\"tool_results\""), std::string::npos) << e.detail;
  }
  EXPECT_TRUE(audited);
  // Nothing stood before the first summary that it could invalidate; a
  // second summary changes what follows the first.
  EXPECT_EQ(out->invalidated_breakpoint, CacheBreakpointKind::kUnspecified);
  AppendTurns(8, 200);
  snap = storage_->LoadContext(ctx_, {"t", "c"});
  ASSERT_TRUE(snap.ok());
  out = runner.Run(ctx_, *snap, profile_, {}, CompactionMode::kSummarize, "", nullptr);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_GT(out->chunk_id, 0);
  EXPECT_EQ(out->invalidated_breakpoint, CacheBreakpointKind::kSummaries);
}

TEST_F(CompactionRunnerTest, SwitchedOffNothingIsCompactedAndAViewThatDoesNotFitIsRefused) {
  ResolvedProfile off = profile_;
  off.profile.compaction_enabled = false;
  AppendTurns(3, 200);
  auto snap = storage_->LoadContext(ctx_, {"t", "c"});
  ASSERT_TRUE(snap.ok());
  CompactionRunner::Options options;
  options.clock = &clock_;
  CompactionRunner runner(options, storage_.get(), &summarizer_);
  auto fits = runner.Run(ctx_, *snap, off, {}, CompactionMode::kByBand, "", nullptr);
  ASSERT_TRUE(fits.ok()) << fits.status();
  EXPECT_EQ(fits->view.status, ContextStatus::kFull);
  EXPECT_TRUE(absl::IsFailedPrecondition(
      runner.Run(ctx_, *snap, off, {}, CompactionMode::kAuto, "", nullptr).status()));

  // Past the hard band and then past the window: still FULL, then refused.
  AppendTurns(1, 200);
  snap = storage_->LoadContext(ctx_, {"t", "c"});
  auto hard = runner.Run(ctx_, *snap, off, {}, CompactionMode::kByBand, "", nullptr);
  ASSERT_TRUE(hard.ok()) << hard.status();
  EXPECT_EQ(hard->view.status, ContextStatus::kFull);
  EXPECT_GT(hard->view.tokens.total, 1600);  // The hard band of a 2,000 window.
  AppendTurns(4, 200);
  snap = storage_->LoadContext(ctx_, {"t", "c"});
  auto over = runner.Run(ctx_, *snap, off, {}, CompactionMode::kByBand, "", nullptr);
  ASSERT_TRUE(absl::IsResourceExhausted(over.status())) << over.status();
  EXPECT_NE(over.status().message().find("window is 2000"), std::string::npos) << over.status();
  EXPECT_TRUE(Events().empty());
  auto chunks = AllSummaries(*storage_, ctx_, {"t", "c"}, true);
  ASSERT_TRUE(chunks.ok());
  EXPECT_TRUE(chunks->empty());
}

void AppendReasoningTurns(Storage& storage, const CallContext& ctx, int turns) {
  for (int i = 0; i < turns; ++i) {
    AppendRequest req;
    req.key = {"t", "c"};
    ItemData user;
    user.role = Role::kUser;
    user.content = absl::StrCat("Question ", i, ": ", std::string(90, 'q'));
    ItemData thought;
    thought.role = Role::kAssistant;
    thought.kind = ItemKind::kReasoning;
    thought.content = absl::StrCat("Thinking about question ", i, ": ", std::string(90, 'r'));
    ItemData answer;
    answer.role = Role::kAssistant;
    answer.content = absl::StrCat("Answer ", i, ": ", std::string(90, 'a'));
    for (ItemData* d : {&user, &thought, &answer}) {
      d->token_count = static_cast<int64_t>(d->content.size());
      req.items.push_back(*d);
    }
    ASSERT_TRUE(storage.AppendItems(ctx, req).ok());
  }
}

TEST_F(CompactionRunnerTest, OlderReasoningIsSummarizedAsTextOrDroppedByPolicyAndAudited) {
  for (auto policy : {ModelProfile::ReasoningPolicy::kSummarize, ModelProfile::ReasoningPolicy::kDrop}) {
    SCOPED_TRACE(policy == ModelProfile::ReasoningPolicy::kDrop ? "drop" : "summarize");
    storage_ = NewMemoryStorage(&clock_);
    NewConversation nc;
    nc.key = {"t", "c"};
    nc.model = "p";
    ASSERT_TRUE(storage_->CreateConversation(ctx_, nc).ok());
    AppendReasoningTurns(*storage_, ctx_, 4);
    std::string transcript;
    summarizer_.answer = [&](const SummaryRequest& req) {
      transcript = req.transcript;
      return Short(req);
    };
    ResolvedProfile profile = profile_;
    profile.profile.reasoning = policy;
    auto snap = storage_->LoadContext(ctx_, {"t", "c"});
    ASSERT_TRUE(snap.ok());
    CompactionRunner::Options options;
    options.clock = &clock_;
    CompactionRunner runner(options, storage_.get(), &summarizer_);
    std::vector<CompactionProgress> steps;
    auto out = runner.Run(ctx_, *snap, profile, {}, CompactionMode::kSummarize, "",
                          [&](const CompactionProgress& p) { steps.push_back(p); });
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_GT(out->chunk_id, 0);
    const bool drop = policy == ModelProfile::ReasoningPolicy::kDrop;
    // Three turns are summarized (one is the recent buffer).
    EXPECT_EQ(transcript.find("Assistant (reasoning): Thinking about question 0") != std::string::npos,
              !drop)
        << transcript;
    const CompactionProgress* done = nullptr;
    for (const CompactionProgress& p : steps) {
      if (p.kind == CompactionProgress::Kind::kCompleted && p.tier == Tier::kSummarize) done = &p;
    }
    ASSERT_NE(done, nullptr);
    EXPECT_EQ(done->reasoning_summarized, drop ? 0 : 3);
    EXPECT_EQ(done->reasoning_dropped, drop ? 3 : 0);
    EXPECT_EQ(done->reasoning_kept, 1);
    // The view keeps the recent turn's reasoning verbatim and never shows a
    // summary as reasoning.
    int reasoning_entries = 0;
    for (const ViewEntry& e : out->view.entries) {
      if (e.kind != ItemKind::kReasoning) continue;
      ++reasoning_entries;
      EXPECT_EQ(e.section, Section::kLive);
      EXPECT_NE(e.content.find("question 3"), std::string::npos);
    }
    EXPECT_EQ(reasoning_entries, 1);
    const auto events = AllCompactionEvents(*storage_, ctx_, {"t", "c"});
    ASSERT_TRUE(events.ok());
    bool audited = false;
    for (const CompactionEvent& e : *events) {
      if (e.event != "reasoning_downgraded") continue;
      audited = true;
      EXPECT_NE(e.detail.find(drop ? "\"dropped\":3" : "\"summarized\":3"), std::string::npos)
          << e.detail;
    }
    EXPECT_TRUE(audited);
  }
}

TEST_F(CompactionRunnerTest, ASpanLargerThanTheSummarizersWindowGoesInPieces) {
  AppendTurns(10, 200);
  std::vector<int64_t> transcripts;
  summarizer_.answer = [&](const SummaryRequest& req) {
    transcripts.push_back(static_cast<int64_t>(req.transcript.size()));  // 1 byte a token.
    EXPECT_EQ(req.model, "mini");
    return Short(req);
  };
  ResolvedProfile profile = profile_;
  profile.profile.summarizer.model = "mini";
  profile.profile.summarizer.input_limit = 1400;  // Less the summary and 512 of prompt.
  auto snap = storage_->LoadContext(ctx_, {"t", "c"});
  ASSERT_TRUE(snap.ok());
  CompactionRunner::Options options;
  options.clock = &clock_;
  CompactionRunner runner(options, storage_.get(), &summarizer_);
  auto out = runner.Run(ctx_, *snap, profile, {}, CompactionMode::kSummarize, "", nullptr);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_GT(out->chunk_id, 0);
  ASSERT_GT(transcripts.size(), 1u);
  for (int64_t size : transcripts) EXPECT_LE(size, 1400 - 512);
  EXPECT_TRUE(Has(Events(), "summarized_in_pieces"));
}

}  // namespace
}  // namespace convstate
