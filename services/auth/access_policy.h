#ifndef CONVSTATE_SERVICES_AUTH_ACCESS_POLICY_H_
#define CONVSTATE_SERVICES_AUTH_ACCESS_POLICY_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "services/core/types.h"

namespace convstate::auth {

// What a credential may call; each role may do what the one before it may
// (see protos/convstate/config/v1/access.proto).
enum class Role { kReader = 1, kGateway = 2, kOperator = 3 };

// "reader", "gateway", "operator".
absl::string_view RoleName(Role role);


// Who a credential says the caller is.
struct Principal {
  // The credential's name from the access file: for logs, traces and audit
  // rows. Never the secret.
  std::string name;
  // Normalized: never empty ("default" for the default tenant).
  std::string tenant;
  Role role = Role::kReader;
};

using ::convstate::TenantLimits;

// One parsed access file: bearer tokens and client certificates mapped to a
// tenant and a role, and tenants' limits. Thread-safe.
class AccessPolicy {
 public:
  // Parses the text format of convstate.config.v1.Access. INVALID_ARGUMENT
  // naming the entry for anything wrong in it.
  static absl::StatusOr<std::unique_ptr<AccessPolicy>> FromText(absl::string_view text);

  // The principal of a bearer token; null if no entry's hash matches.
  const Principal* FindToken(absl::string_view token) const;
  // The principal of the first certificate entry whose identity is one of
  // `identities` (the certificate's common name and alternative names).
  const Principal* FindCertificate(const std::vector<std::string>& identities) const;
  // The tenant's limits (none for a tenant the file does not list).
  TenantLimits Limits(absl::string_view tenant) const;

  size_t token_count() const { return tokens_.size(); }

 private:
  AccessPolicy() = default;

  struct TokenEntry {
    std::string salt;
    std::string sha256;  // Lowercase hex.
    Principal principal;
  };
  std::vector<TokenEntry> tokens_;
  std::vector<std::pair<std::string, Principal>> certificates_;
  absl::flat_hash_map<std::string, TenantLimits> tenants_;
  // Tokens already matched, by their unsalted digest: a call costs one
  // hash, not one per entry. Bounded; cleared when full.
  mutable absl::Mutex seen_mu_;
  mutable absl::flat_hash_map<std::string, const Principal*> seen_ ABSL_GUARDED_BY(seen_mu_);
};

// The access file, read again when it changes (checked at most every
// `refresh`, on the calls that ask). A file that no longer parses keeps the
// last good policy and logs one warning per change.
class AccessFile {
 public:
  // Reads and parses `path`; its error names the file.
  static absl::StatusOr<std::unique_ptr<AccessFile>> Open(std::string path,
                                                          absl::Duration refresh);

  std::shared_ptr<const AccessPolicy> Current();

 private:
  AccessFile(std::string path, absl::Duration refresh) : path_(std::move(path)), refresh_(refresh) {}
  // The file's modification time and size, as a change marker.
  std::optional<std::pair<int64_t, int64_t>> Stamp() const;
  absl::Status Load();

  const std::string path_;
  const absl::Duration refresh_;
  absl::Mutex mu_;
  std::shared_ptr<const AccessPolicy> policy_ ABSL_GUARDED_BY(mu_);
  std::optional<std::pair<int64_t, int64_t>> stamp_ ABSL_GUARDED_BY(mu_);
  absl::Time checked_ ABSL_GUARDED_BY(mu_);
};

// The SHA-256 the access file keeps for `token` with `salt` (lowercase hex).
std::string TokenDigest(absl::string_view salt, absl::string_view token);

}  // namespace convstate::auth

#endif  // CONVSTATE_SERVICES_AUTH_ACCESS_POLICY_H_
