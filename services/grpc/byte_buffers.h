#ifndef CONVSTATE_SERVICES_GRPC_BYTE_BUFFERS_H_
#define CONVSTATE_SERVICES_GRPC_BYTE_BUFFERS_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"

namespace convstate {

// Message bodies between gRPC's byte buffers and strings, for the raw
// (ByteBuffer) methods.

// The bytes of `buffer` in one string; nullopt when gRPC cannot read it.
inline std::optional<std::string> BytesOf(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  if (!buffer.Dump(&slices).ok()) return std::nullopt;
  std::string bytes;
  bytes.reserve(buffer.Length());
  for (const grpc::Slice& s : slices) {
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return bytes;
}

// A message body already serialized, sent without a copy: the slice holds a
// reference to the bytes until gRPC is done writing them.
inline grpc::ByteBuffer SharedBytes(const std::shared_ptr<const std::string>& bytes) {
  auto* held = new std::shared_ptr<const std::string>(bytes);
  grpc::Slice slice(
      const_cast<char*>(bytes->data()), bytes->size(),
      [](void* p) { delete static_cast<std::shared_ptr<const std::string>*>(p); }, held);
  return grpc::ByteBuffer(&slice, 1);
}

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_GRPC_BYTE_BUFFERS_H_
