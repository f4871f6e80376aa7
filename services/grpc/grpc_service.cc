#include "services/grpc/grpc_service.h"

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "services/api/wire_check.h"
#include "services/common/log.h"
#include "services/grpc/byte_buffers.h"
#include "services/grpc/status.h"

namespace convstate {
namespace {

absl::Time DeadlineOf(const grpc::CallbackServerContext& ctx) {
  const std::chrono::system_clock::time_point deadline = ctx.deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) return absl::InfiniteFuture();
  return absl::FromChrono(deadline);
}

// Parses `buffer` into `message`. A request protobuf refuses is
// INVALID_ARGUMENT, naming the field when it is a string with invalid UTF-8.
absl::Status ParseRequest(const grpc::ByteBuffer& buffer, google::protobuf::Message* message) {
  const std::optional<std::string> wire = BytesOf(buffer);
  if (!wire.has_value()) return absl::InvalidArgumentError("unreadable request");
  if (message->ParseFromString(*wire)) return absl::OkStatus();
  if (auto field = FindInvalidUtf8(message->GetDescriptor(), *wire)) {
    return absl::InvalidArgumentError(absl::StrCat(*field, ": not valid UTF-8"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("request is not a valid ", message->GetDescriptor()->full_name()));
}

grpc::ByteBuffer Serialize(const google::protobuf::Message& message) {
  std::string wire = message.SerializeAsString();
  grpc::Slice slice(std::move(wire));
  return grpc::ByteBuffer(&slice, 1);
}

grpc::ByteBuffer Serialize(const std::shared_ptr<const std::string>& wire) {
  return SharedBytes(wire);
}

// Logged here, where the error is handed to the client: failures that are
// the server's or the database's, not the caller's.
void LogServerError(const char* method, const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kDataLoss:
      LogWarning(method, " failed: ", status.ToString());
      break;
    default:
      break;
  }
}

constexpr char kServicePrefix[] = "convstate.v1.ConversationState/";

// "OK", "NOT_FOUND", ...: gRPC's codes are Abseil's, number for number (the
// same correspondence ToGrpcStatus relies on).
std::string CodeName(grpc::StatusCode code) {
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
}

// The codes that are the server's fault; the others are the caller's
// business and leave the span's status unset.
bool IsServerError(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::UNKNOWN:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::UNIMPLEMENTED:
    case grpc::StatusCode::INTERNAL:
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DATA_LOSS:
      return true;
    default:
      return false;
  }
}

absl::string_view MetadataValue(const grpc::CallbackServerContext& ctx, const char* key) {
  const auto& metadata = ctx.client_metadata();
  auto it = metadata.find(key);
  if (it == metadata.end()) return {};
  return absl::string_view(it->second.data(), it->second.size());
}

// One RPC as telemetry sees it: the server span (made current on the
// worker that runs the call) and the duration metric. Finish once.
class RpcTrace {
 public:
  RpcTrace(telemetry::Telemetry* t, const grpc::CallbackServerContext& ctx, const char* method)
      : telemetry_(t), method_(absl::StrCat(kServicePrefix, method)), start_(absl::Now()) {
    const absl::string_view traceparent = MetadataValue(ctx, "traceparent");
    std::optional<telemetry::SpanContext> parent;
    // A malformed traceparent is ignored: the call starts a trace of its own.
    if (!traceparent.empty()) parent = telemetry::ParseTraceparent(
        traceparent, MetadataValue(ctx, "tracestate"));
    span_ = t->tracer()->StartRoot(method_, telemetry::SpanKind::kServer,
                                   parent.has_value() ? &*parent : nullptr);
    if (span_.recording()) {
      span_.SetAttribute("rpc.system.name", "grpc");
      span_.SetAttribute("rpc.method", method_);
    }
  }
  telemetry::Span* span() { return &span_; }

  void Finish(const grpc::Status& status) {
    const std::string code = CodeName(status.error_code());
    if (span_.recording()) {
      span_.SetAttribute("rpc.response.status_code", code);
      if (IsServerError(status.error_code())) {
        span_.SetAttribute("error.type", code);
        span_.SetError(status.error_message());
      }
      span_.End();
    }
    telemetry_->instruments().rpc_duration->Record(
        absl::ToDoubleSeconds(absl::Now() - start_),
        {{"rpc.system.name", "grpc"}, {"rpc.method", method_}, {"rpc.response.status_code", code}});
  }

