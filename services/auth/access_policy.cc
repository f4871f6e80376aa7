#include "services/auth/access_policy.h"

#include <sys/stat.h>

#include <fstream>
#include <sstream>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "convstate/config/v1/access.pb.h"
#include "services/core/ids.h"
#include "services/common/log.h"
#include "services/common/secret_file.h"
#include "services/common/sha256.h"
#include "services/common/status_macros.h"
#include "services/common/text_proto.h"

namespace convstate::auth {
namespace {

namespace cfg = convstate::config::v1;

constexpr size_t kMaxSeenTokens = 4096;


absl::StatusOr<Role> RoleOf(cfg::Role role, absl::string_view where) {
  switch (role) {
    case cfg::ROLE_READER:
      return Role::kReader;
    case cfg::ROLE_GATEWAY:
      return Role::kGateway;
    case cfg::ROLE_OPERATOR:
      return Role::kOperator;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(where, "role: ROLE_READER, ROLE_GATEWAY or ROLE_OPERATOR"));
  }
}

absl::StatusOr<std::string> TenantOf(absl::string_view tenant, absl::string_view where) {
  absl::StatusOr<std::string> normalized = NormalizeTenant(tenant);
  if (!normalized.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(where, normalized.status().message()));
  }
  return normalized;
}

bool IsLowerHexDigest(absl::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!absl::ascii_isdigit(c) && !(c >= 'a' && c <= 'f')) return false;
  }
  return true;
}

// Equal, in a time that depends on the length only.
bool SameSecret(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

absl::string_view RoleName(Role role) {
  switch (role) {
    case Role::kReader:
      return "reader";
    case Role::kGateway:
      return "gateway";
    case Role::kOperator:
      return "operator";
  }
  return "unknown";
}


std::string TokenDigest(absl::string_view salt, absl::string_view token) {
  Sha256 hash;
  hash.Update(salt);
  hash.Update(token);
  return hash.HexDigest();
}

absl::StatusOr<std::unique_ptr<AccessPolicy>> AccessPolicy::FromText(absl::string_view text) {
  cfg::Access access;
  if (absl::Status parsed = ParseTextProto(text, &access); !parsed.ok()) return parsed;
  std::unique_ptr<AccessPolicy> policy(new AccessPolicy());
  absl::flat_hash_set<std::string> names;
  for (int i = 0; i < access.tenants_size(); ++i) {
    const cfg::Tenant& t = access.tenants(i);
    const std::string where = absl::StrCat("tenants[", i, "].");
    absl::StatusOr<std::string> id = TenantOf(t.id(), absl::StrCat(where, "id: "));
    if (!id.ok()) return id.status();
    if (t.max_conversations() < 0 || t.max_stored_bytes() < 0 || t.max_requests_per_second() < 0 ||
        t.burst() < 0) {
      return absl::InvalidArgumentError(absl::StrCat(where, "limits cannot be negative"));
    }
    TenantLimits limits{t.max_conversations(), t.max_stored_bytes(), t.max_requests_per_second(),
                        t.burst()};
    if (!policy->tenants_.emplace(*id, limits).second) {
      return absl::InvalidArgumentError(absl::StrCat(where, "id: tenant '", *id, "' listed twice"));
    }
  }
  for (int i = 0; i < access.tokens_size(); ++i) {
    const cfg::Token& t = access.tokens(i);
    const std::string where = absl::StrCat("tokens[", i, "].");
    if (t.name().empty()) return absl::InvalidArgumentError(absl::StrCat(where, "name: required"));
    if (!names.insert(t.name()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "name: '", t.name(), "' names two credentials"));
    }
    if (t.salt().empty()) return absl::InvalidArgumentError(absl::StrCat(where, "salt: required"));
    if (!IsLowerHexDigest(t.sha256())) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "sha256: 64 lowercase hex digits expected"));
    }
    absl::StatusOr<Role> role = RoleOf(t.role(), where);
    if (!role.ok()) return role.status();
    absl::StatusOr<std::string> tenant = TenantOf(t.tenant(), absl::StrCat(where, "tenant: "));
    if (!tenant.ok()) return tenant.status();
    policy->tokens_.push_back(TokenEntry{t.salt(), t.sha256(), Principal{t.name(), *tenant, *role}});
  }
  for (int i = 0; i < access.certificates_size(); ++i) {
    const cfg::Certificate& c = access.certificates(i);
    const std::string where = absl::StrCat("certificates[", i, "].");
    if (c.identity().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(where, "identity: required"));
    }
    const std::string name = c.name().empty() ? c.identity() : c.name();
    if (!names.insert(name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "name: '", name, "' names two credentials"));
    }
    absl::StatusOr<Role> role = RoleOf(c.role(), where);
    if (!role.ok()) return role.status();
    absl::StatusOr<std::string> tenant = TenantOf(c.tenant(), absl::StrCat(where, "tenant: "));
    if (!tenant.ok()) return tenant.status();
    policy->certificates_.emplace_back(c.identity(), Principal{name, *tenant, *role});
  }
  return policy;
}

