#ifndef CONVSTATE_TESTS_BUF_CLIENT_H_
#define CONVSTATE_TESTS_BUF_CLIENT_H_

// The Buf CLI as a test's gRPC client: it knows only what server reflection
// tells it, as grpcurl does. tools/test installs it and passes its path in
// CONVSTATE_BUF.

#include <string>

namespace convstate::testing {

// Quotes `s` for sh: single quotes, with embedded ones closed and escaped.
std::string ShellQuote(const std::string& s);

struct BufOutput {
  // -1 when buf could not be run (CONVSTATE_BUF unset, or no such file).
  int exit_code = -1;
  std::string out;
};

// Runs `$CONVSTATE_BUF <args>` (args already quoted); standard error goes
// to the test log.
BufOutput Buf(const std::string& args);

// `buf curl` of convstate.v1.ConversationState/`method` on the plaintext
// server at `address` with the JSON request `json`: what grpcurl -plaintext
// -d would send. A server-streaming method's answers come one JSON object
// after another. With `with_errors`, what buf writes to standard error (a
// failed call's status and message) is in the output too.
BufOutput CurlConversationState(const std::string& address, const std::string& method,
                                const std::string& json, bool with_errors = false);

}  // namespace convstate::testing

#endif  // CONVSTATE_TESTS_BUF_CLIENT_H_