 private:
  telemetry::Telemetry* const telemetry_;
  const std::string method_;
  const absl::Time start_;
  telemetry::Span span_;
};

const grpc::Status kOverloaded(grpc::StatusCode::UNAVAILABLE,
                               "server overloaded or shutting down; retry with backoff");

// Writes events as they come, one write in flight at a time, then the
// status once every queued event is out. Send and Close may be called from
// any thread. StartWrite and Finish are called with no lock held: gRPC may
// run OnWriteDone or OnDone inline from them.
//
// Two owners share the object: gRPC, until OnDone, and the producer (the
// worker computing the view), until Release. It is deleted when both are
// done, so the producer may call Send, Close or Cancelled after the client
// went away: they turn into no-ops once the call has ended.
class EventWriter final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  void Send(grpc::ByteBuffer event) {
    mu_.Lock();
    if (closing_ || done_) {  // Nothing may follow Close; no one reads after OnDone.
      mu_.Unlock();
      return;
    }
    queue_.push_back(std::move(event));
    Step();
  }
  void Close(grpc::Status status) {
    mu_.Lock();
    if (closing_ || done_) {
      mu_.Unlock();
      return;
    }
    closing_ = true;
    status_ = std::move(status);
    Step();
  }
  // True once the client cancelled or the call ended.
  bool Cancelled() const { return cancelled_.load(std::memory_order_acquire); }
  // The producer is done with this object.
  void Release() { Unref(); }

  void OnWriteDone(bool ok) override {
    mu_.Lock();
    writing_ = false;
    queue_.pop_front();
    if (!ok) {  // The client went away: nothing more can be written.
      cancelled_.store(true, std::memory_order_release);
      queue_.clear();
      if (!closing_) {
        closing_ = true;
        status_ = grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
      }
    }
    Step();
  }
  void OnCancel() override { cancelled_.store(true, std::memory_order_release); }
  void OnDone() override {
    {
      absl::MutexLock lock(&mu_);
      done_ = true;
      queue_.clear();
    }
    cancelled_.store(true, std::memory_order_release);
    Unref();
  }

 private:
  ~EventWriter() override = default;

  void Unref() {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  // Called with mu_ held: decides the next step, releases mu_, takes it.
  void Step() ABSL_UNLOCK_FUNCTION(mu_) {
    if (writing_ || finished_ || done_) {
      mu_.Unlock();
    } else if (!queue_.empty()) {
      writing_ = true;
      // A deque keeps references valid on push_back; only OnWriteDone pops.
      grpc::ByteBuffer* next = &queue_.front();
      mu_.Unlock();
      StartWrite(next);
    } else if (closing_) {
      finished_ = true;
      const grpc::Status status = status_;
      mu_.Unlock();
      Finish(status);  // May run OnDone inline; the producer's reference keeps this alive.
    } else {
      mu_.Unlock();
    }
  }

  // gRPC's reference and the producer's.
  std::atomic<int> refs_{2};
  std::atomic<bool> cancelled_{false};
  absl::Mutex mu_;
  std::deque<grpc::ByteBuffer> queue_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
};

v1::BuildContextEvent ToEvent(const CompactionProgress& p) {
  v1::BuildContextEvent event;
  switch (p.kind) {
    case CompactionProgress::Kind::kStarted:
      event.mutable_compaction_started()->set_tier(p.tier);
      event.mutable_compaction_started()->set_tokens_before(p.tokens_before);
      break;
    case CompactionProgress::Kind::kCompleted:
      event.mutable_compaction_completed()->set_tier(p.tier);
      event.mutable_compaction_completed()->set_tokens_before(p.tokens_before);
      event.mutable_compaction_completed()->set_tokens_after(p.tokens_after);
      event.mutable_compaction_completed()->set_recall(p.recall);
      if (p.before_tokens.has_value()) {
        ToProto(*p.before_tokens, event.mutable_compaction_completed()->mutable_before());
      }
      if (p.after_tokens.has_value()) {
        ToProto(*p.after_tokens, event.mutable_compaction_completed()->mutable_after());
      }
      event.mutable_compaction_completed()->set_reasoning_kept(p.reasoning_kept);
      event.mutable_compaction_completed()->set_reasoning_summarized(p.reasoning_summarized);
      event.mutable_compaction_completed()->set_reasoning_dropped(p.reasoning_dropped);
      break;
    case CompactionProgress::Kind::kFailed:
      event.mutable_compaction_failed()->set_tier(p.tier);
      event.mutable_compaction_failed()->set_reason(p.reason);
      break;
  }
  return event;
}

}  // namespace

