// Fuzzes the pretokenizer and the BPE tokenizer (cl100k_base and
// o200k_base from CONVSTATE_VOCAB_DIR) and the approximate counter: any
// bytes count without crashing; the ids of valid UTF-8 decode back to it,
// and their number is what CountTokens says.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "services/common/utf8.h"
#include "services/tokenizer/bpe_tokenizer.h"
#include "services/tokenizer/tokens.h"

namespace {

std::unique_ptr<convstate::BpeTokenizer> g_tokenizers[2];

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  const char* dir = std::getenv("CONVSTATE_VOCAB_DIR");
  if (dir == nullptr) return 0;
  const char* names[2] = {"cl100k_base", "o200k_base"};
  for (int i = 0; i < 2; ++i) {
    auto t = convstate::BpeTokenizer::LoadFile(names[i], std::string(dir) + "/" + names[i] +
                                                             ".tiktoken");
    if (t.ok()) g_tokenizers[i] = std::move(*t);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  static const auto* const kApproximate = convstate::NewApproximateTokenizer().release();
  if (kApproximate->CountTokens(text) < 0) std::abort();
  for (const auto& t : g_tokenizers) {
    if (t == nullptr) continue;
    const std::vector<uint32_t> ids = t->Encode(text);
    if (t->CountTokens(text) != static_cast<int64_t>(ids.size())) std::abort();
    if (convstate::IsValidUtf8(text)) {
      auto back = t->Decode(ids);
      if (!back.ok() || *back != text) std::abort();
    }
  }
  return 0;
}
