#ifndef CONVSTATE_SERVICES_GRPC_STATUS_H_
#define CONVSTATE_SERVICES_GRPC_STATUS_H_

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace convstate {

// The one mapping from domain statuses to gRPC statuses: same code, same
// message. Messages below this layer are written for clients (they name the
// field or the object and never carry SQL or driver text).
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_GRPC_STATUS_H_