GrpcService::GrpcService(ConversationService* service, ThreadPool* workers,
                         telemetry::Telemetry* telemetry)
    : service_(service), workers_(workers), telemetry_(telemetry) {}

template <typename Req, typename Resp>
GrpcService::Reactor* GrpcService::Unary(
    const char* method_name, Context* ctx, const ByteBuffer* request, ByteBuffer* response,
    absl::StatusOr<Resp> (ConversationService::*method)(const CallContext&, const Req&)) {
  Reactor* reactor = ctx->DefaultReactor();
  auto trace = std::make_shared<RpcTrace>(telemetry_, *ctx, method_name);
  auto req = std::make_shared<Req>();
  if (absl::Status parsed = ParseRequest(*request, req.get()); !parsed.ok()) {
    const grpc::Status status = ToGrpcStatus(parsed);
    trace->Finish(status);
    reactor->Finish(status);
    return reactor;
  }
  // The context lives until Finish, which the worker calls last.
  const CallContext call{DeadlineOf(*ctx), [ctx] { return ctx->IsCancelled(); }};
  const bool queued = workers_->Schedule([this, method_name, method, call, req, response,
                                          reactor, trace] {
    grpc::Status status;
    {
      telemetry::ScopedSpan scope(trace->span());
      absl::StatusOr<Resp> result = (service_->*method)(call, *req);
      if (result.ok()) {
        *response = Serialize(*result);
      } else {
        LogServerError(method_name, result.status());
      }
      status = ToGrpcStatus(result.status());
    }
    trace->Finish(status);
    reactor->Finish(status);
  });
  if (!queued) {
    trace->Finish(kOverloaded);
    reactor->Finish(kOverloaded);
  }
  return reactor;
}

GrpcService::Reactor* GrpcService::CreateConversation(Context* ctx, const ByteBuffer* req,
                                                      ByteBuffer* resp) {
  return Unary("CreateConversation", ctx, req, resp, &ConversationService::CreateConversation);
}

GrpcService::Reactor* GrpcService::GetConversation(Context* ctx, const ByteBuffer* req,
                                                   ByteBuffer* resp) {
  return Unary("GetConversation", ctx, req, resp, &ConversationService::GetConversation);
}

GrpcService::Reactor* GrpcService::ListConversations(Context* ctx, const ByteBuffer* req,
                                                     ByteBuffer* resp) {
  return Unary("ListConversations", ctx, req, resp, &ConversationService::ListConversations);
}

GrpcService::Reactor* GrpcService::DeleteConversation(Context* ctx, const ByteBuffer* req,
                                                      ByteBuffer* resp) {
  return Unary("DeleteConversation", ctx, req, resp, &ConversationService::DeleteConversation);
}

GrpcService::Reactor* GrpcService::AppendTurn(Context* ctx, const ByteBuffer* req,
                                              ByteBuffer* resp) {
  return Unary("AppendTurn", ctx, req, resp, &ConversationService::AppendTurn);
}

GrpcService::Reactor* GrpcService::ListItems(Context* ctx, const ByteBuffer* req,
                                             ByteBuffer* resp) {
  return Unary("ListItems", ctx, req, resp, &ConversationService::ListItems);
}

GrpcService::Reactor* GrpcService::BuildContext(Context* ctx, const ByteBuffer* req,
                                                ByteBuffer* resp) {
  return Unary("BuildContext", ctx, req, resp, &ConversationService::BuildContextWire);
}

