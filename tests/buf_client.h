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

}  // namespace convstate::testing

#endif  // CONVSTATE_TESTS_BUF_CLIENT_H_
