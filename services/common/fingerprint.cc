#include "services/common/fingerprint.h"

#include "absl/strings/str_format.h"

namespace convstate {

void Fingerprinter::Mix(const void* data, size_t size) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) {
    state_ ^= bytes[i];
    state_ *= 1099511628211ull;
  }
}

void Fingerprinter::MixInteger(uint64_t value) {
  unsigned char le[8];
  for (int i = 0; i < 8; ++i) le[i] = static_cast<unsigned char>(value >> (8 * i));
  Mix(le, sizeof(le));
}

Fingerprinter& Fingerprinter::Add(int64_t value) {
  // A tag byte first: an integer never reads as a string's length prefix
  // (Add("") and Add(0) would be the same bytes otherwise).
  constexpr unsigned char kIntegerTag = 0x01;
  Mix(&kIntegerTag, 1);
  MixInteger(static_cast<uint64_t>(value));
  return *this;
}

Fingerprinter& Fingerprinter::Add(absl::string_view bytes) {
  // Unchanged since migration checksums were first recorded with it.
  MixInteger(bytes.size());
  Mix(bytes.data(), bytes.size());
  return *this;
}

std::string Fingerprinter::Hex() const { return absl::StrFormat("%016x", state_); }

}  // namespace convstate