GrpcService::Reactor* GrpcService::InspectContext(Context* ctx, const ByteBuffer* req,
                                                  ByteBuffer* resp) {
  return Unary("InspectContext", ctx, req, resp, &ConversationService::InspectContext);
}

GrpcService::Reactor* GrpcService::Compact(Context* ctx, const ByteBuffer* req,
                                           ByteBuffer* resp) {
  return Unary("Compact", ctx, req, resp, &ConversationService::Compact);
}

GrpcService::Reactor* GrpcService::ListSummaries(Context* ctx, const ByteBuffer* req,
                                                 ByteBuffer* resp) {
  return Unary("ListSummaries", ctx, req, resp, &ConversationService::ListSummaries);
}

GrpcService::Reactor* GrpcService::ExpandSummary(Context* ctx, const ByteBuffer* req,
                                                 ByteBuffer* resp) {
  return Unary("ExpandSummary", ctx, req, resp, &ConversationService::ExpandSummary);
}

GrpcService::Reactor* GrpcService::ListCompactionEvents(Context* ctx, const ByteBuffer* req,
                                                        ByteBuffer* resp) {
  return Unary("ListCompactionEvents", ctx, req, resp, &ConversationService::ListCompactionEvents);
}

GrpcService::Reactor* GrpcService::PinItem(Context* ctx, const ByteBuffer* req, ByteBuffer* resp) {
  return Unary("PinItem", ctx, req, resp, &ConversationService::PinItem);
}

GrpcService::Reactor* GrpcService::UnpinItem(Context* ctx, const ByteBuffer* req,
                                             ByteBuffer* resp) {
  return Unary("UnpinItem", ctx, req, resp, &ConversationService::UnpinItem);
}

GrpcService::Reactor* GrpcService::UpdateConversation(Context* ctx, const ByteBuffer* req,
                                                      ByteBuffer* resp) {
  return Unary("UpdateConversation", ctx, req, resp, &ConversationService::UpdateConversation);
}

GrpcService::Reactor* GrpcService::GetContextAt(Context* ctx, const ByteBuffer* req,
                                                ByteBuffer* resp) {
  return Unary("GetContextAt", ctx, req, resp, &ConversationService::GetContextAt);
}

// Compaction events as they happen (compaction_started before the
// summarizer is called), then the context as the last event.
grpc::ServerWriteReactor<grpc::ByteBuffer>* GrpcService::StreamBuildContext(
    Context* ctx, const ByteBuffer* request) {
  auto* writer = new EventWriter();
  auto trace = std::make_shared<RpcTrace>(telemetry_, *ctx, "StreamBuildContext");
  auto req = std::make_shared<v1::BuildContextRequest>();
  if (absl::Status parsed = ParseRequest(*request, req.get()); !parsed.ok()) {
    const grpc::Status status = ToGrpcStatus(parsed);
    trace->Finish(status);
    writer->Close(status);
    writer->Release();
    return writer;
  }
  // After the call ends gRPC forgets `ctx`; the writer outlives it.
  const CallContext call{DeadlineOf(*ctx), [writer] { return writer->Cancelled(); }};
  const bool queued = workers_->Schedule([this, call, req, writer, trace] {
    grpc::Status status;
    v1::BuildContextEvent event;
    {
      telemetry::ScopedSpan scope(trace->span());
      absl::StatusOr<v1::BuildContextResponse> result =
          service_->BuildContext(call, *req, [writer](const CompactionProgress& p) {
            writer->Send(Serialize(ToEvent(p)));
          });
      if (!result.ok()) {
        if (!writer->Cancelled()) LogServerError("StreamBuildContext", result.status());
        status = ToGrpcStatus(result.status());
      } else {
        *event.mutable_context() = std::move(*result);
      }
    }
    trace->Finish(status);
    if (status.ok()) writer->Send(Serialize(event));
    writer->Close(status);
    writer->Release();
  });
  if (!queued) {
    trace->Finish(kOverloaded);
    writer->Close(kOverloaded);
    writer->Release();
  }
  return writer;
}

}  // namespace convstate
