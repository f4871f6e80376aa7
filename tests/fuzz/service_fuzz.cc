// Fuzzes the API below gRPC: the first byte picks a request type, the rest
// is its wire form, parsed as the gRPC adapter parses it (with the same
// UTF-8 check), then served by a ConversationService on memory storage
// holding one conversation of a few turns, summarized once, with a dry
// run's proposal. Covers request parsing and validation, page tokens,
// appends, views with pending input and recall, compaction and pins, keep
// rules, edited proposals, searches and continuations. Any status is fine;
// a crash, a sanitizer report or a view that is not valid UTF-8 is not.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "convstate/v1/convstate.pb.h"
#include "services/compaction/summarizers/extractive.h"
#include "services/api/conversation_service.h"
#include "services/api/wire_check.h"
#include "services/common/utf8.h"
#include "services/profiles/model_registry.h"
#include "services/compaction/summarizers/summarizer.h"
#include "services/grpc/protobuf_log.h"
#include "storage/memory_storage.h"

namespace convstate {
namespace {

const ModelRegistry& Models() {
  // Small windows, so that a few appends reach the bands.
  static const auto* const kModels = ModelRegistry::FromText(R"pb(
    default_profile: "tiny"
    profiles {
      name: "tiny"
      context_window: 600
      output_reserve: 100
      tokenizer { encoding: "approximate" bytes_per_token: 4.0 }
    }
  )pb", "").value().release();
  return *kModels;
}

template <typename Req>
bool Parse(const uint8_t* data, size_t size, Req* req) {
  const std::string wire(reinterpret_cast<const char*>(data), size);
  if (req->ParseFromString(wire)) return true;
  (void)FindInvalidUtf8(req->GetDescriptor(), wire);
  return false;
}

void Check(const absl::StatusOr<v1::BuildContextResponse>& view) {
  if (!view.ok()) return;
  for (const v1::ContextEntry& e : view->entries()) {
    if (!IsValidUtf8(e.content())) std::abort();
  }
}

}  // namespace
}  // namespace convstate

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace convstate;
  if (size == 0) return 0;
  // libprotobuf's complaints about invalid UTF-8, counted as the server
  // counts them rather than printed for every input.
  static const bool kRouted = (RouteProtobufLogs(nullptr), true);
  (void)kRouted;
  auto storage = NewMemoryStorage();
  auto summarizer = NewExtractiveSummarizer();
  ConversationService::Options options;
  options.background_compaction = false;
  ConversationService service(options, &Models(), storage.get(), summarizer.get());
  const CallContext ctx;
  {
    v1::CreateConversationRequest create;
    create.set_conversation_id("c");
    create.set_model("any");
    create.set_system_prompt("You are terse.");
    (void)service.CreateConversation(ctx, create);
    for (int i = 0; i < 4; ++i) {
      v1::AppendTurnRequest append;
      append.set_conversation_id("c");
      v1::NewItem* item = append.add_items();
      item->set_role(v1::ROLE_USER);
      item->set_kind(v1::ITEM_KIND_MESSAGE);
      item->set_content("Deploy web-" + std::to_string(i) + " to eu-west-1, ticket INC-77" +
                        std::to_string(i) + ".");
      (void)service.AppendTurn(ctx, append);
    }
    // Something compacted (so recall and searches have a history to
    // read), and a proposal (id 1) for ApplyCompaction to edit.
    v1::CompactRequest summarize;
    summarize.set_conversation_id("c");
    summarize.set_mode(v1::CompactRequest::MODE_SUMMARIZE);
    (void)service.Compact(ctx, summarize);
    for (int i = 4; i < 6; ++i) {
      v1::AppendTurnRequest append;
      append.set_conversation_id("c");
      v1::NewItem* item = append.add_items();
      item->set_role(v1::ROLE_USER);
      item->set_kind(v1::ITEM_KIND_MESSAGE);
      item->set_content("Roll back web-" + std::to_string(i) + " if the error rate passes 2%.");
      (void)service.AppendTurn(ctx, append);
    }
    summarize.set_dry_run(true);
    (void)service.Compact(ctx, summarize);
  }
  const uint8_t kind = data[0] % 13;
  ++data;
  --size;
  switch (kind) {
    case 0: {
      v1::AppendTurnRequest r;
      if (Parse(data, size, &r)) (void)service.AppendTurn(ctx, r);
      break;
    }
    case 1: {
      v1::BuildContextRequest r;
      if (Parse(data, size, &r)) {
        Check(service.BuildContext(ctx, r));
        (void)service.BuildContextWire(ctx, r);
      }
      break;
    }
    case 2: {
      v1::CreateConversationRequest r;
      if (Parse(data, size, &r)) (void)service.CreateConversation(ctx, r);
      break;
    }
    case 3: {
      v1::ListItemsRequest r;
      if (Parse(data, size, &r)) (void)service.ListItems(ctx, r);
      break;
    }
    case 4: {
      v1::ListConversationsRequest r;
      if (Parse(data, size, &r)) (void)service.ListConversations(ctx, r);
      break;
    }
    case 5: {
      v1::CompactRequest r;
      if (Parse(data, size, &r)) (void)service.Compact(ctx, r);
      break;
    }
    case 6: {
      v1::ExpandSummaryRequest r;
      if (Parse(data, size, &r)) (void)service.ExpandSummary(ctx, r);
      break;
    }
    case 7: {
      v1::UpdateConversationRequest r;
      if (Parse(data, size, &r)) (void)service.UpdateConversation(ctx, r);
      break;
    }
    case 8: {
      v1::PinItemRequest r;
      if (Parse(data, size, &r)) (void)service.PinItem(ctx, r);
      break;
    }
    case 9: {
      v1::RedactItemsRequest r;
      if (Parse(data, size, &r)) (void)service.RedactItems(ctx, r);
      break;
    }
    case 10: {
      v1::SearchHistoryRequest r;
      if (Parse(data, size, &r)) (void)service.SearchHistory(ctx, r);
      break;
    }
    case 11: {
      v1::InspectContextRequest r;
      if (Parse(data, size, &r)) (void)service.InspectContext(ctx, r);
      break;
    }
    default: {
      v1::ApplyCompactionRequest r;
      if (Parse(data, size, &r)) (void)service.ApplyCompaction(ctx, r);
      break;
    }
  }
  // Whatever happened, the conversation's view is still valid UTF-8.
  v1::BuildContextRequest view;
  view.set_conversation_id("c");
  Check(service.BuildContext(ctx, view));
  return 0;
}
