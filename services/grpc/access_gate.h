#ifndef CONVSTATE_SERVICES_GRPC_ACCESS_GATE_H_
#define CONVSTATE_SERVICES_GRPC_ACCESS_GATE_H_

#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"
#include "grpcpp/server_context.h"
#include "services/auth/access_policy.h"
#include "services/auth/rate_limiter.h"
#include "services/telemetry/telemetry.h"

namespace convstate {

// What the server asks of callers.
struct AccessOptions {
  // The access file (credentials, roles, limits). Empty: no authentication
  // (--auth=none, for local development only).
  std::string access_file;
  // Health and reflection answer callers without a credential.
  bool public_health = false;
  bool public_reflection = false;
  // How often the access file is checked for changes.
  absl::Duration refresh = absl::Seconds(5);
};

// Decides, before a call runs, who makes it and whether it may: the bearer
// token (`authorization: Bearer ...`) or else the client certificate, mapped
// by the access file to a tenant and a role; the role against the method;
// the tenant's call rate. Refusals are counted in convstate.requests.refused,
// never logged one by one, and never echo the credential. Thread-safe.
// The role a convstate.v1.ConversationState method (`method`: its short
// name) needs, as its required_role option in the proto says; nullopt for
// a method the service does not have or one that names no role.
std::optional<auth::Role> RequiredRole(absl::string_view method);

class AccessGate {
 public:
  // No authentication: every call is admitted for the tenant it names.
  explicit AccessGate(telemetry::Telemetry* telemetry);
  // Authentication by `file`.
  AccessGate(std::unique_ptr<auth::AccessFile> file, const AccessOptions& options,
             telemetry::Telemetry* telemetry);

  bool enabled() const { return file_ != nullptr; }

  // A convstate.v1.ConversationState call (`method`: its short name). The
  // caller's principal, or nullopt when authentication is off.
  // UNAUTHENTICATED without a known credential, PERMISSION_DENIED when the
  // role may not call `method`, RESOURCE_EXHAUSTED over the tenant's rate.
  absl::StatusOr<std::optional<auth::Principal>> Admit(const grpc::ServerContextBase& ctx,
                                                       absl::string_view method);
  // Health (grpc.health.v1.Health) and reflection calls: any known
  // credential, or none when they are public.
  absl::Status AdmitHealth(const grpc::ServerContextBase& ctx);
  absl::Status AdmitReflection(const grpc::ServerContextBase& ctx);

  // The tenant's limits from the access file (none when authentication is off).
  auth::TenantLimits Limits(absl::string_view tenant);

  // Makes `request` (a ConversationState request) speak for the
  // principal's tenant: its tenant_id must be empty or the principal's
  // (PERMISSION_DENIED otherwise) and is set to it.
  absl::Status ApplyTenant(const auth::Principal& principal, google::protobuf::Message* request);

 private:
  absl::StatusOr<auth::Principal> Authenticate(const grpc::ServerContextBase& ctx,
                                               const auth::AccessPolicy& policy);
  absl::Status Refuse(absl::Status status, absl::string_view reason);

  std::unique_ptr<auth::AccessFile> file_;
  const AccessOptions options_;
  telemetry::Telemetry* const telemetry_;
  auth::RateLimiter rates_;
};

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_GRPC_ACCESS_GATE_H_
