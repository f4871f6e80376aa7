#include "tests/buf_client.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace convstate::testing {

std::string ShellQuote(const std::string& s) {
  return absl::StrCat("'", absl::StrReplaceAll(s, {{"'", "'\\''"}}), "'");
}

BufOutput Buf(const std::string& args) {
  const char* buf = std::getenv("CONVSTATE_BUF");
  BufOutput result;
  if (buf == nullptr || *buf == '\0') return result;
  FILE* pipe = popen(absl::StrCat(ShellQuote(buf), " ", args).c_str(), "r");
  if (pipe == nullptr) return result;
  char chunk[4096];
  while (size_t n = fread(chunk, 1, sizeof(chunk), pipe)) result.out.append(chunk, n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

BufOutput CurlConversationState(const std::string& address, const std::string& method,
                                const std::string& json, bool with_errors) {
  return Buf(absl::StrCat("curl --protocol grpc --http2-prior-knowledge -d ", ShellQuote(json),
                          " http://", address, "/convstate.v1.ConversationState/", method,
                          with_errors ? " 2>&1" : ""));
}

}  // namespace convstate::testing
