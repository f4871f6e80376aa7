#include "services/common/sha256.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstdlib>

#include "absl/strings/escaping.h"

namespace convstate {

struct Sha256::State {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  ~State() { EVP_MD_CTX_free(ctx); }
};

Sha256::Sha256() : state_(std::make_unique<State>()) {
  if (state_->ctx == nullptr || EVP_DigestInit_ex(state_->ctx, EVP_sha256(), nullptr) != 1) {
    std::abort();  // Only on allocation failure: nothing sensible to do.
  }
}

Sha256::~Sha256() = default;

void Sha256::Update(absl::string_view bytes) {
  EVP_DigestUpdate(state_->ctx, bytes.data(), bytes.size());
}

std::string Sha256::HexDigest() const {
  State copy;
  EVP_MD_CTX_copy_ex(copy.ctx, state_->ctx);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_DigestFinal_ex(copy.ctx, digest, &size);
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(digest), size));
}

std::string Sha256::Hex(absl::string_view bytes) {
  Sha256 h;
  h.Update(bytes);
  return h.HexDigest();
}

std::string HmacSha256Hex(absl::string_view key, absl::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), digest,
           &size) == nullptr) {
    std::abort();  // Only on allocation failure.
  }
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(digest), size));
}

}  // namespace convstate
