#ifndef CONVSTATE_SERVICES_COMMON_SHA256_H_
#define CONVSTATE_SERVICES_COMMON_SHA256_H_

#include <memory>
#include <string>

#include "absl/strings/string_view.h"

namespace convstate {

// Incremental SHA-256 (OpenSSL). HexDigest may be read at any point and
// hashing go on after it: the digest of everything added so far.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void Update(absl::string_view bytes);
  // 64 lowercase hex digits.
  std::string HexDigest() const;

  // The hex digest of `bytes`.
  static std::string Hex(absl::string_view bytes);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// HMAC-SHA-256 of `bytes` under `key`, as 64 lowercase hex digits.
std::string HmacSha256Hex(absl::string_view key, absl::string_view bytes);

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_COMMON_SHA256_H_
