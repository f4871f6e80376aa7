#ifndef CONVSTATE_SERVICES_GRPC_SHARED_BYTES_H_
#define CONVSTATE_SERVICES_GRPC_SHARED_BYTES_H_

#include <memory>
#include <string>

#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"

namespace convstate {

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

#endif  // CONVSTATE_SERVICES_GRPC_SHARED_BYTES_H_
