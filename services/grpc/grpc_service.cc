#include "services/grpc/grpc_service.h"

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "google/protobuf/descriptor.h"
#include "services/api/wire.h"
#include "services/api/wire_check.h"
#include "services/common/log.h"
#include "services/common/task_guard.h"
#include "services/grpc/byte_buffers.h"
#include "services/grpc/event_writer.h"
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
      // A database that is down fails every call the same way: a line per
      // method and code now and then, not one per call.
      LogThrottled(LogLevel::kWarning,
                   absl::StrCat(method, "/", absl::StatusCodeToString(status.code())),
                   absl::StrCat(method, " failed: ", status.ToString()));
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

}  // namespace

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

namespace {

const grpc::Status kOverloaded(grpc::StatusCode::UNAVAILABLE,
                               "server overloaded or shutting down; retry with backoff");

// The answer of a call whose handler threw (RunGuarded counted and logged
// it): what went wrong is the server's, and says nothing of the request.
const absl::Status kEscaped =
    absl::InternalError("internal error while serving this call; it was abandoned");

v1::BuildContextEvent ToEvent(const CompactionProgress& p) {
  v1::BuildContextEvent event;
  switch (p.kind) {
    case CompactionProgress::Kind::kStarted:
      event.mutable_compaction_started()->set_tier(std::string(TierName(p.tier)));
      event.mutable_compaction_started()->set_tokens_before(p.tokens_before);
      break;
    case CompactionProgress::Kind::kCompleted:
      event.mutable_compaction_completed()->set_tier(std::string(TierName(p.tier)));
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
      for (const LedgerFact& f : p.lost) {
        ToProto(f, event.mutable_compaction_completed()->add_lost_facts());
      }
      break;
    case CompactionProgress::Kind::kFailed:
      event.mutable_compaction_failed()->set_tier(std::string(TierName(p.tier)));
      event.mutable_compaction_failed()->set_reason(p.reason);
      break;
  }
  return event;
}

}  // namespace

GrpcService::GrpcService(ConversationService* service, ThreadPool* workers,
                         telemetry::Telemetry* telemetry, AccessGate* gate)
    : service_(service), workers_(workers), telemetry_(telemetry), gate_(gate) {
  const google::protobuf::ServiceDescriptor* descriptor =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
          v1::ConversationState::service_full_name());
  // Method i of the descriptor is method i of the generated service.
  names_.reserve(descriptor->method_count());
  for (int i = 0; i < descriptor->method_count(); ++i) {
    names_.push_back(descriptor->method(i)->name());
  }
  const auto& rpcs = ConversationService::UnaryRpcs();
  for (int i = 0; i < descriptor->method_count(); ++i) {
    const google::protobuf::MethodDescriptor* method = descriptor->method(i);
    const char* name = names_[i].c_str();
    if (method->server_streaming() && names_[i] == "StreamBuildContext") {
      MarkMethodRawCallback(
          i, new grpc::internal::CallbackServerStreamingHandler<ByteBuffer, ByteBuffer>(
                 [this](Context* ctx, const ByteBuffer* request) {
                   return StreamBuildContext(ctx, request);
                 }));
      continue;
    }
    auto rpc = rpcs.find(names_[i]);
    if (method->client_streaming() || method->server_streaming() || rpc == rpcs.end()) {
      unserved_.push_back(names_[i]);
      if (method->client_streaming() || method->server_streaming()) continue;
      MarkMethodRawCallback(
          i, new grpc::internal::CallbackUnaryHandler<ByteBuffer, ByteBuffer>(
                 [](Context* ctx, const ByteBuffer*, ByteBuffer*) {
                   Reactor* reactor = ctx->DefaultReactor();
                   reactor->Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                                                "this server does not serve this method"));
                   return reactor;
                 }));
      continue;
    }
    const UnaryRpc* unary = &rpc->second;
    MarkMethodRawCallback(
        i, new grpc::internal::CallbackUnaryHandler<ByteBuffer, ByteBuffer>(
               [this, unary, name](Context* ctx, const ByteBuffer* request,
                                   ByteBuffer* response) {
                 return Unary(*unary, name, ctx, request, response);
               }));
  }
  if (!unserved_.empty()) {
    LogLine(LogLevel::kWarning, absl::StrCat("convstate.v1.ConversationState methods not served: ",
                                         absl::StrJoin(unserved_, ", ")));
  }
}

