#ifndef CONVSTATE_SERVICES_GRPC_REFLECTION_V1_H_
#define CONVSTATE_SERVICES_GRPC_REFLECTION_V1_H_

#include <string>
#include <vector>

#include "grpc/reflection/v1/reflection.grpc.pb.h"
#include "services/grpc/access_gate.h"

namespace convstate {

// gRPC server reflection, version v1 (grpc.reflection.v1.ServerReflection),
// beside the v1alpha service gRPC 1.51 ships: clients that ask for v1 first
// (grpcurl and the Buf CLI do) get answers from it. Describes the files in
// the protobuf generated pool: every service this binary links in, with
// their dependencies.
class ReflectionV1 final : public grpc::reflection::v1::ServerReflection::CallbackService {
 public:
  // `services`: the full names list_services reports. `gate` (which must
  // outlive this object) decides who may ask; null: anyone.
  explicit ReflectionV1(std::vector<std::string> services, AccessGate* gate = nullptr);

  grpc::ServerBidiReactor<grpc::reflection::v1::ServerReflectionRequest,
                          grpc::reflection::v1::ServerReflectionResponse>*
  ServerReflectionInfo(grpc::CallbackServerContext* context) override;

  // The answer to one request (also for tests).
  grpc::reflection::v1::ServerReflectionResponse Answer(
      const grpc::reflection::v1::ServerReflectionRequest& request) const;

 private:
  const std::vector<std::string> services_;
  AccessGate* const gate_;
};

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_GRPC_REFLECTION_V1_H_
