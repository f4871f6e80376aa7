#include "services/grpc/status.h"

#include "gtest/gtest.h"

namespace convstate {
namespace {

TEST(ToGrpcStatusTest, KeepsCodeAndMessage) {
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
  const struct {
    absl::Status in;
    grpc::StatusCode want;
  } cases[] = {
      {absl::InvalidArgumentError("items[0].role: required"), grpc::INVALID_ARGUMENT},
      {absl::NotFoundError("conversation 'x' not found"), grpc::NOT_FOUND},
      {absl::AlreadyExistsError("exists"), grpc::ALREADY_EXISTS},
      {absl::FailedPreconditionError("fp"), grpc::FAILED_PRECONDITION},
      {absl::AbortedError("race"), grpc::ABORTED},
      {absl::UnavailableError("db down"), grpc::UNAVAILABLE},
      {absl::DeadlineExceededError("late"), grpc::DEADLINE_EXCEEDED},
      {absl::ResourceExhaustedError("too big"), grpc::RESOURCE_EXHAUSTED},
      {absl::UnimplementedError("later"), grpc::UNIMPLEMENTED},
      {absl::InternalError("bug"), grpc::INTERNAL},
      {absl::CancelledError("gone"), grpc::CANCELLED},
      {absl::PermissionDeniedError("no"), grpc::PERMISSION_DENIED},
      {absl::UnauthenticatedError("who"), grpc::UNAUTHENTICATED},
      {absl::OutOfRangeError("far"), grpc::OUT_OF_RANGE},
      {absl::DataLossError("lost"), grpc::DATA_LOSS},
      {absl::UnknownError("?"), grpc::UNKNOWN},
  };
  for (const auto& c : cases) {
    grpc::Status s = ToGrpcStatus(c.in);
    EXPECT_EQ(s.error_code(), c.want) << c.in;
    EXPECT_EQ(s.error_message(), c.in.message());
  }
}

}  // namespace
}  // namespace convstate
