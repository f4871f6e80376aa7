#include "tools/convstatectl/client.h"

#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"

namespace convstate::ctl {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

bool IsLoopbackAddress(absl::string_view address) {
  absl::string_view host = address;
  absl::ConsumePrefix(&host, "dns:///");
  absl::ConsumePrefix(&host, "ipv4:");
  absl::ConsumePrefix(&host, "ipv6:");
  if (absl::StartsWith(host, "unix:")) return true;
  if (absl::StartsWith(host, "[")) {
    host = host.substr(1, host.find(']') - 1);
  } else if (const size_t colon = host.rfind(':');
             colon != absl::string_view::npos && host.find(':') == colon) {
    host = host.substr(0, colon);
  }
  return host == "localhost" || host == "::1" || absl::StartsWith(host, "127.");
}

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(const ClientOptions& options) {
  std::unique_ptr<Client> client(new Client(options));
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  if (options.cacert.empty() && options.cert.empty() && options.key.empty()) {
    // A bearer token in plaintext is readable by anyone on the path; only a
    // server on this machine may get one that way.
    if (!options.token.empty() && !IsLoopbackAddress(options.address)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "refusing to send the token in plaintext to ", options.address,
          ": give --cacert (TLS), or reach the server on loopback"));
    }
    credentials = grpc::InsecureChannelCredentials();
  } else {
    if (options.cert.empty() != options.key.empty()) {
      return absl::InvalidArgumentError("--cert and --key go together");
    }
    grpc::SslCredentialsOptions ssl;
    if (!options.cacert.empty()) {
      auto ca = ReadFile(options.cacert);
      if (!ca.ok()) return ca.status();
      ssl.pem_root_certs = *ca;
    }
    if (!options.cert.empty()) {
      auto cert = ReadFile(options.cert);
      if (!cert.ok()) return cert.status();
      auto key = ReadFile(options.key);
      if (!key.ok()) return key.status();
      ssl.pem_cert_chain = *cert;
      ssl.pem_private_key = *key;
    }
    credentials = grpc::SslCredentials(ssl);
  }
  client->channel_ = grpc::CreateChannel(options.address, credentials);
  client->service_ = v1::ConversationState::NewStub(client->channel_);
  return client;
}

std::unique_ptr<grpc::ClientContext> Client::Context() const {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(absl::ToChronoTime(absl::Now() + options_.timeout));
  if (!options_.token.empty()) ctx->AddMetadata("authorization", "Bearer " + options_.token);
  return ctx;
}

}  // namespace convstate::ctl
