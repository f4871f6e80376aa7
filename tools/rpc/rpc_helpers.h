#ifndef CONVSTATE_TOOLS_RPC_RPC_HELPERS_H_
#define CONVSTATE_TOOLS_RPC_RPC_HELPERS_H_

// Small helpers for clients of convstate.v1 in tests and tools.

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "convstate/v1/convstate.grpc.pb.h"
#include "convstate/v1/convstate.pb.h"
#include "grpcpp/client_context.h"

namespace convstate::rpc {

// Gives the call `timeout` from now.
inline void SetDeadline(grpc::ClientContext& ctx, absl::Duration timeout = absl::Seconds(30)) {
  ctx.set_deadline(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(timeout));
}

// Calls `done` until it returns true, at most until `timeout` has passed,
// pausing briefly between calls: how tests wait on state another process
// changes, instead of sleeping a fixed time. Returns the last answer.
inline bool WaitUntil(const std::function<bool()>& done,
                      absl::Duration timeout = absl::Seconds(20)) {
  const absl::Time until = absl::Now() + timeout;
  while (true) {
    if (done()) return true;
    if (absl::Now() >= until) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
}

inline v1::NewItem MakeItem(v1::Role role, v1::ItemKind kind, std::string content,
                            std::string tool_name = "", std::string tool_call_id = "") {
  v1::NewItem item;
  item.set_role(role);
  item.set_kind(kind);
  item.set_content(std::move(content));
  item.set_tool_name(std::move(tool_name));
  item.set_tool_call_id(std::move(tool_call_id));
  return item;
}

inline v1::NewItem Message(v1::Role role, std::string content) {
  return MakeItem(role, v1::ITEM_KIND_MESSAGE, std::move(content));
}

// Every item conversation `id` stores, appended to `items` page by page
// (ListItems, 1,000 at a time, each page under its own deadline); the
// first failed page's status, with the pages before it in `items`.
inline grpc::Status ListAllItems(v1::ConversationState::Stub& stub, const std::string& id,
                                 std::vector<v1::Item>& items) {
  v1::ListItemsRequest req;
  req.set_conversation_id(id);
  req.set_page_size(1000);
  do {
    v1::ListItemsResponse page;
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    const grpc::Status s = stub.ListItems(&ctx, req, &page);
    if (!s.ok()) return s;
    items.insert(items.end(), page.items().begin(), page.items().end());
    req.set_page_token(page.next_page_token());
  } while (!req.page_token().empty());
  return grpc::Status::OK;
}

}  // namespace convstate::rpc

#endif  // CONVSTATE_TOOLS_RPC_RPC_HELPERS_H_
