// Idle compaction: a conversation above its idle band whose last
// BuildContext is older than its prompt cache's lifetime is compacted in
// the background, under the lease, so that the next call neither waits for
// a compaction nor throws a warm cache away. Each BuildContext above the
// band pushes the conversation's due time forward (written at most once
// every quarter lifetime, off the call path); a sweeper on every replica
// claims what is due, each conversation by one replica only.

#include <string>

#include "absl/strings/str_cat.h"
#include "services/api/conversation_service.h"
#include "services/common/task_guard.h"
#include "services/common/log.h"
#include "services/compaction/engine/summaries.h"

namespace convstate {
namespace {

// Conversations whose due time this replica remembers writing.
constexpr size_t kMaxNotedIdle = 100000;
// Conversations claimed per sweep.
constexpr int kIdleClaims = 16;

}  // namespace

void ConversationService::NoteBuilt(const ConversationKey& key, Band band,
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

int ConversationService::SweepIdle() {
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

bool ConversationService::CompactIdle(const ConversationKey& key) {
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
      runner_.Run(ctx, std::move(loaded->snapshot), loaded->resolved, {}, CompactionMode::kAuto,
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

void ConversationService::SweepIdleUntilStopped() {
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
