#ifndef CONVSTATE_STORAGE_FORWARDING_STORAGE_H_
#define CONVSTATE_STORAGE_FORWARDING_STORAGE_H_

#include <optional>
#include <string>
#include <vector>

#include "storage/storage.h"

namespace convstate {

// A Storage that passes every call to `base`: tests derive from it and
// override the calls they make fail, slow or race.
class ForwardingStorage : public Storage {
 public:
  explicit ForwardingStorage(Storage* base) : base_(base) {}

  absl::Status Ping(const CallContext& c) override { return base_->Ping(c); }
  absl::StatusOr<Conversation> CreateConversation(const CallContext& c,
                                                  const NewConversation& n) override {
    return base_->CreateConversation(c, n);
  }
  absl::StatusOr<Conversation> GetConversation(const CallContext& c,
                                               const ConversationKey& k) override {
    return base_->GetConversation(c, k);
  }
  absl::StatusOr<RedactResult> RedactItems(const CallContext& c,
                                           const RedactRequest& r) override {
    return base_->RedactItems(c, r);
  }
  absl::StatusOr<ProposalRecord> SaveProposal(const CallContext& c, const ConversationKey& k,
                                              const std::string& b, absl::Duration t,
                                              const TenantLimits& l, int64_t v) override {
    return base_->SaveProposal(c, k, b, t, l, v);
  }
  absl::StatusOr<ProposalRecord> GetProposal(const CallContext& c, const ConversationKey& k,
                                             int64_t id) override {
    return base_->GetProposal(c, k, id);
  }
  absl::Status SetIdleDue(const CallContext& c, const ConversationKey& k,
                          std::optional<absl::Time> due) override {
    return base_->SetIdleDue(c, k, due);
  }
  absl::StatusOr<std::vector<ConversationKey>> ClaimIdle(const CallContext& c, absl::Time now,
                                                         int limit) override {
    return base_->ClaimIdle(c, now, limit);
  }
  absl::StatusOr<RevertResult> RevertCompaction(const CallContext& c,
                                                const RevertRequest& r) override {
    return base_->RevertCompaction(c, r);
  }
  absl::StatusOr<TenantUsage> GetTenantUsage(const CallContext& c,
                                             const std::string& t) override {
    return base_->GetTenantUsage(c, t);
  }
  absl::StatusOr<Page<Conversation>> ListConversations(const CallContext& c, const std::string& t,
                                                       const std::string& a,
                                                       const PageLimit& l) override {
    return base_->ListConversations(c, t, a, l);
  }
  absl::StatusOr<Conversation> ForkConversation(const CallContext& c,
                                                const ForkRequest& r) override {
    return base_->ForkConversation(c, r);
  }
  absl::StatusOr<RewindResult> RewindConversation(const CallContext& c,
                                                  const RewindRequest& r) override {
    return base_->RewindConversation(c, r);
  }
  absl::StatusOr<Page<Conversation>> ListForks(const CallContext& c, const ConversationKey& k,
                                               const std::string& a,
                                               const PageLimit& l) override {
    return base_->ListForks(c, k, a, l);
  }
  absl::StatusOr<int64_t> DeleteConversation(const CallContext& c,
                                             const ConversationKey& k) override {
    return base_->DeleteConversation(c, k);
  }
  absl::StatusOr<AppendResult> AppendItems(const CallContext& c, const AppendRequest& r) override {
    return base_->AppendItems(c, r);
  }
  absl::StatusOr<HistoryHits> SearchHistory(const CallContext& c,
                                            const HistorySearch& s) override {
    return base_->SearchHistory(c, s);
  }
  absl::StatusOr<Page<Item>> ListItems(const CallContext& c, const ConversationKey& k, int64_t a,
                                       const PageLimit& l) override {
    return base_->ListItems(c, k, a, l);
  }
  absl::StatusOr<ContextSnapshot> LoadContext(const CallContext& c,
                                              const ConversationKey& k) override {
    return base_->LoadContext(c, k);
  }
  absl::StatusOr<ContextDelta> LoadContextSince(const CallContext& c, const ConversationKey& k,
                                                const Conversation* held) override {
    return base_->LoadContextSince(c, k, held);
  }
  absl::StatusOr<CompactionResult> CommitCompaction(const CallContext& c,
                                                    const CompactionCommit& m) override {
    return base_->CommitCompaction(c, m);
  }
  absl::StatusOr<std::optional<CompactionLease>> TryAcquireCompactionLease(
      const CallContext& c, const ConversationKey& k, const std::string& h,
      absl::Duration d) override {
    return base_->TryAcquireCompactionLease(c, k, h, d);
  }
  absl::Status ReleaseCompactionLease(const CallContext& c, const ConversationKey& k,
                                      const CompactionLease& l) override {
    return base_->ReleaseCompactionLease(c, k, l);
  }
  absl::StatusOr<Item> SetPinned(const CallContext& c, const ConversationKey& k, int64_t s,
                                 bool p) override {
    return base_->SetPinned(c, k, s, p);
  }
  absl::Status RecordCompactionEvents(const CallContext& c, const ConversationKey& k,
                                      const std::vector<CompactionEvent>& e) override {
    return base_->RecordCompactionEvents(c, k, e);
  }
  absl::StatusOr<ContextSnapshot> LoadContextAt(const CallContext& c, const ConversationKey& k,
                                                int64_t v, int64_t cv) override {
    return base_->LoadContextAt(c, k, v, cv);
  }
  absl::StatusOr<Conversation> UpdateConversation(const CallContext& c, const ConversationKey& k,
                                                 const ConversationUpdate& u) override {
    return base_->UpdateConversation(c, k, u);
  }
  absl::Status SaveTokenCounts(const CallContext& c, const ConversationKey& k,
                               const TokenRecount& r) override {
    return base_->SaveTokenCounts(c, k, r);
  }
  absl::StatusOr<Conversation> RecordProviderOverflow(const CallContext& c,
                                                     const ConversationKey& k, double f,
                                                     int64_t l, const CompactionEvent& e) override {
    return base_->RecordProviderOverflow(c, k, f, l, e);
  }
  absl::StatusOr<Page<SummaryChunk>> ListSummaries(const CallContext& c, const ConversationKey& k,
                                                   bool s, int64_t a, const PageLimit& l) override {
    return base_->ListSummaries(c, k, s, a, l);
  }
  absl::StatusOr<Page<CompactionEvent>> ListCompactionEvents(const CallContext& c,
                                                             const ConversationKey& k, int64_t a,
                                                             const PageLimit& l) override {
    return base_->ListCompactionEvents(c, k, a, l);
  }

 protected:
  Storage* const base_;
};

}  // namespace convstate

#endif  // CONVSTATE_STORAGE_FORWARDING_STORAGE_H_