absl::Status GrpcService::AdmitAndParse(const Context& ctx, const char* method,
                                        const ByteBuffer& request,
                                        google::protobuf::Message* message, RpcTrace* trace,
                                        std::string* principal_name) {
  absl::StatusOr<std::optional<auth::Principal>> principal = gate_->Admit(ctx, method);
  if (!principal.ok()) return principal.status();
  if (principal->has_value()) *principal_name = (*principal)->name;
  if (principal->has_value() && trace->span()->recording()) {
    trace->span()->SetAttribute("convstate.principal", (*principal)->name);
    trace->span()->SetAttribute("convstate.tenant", (*principal)->tenant);
  }
  if (absl::Status parsed = ParseRequest(request, message); !parsed.ok()) return parsed;
  if (principal->has_value()) return gate_->ApplyTenant(**principal, message);
  return absl::OkStatus();
}

GrpcService::Reactor* GrpcService::Unary(const UnaryRpc& rpc, const char* method_name,
                                         Context* ctx, const ByteBuffer* request,
                                         ByteBuffer* response) {
  Reactor* reactor = ctx->DefaultReactor();
  auto trace = std::make_shared<RpcTrace>(telemetry_, *ctx, method_name);
  std::shared_ptr<google::protobuf::Message> req = rpc.new_request();
  std::string principal;
  if (absl::Status admitted =
          AdmitAndParse(*ctx, method_name, *request, req.get(), trace.get(), &principal);
      !admitted.ok()) {
    const grpc::Status status = ToGrpcStatus(admitted);
    trace->Finish(status);
    reactor->Finish(status);
    return reactor;
  }
  // The context lives until Finish, which the worker calls last.
  const CallContext call{DeadlineOf(*ctx), [ctx] { return ctx->IsCancelled(); },
                         std::move(principal)};
  const bool queued = workers_->Schedule([this, &rpc, method_name, call, req, response,
                                          reactor, trace] {
    grpc::Status status;
    {
      telemetry::ScopedSpan scope(trace->span());
      absl::StatusOr<UnaryRpc::Wire> result = kEscaped;
      // Whatever escapes the call fails this call alone (INTERNAL); the
      // client gets an answer and the worker goes on.
      RunGuarded(method_name, [&] {
        result = rpc.call(*service_, call, *req);
        if (result.ok()) *response = Serialize(*result);
      });
      if (!result.ok()) LogServerError(method_name, result.status());
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

// Compaction events as they happen (compaction_started before the
// summarizer is called), then the context as the last event.
grpc::ServerWriteReactor<grpc::ByteBuffer>* GrpcService::StreamBuildContext(
    Context* ctx, const ByteBuffer* request) {
  auto* writer = new EventWriter();
  auto trace = std::make_shared<RpcTrace>(telemetry_, *ctx, "StreamBuildContext");
  auto req = std::make_shared<v1::BuildContextRequest>();
  std::string principal;
  if (absl::Status admitted = AdmitAndParse(*ctx, "StreamBuildContext", *request, req.get(),
                                            trace.get(), &principal);
      !admitted.ok()) {
    const grpc::Status status = ToGrpcStatus(admitted);
    trace->Finish(status);
    writer->Close(status);
    writer->Release();
    return writer;
  }
  // After the call ends gRPC forgets `ctx`; the writer outlives it.
  const CallContext call{DeadlineOf(*ctx), [writer] { return writer->Cancelled(); },
                         std::move(principal)};
  const bool queued = workers_->Schedule([this, call, req, writer, trace] {
    grpc::Status status;
    v1::BuildContextEvent event;
    {
      telemetry::ScopedSpan scope(trace->span());
      absl::StatusOr<v1::BuildContextResponse> result = kEscaped;
      RunGuarded("StreamBuildContext", [&] {
        result = service_->BuildContext(call, *req, [writer](const CompactionProgress& p) {
          writer->Send(Serialize(ToEvent(p)));
        });
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
