#ifndef CONVSTATE_SERVICES_API_WIRE_H_
#define CONVSTATE_SERVICES_API_WIRE_H_

// Conversions between the wire (convstate.v1 messages) and the domain model,
// and the API's page tokens. No policy: what a call does is
// conversation_service's.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "convstate/v1/convstate.pb.h"
#include "services/compaction/recall/recall.h"
#include "services/compaction/view/context_view.h"
#include "services/core/types.h"

namespace convstate {

void SetTimestamp(absl::Time t, google::protobuf::Timestamp* out);
Metadata ToMetadata(const google::protobuf::Map<std::string, std::string>& in);
void FromMetadata(const Metadata& in, google::protobuf::Map<std::string, std::string>* out);
ProfileOverrides ToOverrides(const v1::ProfileOverrides& in);
void FromOverrides(const ProfileOverrides& o, v1::ProfileOverrides* out);
ItemData ToItemData(const v1::NewItem& item);
CompactionPolicy ToPolicy(const v1::CompactionPolicy& in);
void FromPolicy(const CompactionPolicy& policy, v1::CompactionPolicy* out);

v1::Conversation ToProto(const Conversation& c);
void ToProto(const Item& item, v1::Item* out);
void ToProto(const TokenBreakdown& tokens, v1::TokenBreakdown* out);
// Moves the entries' texts into `out`: each is copied once, into the
// message, on its way from storage to the wire.
void ToProto(ContextView&& view, v1::BuildContextResponse* out);
void ToProto(const LedgerFact& f, v1::LedgerFact* out);
void ToProto(const SummaryChunk& c, v1::SummaryChunk* out);
void ToProto(const CompactionEvent& e, v1::CompactionEvent* out);
void ToProto(RecalledPassage p, v1::RecalledPassage* out);

// A request's page size: `default_size` for 0, capped at 1000;
// INVALID_ARGUMENT when negative.
absl::StatusOr<int> PageSize(int32_t requested, int default_size);

// Page tokens are opaque to clients: base64 of "<kind>:<position>". A token
// is the client's bytes, so what one holds is checked before it goes
// anywhere: INVALID_ARGUMENT unless it is of `kind` and holds an id, or a
// number in [min, max].
std::string EncodePageToken(absl::string_view kind, absl::string_view position);
absl::StatusOr<std::string> DecodeIdToken(absl::string_view kind, absl::string_view token);
absl::StatusOr<int64_t> DecodeNumberToken(absl::string_view kind, absl::string_view token,
                                          int64_t min, int64_t max);

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_API_WIRE_H_
