#ifndef CONVSTATE_SERVICES_COMMON_FINGERPRINT_H_
#define CONVSTATE_SERVICES_COMMON_FINGERPRINT_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace convstate {

// A stable 64-bit fingerprint (FNV-1a) that is the same in every process and
// on every machine, unlike absl::Hash. Not cryptographic: it detects
// accidental mismatches (an idempotency key reused for another request, an
// edited migration), not tampering.
class Fingerprinter {
 public:
  // Adds `bytes`, length-prefixed so that ("ab", "c") and ("a", "bc")
  // differ.
  Fingerprinter& Add(absl::string_view bytes);
  // Adds `value`, tagged so that it differs from any string's prefix.
  Fingerprinter& Add(int64_t value);
  uint64_t value() const { return state_; }
  // The value as 16 lowercase hex digits.
  std::string Hex() const;

 private:
  void Mix(const void* data, size_t size);
  void MixInteger(uint64_t value);
  uint64_t state_ = 14695981039346656037ull;
};

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_COMMON_FINGERPRINT_H_
