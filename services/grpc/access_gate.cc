#include "services/grpc/access_gate.h"

#include "absl/container/flat_hash_map.h"
#include "convstate/v1/convstate.grpc.pb.h"
#include "google/protobuf/descriptor.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "google/protobuf/descriptor.h"
#include "grpc/grpc_security_constants.h"
#include "grpcpp/security/auth_context.h"

namespace convstate {
namespace {

// The token of an `authorization: Bearer TOKEN` header; nullopt without the
// header, "" when it is not a bearer token.
std::optional<absl::string_view> BearerToken(const grpc::ServerContextBase& ctx) {
  const auto& metadata = ctx.client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) return std::nullopt;
  absl::string_view value(it->second.data(), it->second.size());
  constexpr absl::string_view kScheme = "bearer ";
  if (value.size() <= kScheme.size() || !absl::StartsWithIgnoreCase(value, kScheme)) {
    return absl::string_view();
  }
  return absl::StripAsciiWhitespace(value.substr(kScheme.size()));
}

// The verified client certificate's common name and alternative names;
// empty without one.
std::vector<std::string> CertificateIdentities(const grpc::ServerContextBase& ctx) {
  std::vector<std::string> out;
  const std::shared_ptr<const grpc::AuthContext> auth = ctx.auth_context();
  if (auth == nullptr || !auth->IsPeerAuthenticated()) return out;
  for (const char* property : {GRPC_X509_CN_PROPERTY_NAME, GRPC_X509_SAN_PROPERTY_NAME}) {
    for (const grpc::string_ref& value : auth->FindPropertyValues(property)) {
      out.emplace_back(value.data(), value.size());
    }
  }
  return out;
}

}  // namespace

AccessGate::AccessGate(telemetry::Telemetry* telemetry) : telemetry_(telemetry) {}

AccessGate::AccessGate(std::unique_ptr<auth::AccessFile> file, const AccessOptions& options,
                       telemetry::Telemetry* telemetry)
    : file_(std::move(file)), options_(options), telemetry_(telemetry) {}

absl::Status AccessGate::Refuse(absl::Status status, absl::string_view reason) {
  telemetry_->instruments().refused->Add(1, {{"convstate.refusal", std::string(reason)}});
  return status;
}

absl::StatusOr<auth::Principal> AccessGate::Authenticate(const grpc::ServerContextBase& ctx,
                                                         const auth::AccessPolicy& policy) {
  if (std::optional<absl::string_view> token = BearerToken(ctx)) {
    if (token->empty()) {
      return Refuse(absl::UnauthenticatedError("authorization: expected 'Bearer TOKEN'"),
                    "unauthenticated");
    }
    if (const auth::Principal* p = policy.FindToken(*token)) return *p;
    return Refuse(absl::UnauthenticatedError("the bearer token is not known"), "unauthenticated");
  }
  const std::vector<std::string> identities = CertificateIdentities(ctx);
  if (!identities.empty()) {
    if (const auth::Principal* p = policy.FindCertificate(identities)) return *p;
    return Refuse(absl::UnauthenticatedError(
                      "the client certificate's identity is not in the access file"),
                  "unauthenticated");
  }
  return Refuse(absl::UnauthenticatedError(
                    "no credential: send 'authorization: Bearer TOKEN' or a client certificate"),
                "unauthenticated");
}

std::optional<auth::Role> RequiredRole(absl::string_view method) {
  // Read once from the descriptor: the proto is where each method's role
  // is declared.
  static const auto* const kRoles = [] {
    auto* roles = new absl::flat_hash_map<std::string, auth::Role>();
    const google::protobuf::ServiceDescriptor* service = google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(v1::ConversationState::service_full_name());
    for (int i = 0; i < service->method_count(); ++i) {
      const google::protobuf::MethodDescriptor* m = service->method(i);
      switch (m->options().GetExtension(v1::required_role)) {
        case v1::CALLER_ROLE_READER: (*roles)[m->name()] = auth::Role::kReader; break;
        case v1::CALLER_ROLE_GATEWAY: (*roles)[m->name()] = auth::Role::kGateway; break;
        case v1::CALLER_ROLE_OPERATOR: (*roles)[m->name()] = auth::Role::kOperator; break;
        default: break;  // None: no caller may call it.
      }
    }
    return roles;
  }();
  auto it = kRoles->find(method);
  if (it == kRoles->end()) return std::nullopt;
  return it->second;
}

absl::StatusOr<std::optional<auth::Principal>> AccessGate::Admit(
    const grpc::ServerContextBase& ctx, absl::string_view method) {
  if (!enabled()) return std::nullopt;
  // One look at the access file per call: the credential and the limits
  // come from the same policy.
  const std::shared_ptr<const auth::AccessPolicy> policy = file_->Current();
  absl::StatusOr<auth::Principal> principal = Authenticate(ctx, *policy);
  if (!principal.ok()) return principal.status();
  const std::optional<auth::Role> needed = RequiredRole(method);
  if (!needed.has_value() || principal->role < *needed) {
    return Refuse(absl::PermissionDeniedError(absl::StrCat(
                      "the ", auth::RoleName(principal->role), " role may not call ", method)),
                  "permission_denied");
  }
  const auth::TenantLimits limits = policy->Limits(principal->tenant);
  if (!rates_.Admit(principal->tenant, limits.max_requests_per_second, limits.burst,
                    absl::Now())) {
    return Refuse(absl::ResourceExhaustedError(absl::StrCat(
                      "tenant '", principal->tenant, "' is over its max_requests_per_second (",
                      limits.max_requests_per_second, "); retry with backoff")),
                  "rate_limited");
  }
  return std::optional<auth::Principal>(std::move(*principal));
}

absl::Status AccessGate::AdmitHealth(const grpc::ServerContextBase& ctx) {
  if (!enabled() || options_.public_health) return absl::OkStatus();
  return Authenticate(ctx, *file_->Current()).status();
}

absl::Status AccessGate::AdmitReflection(const grpc::ServerContextBase& ctx) {
  if (!enabled() || options_.public_reflection) return absl::OkStatus();
  return Authenticate(ctx, *file_->Current()).status();
}

auth::TenantLimits AccessGate::Limits(absl::string_view tenant) {
  if (!enabled()) return {};
  return file_->Current()->Limits(tenant);
}

absl::Status AccessGate::ApplyTenant(const auth::Principal& principal,
                                     google::protobuf::Message* request) {
  const google::protobuf::FieldDescriptor* field =
      request->GetDescriptor()->FindFieldByName("tenant_id");
  if (field == nullptr || field->type() != google::protobuf::FieldDescriptor::TYPE_STRING) {
    return absl::OkStatus();
  }
  const google::protobuf::Reflection* reflection = request->GetReflection();
  const std::string asked = reflection->GetString(*request, field);
  if (!asked.empty() && asked != principal.tenant) {
    return Refuse(absl::PermissionDeniedError(
                      "tenant_id: not the tenant of the credential (leave it empty)"),
                  "permission_denied");
  }
  reflection->SetString(request, field, principal.tenant);
  return absl::OkStatus();
}

}  // namespace convstate
