#include "tests/test_credentials.h"

#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "grpcpp/security/credentials.h"
#include "tests/server_process.h"

namespace convstate::testing {

std::string TestDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool Shell(const std::string& command) {
  return std::system(
             absl::StrCat("cd '", TestDir(), "' && ", command, " >/dev/null 2>&1").c_str()) == 0;
}

bool MakeCa(const std::string& ca) {
  return Shell(absl::StrCat("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
                            "-nodes -keyout ", ca, ".key -out ", ca, ".pem -days 2 -subj /CN=", ca));
}

bool MakeCert(const std::string& name, const std::string& ca, int days) {
  return Shell(absl::StrCat(
             "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ", name,
             ".key -out ", name, ".csr -subj /CN=", name)) &&
         Shell(absl::StrCat("printf 'subjectAltName=DNS:localhost,IP:127.0.0.1' > ", name,
                            ".ext && openssl x509 -req -in ", name, ".csr -CA ", ca,
                            ".pem -CAkey ", ca, ".key -CAcreateserial -out ", name,
                            ".pem -days ", days, " -extfile ", name, ".ext")) &&
         chmod(absl::StrCat(TestDir(), "/", name, ".key").c_str(), 0600) == 0;
}

std::shared_ptr<grpc::ChannelCredentials> TlsCredentials(const std::string& ca,
                                                         const std::string& client) {
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = ReadFile(TestDir() + "/" + ca + ".pem");
  if (!client.empty()) {
    options.pem_cert_chain = ReadFile(TestDir() + "/" + client + ".pem");
    options.pem_private_key = ReadFile(TestDir() + "/" + client + ".key");
  }
  return grpc::SslCredentials(options);
}

Token MakeToken(const std::string& tenant, const std::string& role, const std::string& name) {
  const std::string command = absl::StrCat(ServerProcess::RunfilePath("tools/make_token"), " ",
                                           tenant, " ", role, " ", name, " 2>&1");
  std::string out;
  if (FILE* pipe = popen(command.c_str(), "r")) {
    char buffer[512];
    size_t n;
    while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) out.append(buffer, n);
    pclose(pipe);
  }
  Token token;
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    if (absl::StartsWith(line, "token for ")) {
      token.secret = std::string(line.substr(line.rfind(' ') + 1));
    }
    if (absl::StartsWith(line, "tokens {")) token.entry = std::string(line);
  }
  return token;
}

}  // namespace convstate::testing
