#ifndef CONVSTATE_TESTS_TEST_CREDENTIALS_H_
#define CONVSTATE_TESTS_TEST_CREDENTIALS_H_

// Credentials a test makes for itself: certificates (openssl from Debian,
// in its TEST_TMPDIR) and bearer tokens (tools/make_token, as an operator
// makes them).

#include <memory>
#include <string>

#include "grpcpp/security/credentials.h"

namespace convstate::testing {

// The test's scratch directory (TEST_TMPDIR).
std::string TestDir();

// The contents of `path` ("" if it cannot be read).
std::string ReadFile(const std::string& path);

// Runs a shell command in TestDir(); true if it exited 0. Its output is
// discarded.
bool Shell(const std::string& command);

// A CA named `ca` (ca.pem, ca.key).
bool MakeCa(const std::string& ca);

// A certificate `name`.pem / `name`.key (private to the user) with the
// common name `name`, signed by `ca`, valid for localhost and 127.0.0.1
// for `days` from now (negative: expired that many days ago).
bool MakeCert(const std::string& name, const std::string& ca, int days = 2);

// Client credentials trusting `ca`, presenting certificate `client` when
// one is named.
std::shared_ptr<grpc::ChannelCredentials> TlsCredentials(const std::string& ca,
                                                         const std::string& client = "");

struct Token {
  std::string secret;
  // The access file's line for it.
  std::string entry;
};

// A token made by tools/make_token (a runfile of the test); empty fields if
// it failed.
Token MakeToken(const std::string& tenant, const std::string& role, const std::string& name);

}  // namespace convstate::testing

#endif  // CONVSTATE_TESTS_TEST_CREDENTIALS_H_
