// Tokenizer throughput on the files of $CONVSTATE_BENCH_CORPUS (written by
// tools/golden/make_bench_corpus.js), for each encoding. Run by
// tools/bench_tokenizer, which also times the reference on the same files.

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "services/tokenizer/bpe_tokenizer.h"

namespace convstate {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

void Tokenize(benchmark::State& state, const BpeTokenizer* tokenizer, const std::string* text) {
  int64_t tokens = 0;
  for (auto _ : state) {
    tokens = tokenizer->CountTokens(*text);
    benchmark::DoNotOptimize(tokens);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * text->size());
  state.counters["tokens"] = static_cast<double>(tokens);
}

}  // namespace
}  // namespace convstate

int main(int argc, char** argv) {
  using convstate::BpeTokenizer;
  const std::string vocab = convstate::Env("CONVSTATE_VOCAB_DIR");
  const std::string corpus = convstate::Env("CONVSTATE_BENCH_CORPUS");
  if (vocab.empty() || corpus.empty()) {
    std::fprintf(stderr, "set CONVSTATE_VOCAB_DIR and CONVSTATE_BENCH_CORPUS (tools/bench_tokenizer does)\n");
    return 2;
  }
  static std::map<std::string, std::unique_ptr<BpeTokenizer>> tokenizers;
  static std::map<std::string, std::string> texts;
  for (const char* encoding : {"cl100k_base", "o200k_base"}) {
    auto t = BpeTokenizer::LoadFile(encoding, absl::StrCat(vocab, "/", encoding, ".tiktoken"));
    if (!t.ok()) {
      std::fprintf(stderr, "%s\n", t.status().ToString().c_str());
      return 1;
    }
    tokenizers[encoding] = std::move(*t);
  }
  for (const auto& entry : std::filesystem::directory_iterator(corpus)) {
    if (entry.path().extension() != ".txt") continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    texts[entry.path().filename().string()] = s.str();
  }
  for (const auto& [encoding, tokenizer] : tokenizers) {
    for (const auto& [file, text] : texts) {
      benchmark::RegisterBenchmark(absl::StrCat(encoding, "/", file).c_str(), convstate::Tokenize,
                                   tokenizer.get(), &text)
          ->Unit(benchmark::kMillisecond)
          ->MinTime(1.0);
    }
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
