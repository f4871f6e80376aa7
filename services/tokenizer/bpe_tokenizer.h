#ifndef CONVSTATE_SERVICES_TOKENIZER_BPE_TOKENIZER_H_
#define CONVSTATE_SERVICES_TOKENIZER_BPE_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "services/tokenizer/pretokenizer.h"
#include "services/tokenizer/tokens.h"

namespace convstate {

// A byte-pair-encoding tokenizer compatible with OpenAI's tiktoken: for any
// valid UTF-8 text it gives the same token ids as tiktoken's
// encode_ordinary (special tokens are ordinary text here).
class BpeTokenizer final : public Tokenizer {
 public:
  // Loads a known encoding ("cl100k_base" or "o200k_base") from a
  // `.tiktoken` file (lines of "<base64 bytes> <rank>"). The file's SHA-256
  // must be the published one: FAILED_PRECONDITION if not (a wrong
  // vocabulary would miscount silently), NOT_FOUND if it cannot be read,
  // INVALID_ARGUMENT for an unknown encoding name.
  static absl::StatusOr<std::unique_ptr<BpeTokenizer>> LoadFile(absl::string_view encoding,
                                                                const std::string& path);

  // A tokenizer over explicit ranks, for tests. Every single byte must have
  // a rank.
  static absl::StatusOr<std::unique_ptr<BpeTokenizer>> FromRanks(
      std::string name, SplitPattern pattern,
      const std::vector<std::pair<std::string, uint32_t>>& ranks);

  const std::string& name() const { return name_; }
  size_t vocabulary_size() const { return decoder_.size(); }

  std::vector<uint32_t> Encode(absl::string_view text) const;
  int64_t CountTokens(absl::string_view text) const override;
  bool approximate() const override { return false; }
  // The bytes of `tokens`, concatenated. INVALID_ARGUMENT for an unknown id.
  absl::StatusOr<std::string> Decode(const std::vector<uint32_t>& tokens) const;

 private:
  BpeTokenizer(std::string name, SplitPattern pattern) : name_(std::move(name)), pretokenizer_(pattern) {}
  absl::Status AddRanks(const std::vector<std::pair<std::string, uint32_t>>& ranks);
  absl::Status ParseTiktoken(absl::string_view contents);

  // Calls `sink(rank)` for each token of one piece.
  template <typename Sink>
  void EncodePiece(absl::string_view piece, Sink&& sink) const;
  template <typename Sink>
  void MergeSmall(absl::string_view piece, Sink&& sink) const;
  template <typename Sink>
  void MergeLarge(absl::string_view piece, Sink&& sink) const;
  uint32_t RankOf(absl::string_view bytes) const;

  std::string name_;
  Pretokenizer pretokenizer_;
  // Token bytes, concatenated; the maps below view into it.
  std::string arena_;
  absl::flat_hash_map<absl::string_view, uint32_t> ranks_;
  std::vector<absl::string_view> decoder_;
  uint32_t byte_rank_[256] = {};
};

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_TOKENIZER_BPE_TOKENIZER_H_
