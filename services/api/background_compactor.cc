#include "services/api/background_compactor.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "services/api/recall.h"
#include "services/common/task_guard.h"
#include "services/common/log.h"
#include "services/common/status_macros.h"
#include "services/compaction/engine/summaries.h"
#include "services/telemetry/telemetry.h"

namespace convstate {
namespace {

// Conversations whose due time this replica remembers writing.
constexpr size_t kMaxNotedIdle = 100000;
// Conversations claimed per sweep.
constexpr int kIdleClaims = 16;
// The nice value of background compaction threads (of 19): they get a
// small share of a CPU the calls want, and all of an idle one.
constexpr int kBackgroundNiceness = 10;

}  // namespace

BackgroundCompactor::BackgroundCompactor(Options options, Storage* storage,
                                         CompactionRunner* runner, ContextCache* cache,
                                         HistoryCache* history, const ProfileResolver* profiles)
    : options_(std::move(options)),
      storage_(storage),
      runner_(runner),
      cache_(cache),
      history_(history),
      profiles_(profiles),
      // Below the calls' threads in priority: a call never waits for the
      // CPU a background compaction uses.
      background_(std::make_unique<ThreadPool>(std::max(1, options_.threads), 1024,
                                               "background compaction", kBackgroundNiceness)),
      idle_writes_(std::make_unique<ThreadPool>(1, 1024, "idle due times")) {
  if (options_.idle_compaction && options_.idle_scan > absl::ZeroDuration()) {
    idle_sweeper_ = std::make_unique<std::thread>([this] { SweepIdleUntilStopped(); });
  }
}

BackgroundCompactor::~BackgroundCompactor() {
  {
    absl::MutexLock lock(&background_mu_);
    stopping_ = true;
  }
  if (idle_sweeper_ != nullptr) idle_sweeper_->join();
  idle_writes_.reset();
  background_.reset();
}

void BackgroundCompactor::CompactInBackground(const ConversationKey& key) {
  const std::string id = KeyText(key);
  {
    absl::MutexLock lock(&background_mu_);
    if (stopping_ || !background_keys_.insert(id).second) return;
  }
  // The background compaction's span joins the trace of the call that
  // asked for it.
  telemetry::Span* caller = telemetry::CurrentSpan();
  std::optional<telemetry::SpanContext> parent;
  telemetry::Tracer* tracer = nullptr;
  if (caller != nullptr && caller->recording()) {
    parent = caller->context();
    tracer = caller->tracer();
  }
  const bool queued = background_->Schedule([this, key, id, parent, tracer] {
    telemetry::Span span;
    if (tracer != nullptr) {
      span = tracer->StartChild(*parent, "background compaction", telemetry::SpanKind::kInternal);
    }
    telemetry::ScopedSpan scope(&span);
    bool stop;
    {
      absl::MutexLock lock(&background_mu_);
      stop = stopping_;
    }
    if (!stop) {
      // Off the request path, with a deadline of its own.
      const CallContext ctx{options_.compaction.clock->Now() + options_.compaction.lease};
      absl::StatusOr<Counted> loaded = LoadCounted(ctx, key);
      absl::Status status = loaded.status();
      if (status.ok()) {
        // This replica's copy of the history for recall holds everything
        // stored before the compaction moves the boundary: the next call
        // searches up to the new boundary without reading what it passed.
        history_->Refresh(ctx, loaded->snapshot.conversation);
        // Ahead of need, the room a call's recall takes is made too: the
        // call need not compact for it.
        CompactionControl control;
        control.headroom = HistoryRecall::RecallHeadroom(loaded->resolved.profile);
        absl::StatusOr<CompactionOutcome> outcome =
            runner_->Run(ctx, std::move(loaded->snapshot), loaded->resolved, {},
                         CompactionMode::kAhead, "", nullptr, /*background=*/true, control);
        status = outcome.status();
        // The next call reads what was appended since, not the whole context
        // (offered first: the next call may come meanwhile), and its recall
        // nothing.
        if (outcome.ok() && outcome->stored != nullptr) {
          const Conversation stored = outcome->stored->conversation;
          cache_->Offer(key, std::move(outcome->stored));
          history_->Refresh(ctx, stored);
        }
      }
      if (!status.ok() && !absl::IsNotFound(status)) {
        LogWarning("background compaction of ", key.conversation_id, " failed: ",
                   status.ToString());
      }
    }
    absl::MutexLock lock(&background_mu_);
    background_keys_.erase(id);
  });
  if (!queued) {
    absl::MutexLock lock(&background_mu_);
    background_keys_.erase(id);
  }
}

absl::StatusOr<BackgroundCompactor::Counted> BackgroundCompactor::LoadCounted(
    const CallContext& ctx, const ConversationKey& key) {
  // The context this replica keeps, brought up to date (a read of what was
  // appended since, when it keeps one).
  ASSIGN_OR_RETURN(std::shared_ptr<const CachedContext> current,
                   cache_->Current(ctx, *storage_, key));
  cache_->Offer(key, current->snapshot);
  ContextSnapshot snapshot = *current->snapshot;
  ASSIGN_OR_RETURN(ResolvedProfile resolved, profiles_->ProfileOf(snapshot.conversation));
  RETURN_IF_ERROR(profiles_->EnsureCounts(ctx, snapshot, resolved));
  return Counted{std::move(snapshot), std::move(resolved)};
}

void BackgroundCompactor::NoteBuilt(const ConversationKey& key, Band band,
                                    int64_t prompt_cache_ttl_s) {
  if (!options_.idle_compaction || prompt_cache_ttl_s <= 0 || band < options_.idle_band) return;
  const absl::Duration ttl = absl::Seconds(prompt_cache_ttl_s);
  const absl::Time now = options_.compaction.clock->Now();
  // Due a quarter lifetime late, so that the write can wait that long: at
  // the due time the last call is always a whole lifetime old.
  const absl::Time due = now + ttl + ttl / 4;
  const std::string id = KeyText(key);
  {
    absl::MutexLock lock(&idle_mu_);
    auto it = idle_noted_.find(id);
    if (it != idle_noted_.end() && it->second >= now + ttl) return;
    if (idle_noted_.size() >= kMaxNotedIdle) idle_noted_.clear();
    idle_noted_[id] = due;
  }
  idle_writes_->Schedule([this, key, due] {
    const CallContext ctx{options_.compaction.clock->Now() + absl::Seconds(5)};
    if (absl::Status s = storage_->SetIdleDue(ctx, key, due); !s.ok() && !absl::IsNotFound(s)) {
      LogWarning("could not record when ", key.conversation_id, " is idle: ", s.ToString());
    }
  });
}

int BackgroundCompactor::SweepIdle() {
  const absl::Time now = options_.compaction.clock->Now();
  const CallContext ctx{now + absl::Seconds(5)};
  absl::StatusOr<std::vector<ConversationKey>> due = storage_->ClaimIdle(ctx, now, kIdleClaims);
  if (!due.ok()) {
    LogWarning("could not look for idle conversations: ", due.status().ToString());
    return 0;
  }
  int compacted = 0;
  for (const ConversationKey& key : *due) compacted += CompactIdle(key) ? 1 : 0;
  return compacted;
}

bool BackgroundCompactor::CompactIdle(const ConversationKey& key) {
  {
    absl::MutexLock lock(&idle_mu_);
    idle_noted_.erase(KeyText(key));
  }
  const CallContext ctx{options_.compaction.clock->Now() + options_.compaction.lease};
  absl::StatusOr<Counted> loaded = LoadCounted(ctx, key);
  if (!loaded.ok()) {
    if (!absl::IsNotFound(loaded.status())) {
      LogWarning("idle compaction of ", key.conversation_id, ": ", loaded.status().ToString());
    }
    return false;
  }
  const ModelProfile& profile = loaded->resolved.profile;
  const ContextView view = ViewAsBuilt(loaded->snapshot, loaded->resolved);
  const Band band = BandOf(view.tokens.total, profile);
  auto count = [&](const char* outcome) {
    if (options_.compaction.telemetry != nullptr) {
      options_.compaction.telemetry->instruments().idle_compactions->Add(
          1, {{"convstate.compaction.outcome", outcome}});
    }
  };
  // Called or compacted meanwhile: nothing to do.
  if (!profile.compaction_enabled || band < options_.idle_band) {
    count("nothing");
    return false;
  }
  const int64_t compaction_version = loaded->snapshot.conversation.compaction_version;
  // The cache is cold: the cheapest tiers until the view is back under the
  // soft threshold, as Compact(auto) does.
  absl::StatusOr<CompactionOutcome> outcome =
      runner_->Run(ctx, std::move(loaded->snapshot), loaded->resolved, {}, CompactionMode::kAuto,
                  "", nullptr, /*background=*/true);
  if (!outcome.ok()) {
    LogWarning("idle compaction of ", key.conversation_id, " failed: ",
               outcome.status().ToString());
    return false;
  }
  if (outcome->compaction_version == compaction_version) {
    count("nothing");
    return false;
  }
  const CompactionEvent idle =
      AuditRow("idle", std::nullopt, outcome->tokens_before, outcome->view.tokens.total,
               DetailOf({{"prompt_cache_ttl_s", profile.prompt_cache_ttl_s},
                         {"band", BandName(band)},
                         {"replica", options_.compaction.holder},
                         {"summary_chunk_id", outcome->chunk_id}}));
  if (absl::Status s = storage_->RecordCompactionEvents(ctx, key, {idle}); !s.ok()) {
    LogWarning("could not record the idle compaction of ", key.conversation_id, ": ",
               s.ToString());
  }
  count("compacted");
  LogInfo("idle compaction of ", key.conversation_id, ": ", outcome->tokens_before, " -> ",
          outcome->view.tokens.total, " tokens");
  return true;
}

void BackgroundCompactor::SweepIdleUntilStopped() {
  while (true) {
    {
      absl::MutexLock lock(&background_mu_);
      background_mu_.AwaitWithTimeout(absl::Condition(&stopping_), options_.idle_scan);
      if (stopping_) return;
    }
    // Whatever one sweep throws ends that sweep, not the process.
    RunGuarded("idle sweep", [this] { SweepIdle(); });
  }
}

}  // namespace convstate
