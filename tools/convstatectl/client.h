#ifndef CONVSTATE_TOOLS_CONVSTATECTL_CLIENT_H_
#define CONVSTATE_TOOLS_CONVSTATECTL_CLIENT_H_

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "convstate/v1/convstate.grpc.pb.h"

namespace convstate::ctl {

// Where and how to reach the service.
struct ClientOptions {
  std::string address = "localhost:50051";
  // TLS: the CA that signed the server's certificate; with cert and key,
  // a client certificate for mutual TLS. Plaintext when all are empty.
  std::string cacert;
  std::string cert;
  std::string key;
  // Sent as `authorization: Bearer TOKEN` with every call.
  std::string token;
  absl::Duration timeout = absl::Seconds(30);
};

// True if `address` (host:port, or a gRPC target) names this machine:
// loopback addresses, localhost, a Unix socket.
bool IsLoopbackAddress(absl::string_view address);

// A channel and the stubs the commands use, and the context every call
// takes (deadline and credential).
class Client {
 public:
  // FAILED_PRECONDITION for a token to be sent in plaintext to another
  // machine: a token travels over TLS (--cacert) or on loopback only.
  static absl::StatusOr<std::unique_ptr<Client>> Connect(const ClientOptions& options);

  v1::ConversationState::Stub& service() { return *service_; }
  std::shared_ptr<grpc::Channel> channel() const { return channel_; }
  std::unique_ptr<grpc::ClientContext> Context() const;

 private:
  explicit Client(ClientOptions options) : options_(std::move(options)) {}
  ClientOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::ConversationState::Stub> service_;
};

}  // namespace convstate::ctl

#endif  // CONVSTATE_TOOLS_CONVSTATECTL_CLIENT_H_
