// Counts tokens the way the model's tokenizer does, for operators and for
// checking: reads JSON lines {"id": ..., "text": ...} on standard input and
// writes {"id": ..., "tokens": N} per line, in order.
//
//   bazel run //tools:count_tokens -- --encoding=cl100k_base [--vocab_dir=DIR]
//
// The vocabulary comes from --vocab_dir, else $CONVSTATE_VOCAB_DIR, else the
// directory tools/run and tools/test install it into. A line that is not
// JSON with a string "text" gets {"id": ..., "error": "..."} and the exit
// code becomes 1; the other lines are still counted.

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "services/tokenizer/bpe_tokenizer.h"

namespace {

std::string DefaultVocabDir() {
  if (const char* dir = std::getenv("CONVSTATE_VOCAB_DIR"); dir != nullptr && *dir) return dir;
  const char* home = std::getenv("HOME");
  return absl::StrCat(home ? home : "", "/.cache/convstate/vocab/gpt-tokenizer-4.0.0");
}

int Usage() {
  std::fprintf(stderr,
               "usage: count_tokens --encoding=cl100k_base|o200k_base [--vocab_dir=DIR]\n"
               "reads JSON lines {\"id\": ..., \"text\": ...}, writes {\"id\": ..., \"tokens\": N}\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string encoding;
  std::string vocab_dir = DefaultVocabDir();
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (absl::StartsWith(arg, "--encoding=")) {
      encoding = arg.substr(strlen("--encoding="));
    } else if (absl::StartsWith(arg, "--vocab_dir=")) {
      vocab_dir = arg.substr(strlen("--vocab_dir="));
    } else {
      return Usage();
    }
  }
  if (encoding.empty()) return Usage();
  auto tokenizer = convstate::BpeTokenizer::LoadFile(
      encoding, absl::StrCat(vocab_dir, "/", encoding, ".tiktoken"));
  if (!tokenizer.ok()) {
    std::fprintf(stderr, "count_tokens: %s\n", std::string(tokenizer.status().message()).c_str());
    return 1;
  }
  std::ios::sync_with_stdio(false);
  int status = 0;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    nlohmann::json out = nlohmann::json::object();
    try {
      const nlohmann::json in = nlohmann::json::parse(line);
      if (in.contains("id")) out["id"] = in.at("id");
      if (!in.contains("text") || !in.at("text").is_string()) {
        throw std::invalid_argument("\"text\" must be a string");
      }
      out["tokens"] = (*tokenizer)->CountTokens(in.at("text").get_ref<const std::string&>());
    } catch (const std::exception& e) {
      out["error"] = e.what();
      status = 1;
    }
    std::cout << out.dump() << '\n';
  }
  return status;
}