const Principal* AccessPolicy::FindToken(absl::string_view token) const {
  if (token.empty()) return nullptr;
  const std::string seen_key = Sha256::Hex(token);
  {
    absl::MutexLock lock(&seen_mu_);
    if (auto it = seen_.find(seen_key); it != seen_.end()) return it->second;
  }
  const Principal* found = nullptr;
  for (const TokenEntry& entry : tokens_) {
    if (SameSecret(TokenDigest(entry.salt, token), entry.sha256)) {
      found = &entry.principal;
      break;
    }
  }
  // Only tokens that matched are remembered: unknown ones cannot fill it.
  if (found != nullptr) {
    absl::MutexLock lock(&seen_mu_);
    if (seen_.size() >= kMaxSeenTokens) seen_.clear();
    seen_.emplace(seen_key, found);
  }
  return found;
}

const Principal* AccessPolicy::FindCertificate(const std::vector<std::string>& identities) const {
  for (const auto& [identity, principal] : certificates_) {
    for (const std::string& candidate : identities) {
      if (candidate == identity) return &principal;
    }
  }
  return nullptr;
}

TenantLimits AccessPolicy::Limits(absl::string_view tenant) const {
  auto it = tenants_.find(tenant);
  return it == tenants_.end() ? TenantLimits{} : it->second;
}

absl::StatusOr<std::unique_ptr<AccessFile>> AccessFile::Open(std::string path,
                                                            absl::Duration refresh) {
  std::unique_ptr<AccessFile> file(new AccessFile(std::move(path), refresh));
  absl::MutexLock lock(&file->mu_);
  if (absl::Status loaded = file->Load(); !loaded.ok()) return loaded;
  return file;
}

std::optional<std::pair<int64_t, int64_t>> AccessFile::Stamp() const {
  struct stat st;
  if (stat(path_.c_str(), &st) != 0) return std::nullopt;
  return std::make_pair(static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec,
                        static_cast<int64_t>(st.st_size));
}

absl::Status AccessFile::Load() {
  checked_ = absl::Now();
  stamp_ = Stamp();
  // Checked at every read: a file someone else may now write is not read.
  RETURN_IF_ERROR(CheckSecretFile("access file", path_));
  std::ifstream in(path_);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("access file: cannot read ", path_));
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<std::unique_ptr<AccessPolicy>> policy = AccessPolicy::FromText(text.str());
  if (!policy.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("access file ", path_, ": ", policy.status().message()));
  }
  policy_ = std::move(*policy);
  return absl::OkStatus();
}

std::shared_ptr<const AccessPolicy> AccessFile::Current() {
  absl::MutexLock lock(&mu_);
  const absl::Time now = absl::Now();
  if (now - checked_ >= refresh_) {
    checked_ = now;
    if (std::optional<std::pair<int64_t, int64_t>> stamp = Stamp(); stamp != stamp_) {
      // Load stamps the file first: one warning per version that fails.
      if (absl::Status loaded = Load(); loaded.ok()) {
        LogInfo("access file ", path_, " read again: ", policy_->token_count(), " tokens");
      } else {
        LogWarning(loaded.message(), "; keeping the access rules read before");
      }
    }
  }
  return policy_;
}

}  // namespace convstate::auth
