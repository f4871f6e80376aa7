#include "services/tokenizer/bpe_tokenizer.h"

#include <fstream>
#include <limits>
#include <queue>
#include <sstream>

#include <openssl/evp.h>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace convstate {
namespace {

constexpr uint32_t kNoRank = std::numeric_limits<uint32_t>::max();
// Pieces up to this many bytes use tiktoken's own quadratic merge, which is
// fastest for short pieces; longer ones use the heap merge.
constexpr size_t kSmallPiece = 96;

struct KnownEncoding {
  const char* name;
  SplitPattern pattern;
  size_t tokens;
  const char* sha256;
};

constexpr KnownEncoding kKnown[] = {
    {"cl100k_base", SplitPattern::kCl100k, 100256,
     "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"},
    {"o200k_base", SplitPattern::kO200k, 199998,
     "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"},
};

std::string Sha256Hex(absl::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(data.data(), data.size(), digest, &length, EVP_sha256(), nullptr);
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) absl::StrAppendFormat(&hex, "%02x", digest[i]);
  return hex;
}

}  // namespace

absl::StatusOr<std::unique_ptr<BpeTokenizer>> BpeTokenizer::LoadFile(absl::string_view encoding,
                                                                     const std::string& path) {
  const KnownEncoding* known = nullptr;
  for (const KnownEncoding& k : kKnown) {
    if (encoding == k.name) known = &k;
  }
  if (known == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("unknown encoding '", encoding,
                                                   "' (known: cl100k_base, o200k_base)"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read vocabulary ", path));
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string contents = buffer.str();
  if (const std::string sum = Sha256Hex(contents); sum != known->sha256) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, ": SHA-256 ", sum, " is not that of the published ", known->name, " vocabulary"));
  }
  std::unique_ptr<BpeTokenizer> t(new BpeTokenizer(known->name, known->pattern));
  if (absl::Status s = t->ParseTiktoken(contents); !s.ok()) return s;
  if (t->vocabulary_size() != known->tokens) {
    return absl::FailedPreconditionError(absl::StrCat(path, ": ", t->vocabulary_size(),
                                                      " tokens, expected ", known->tokens));
  }
  return t;
}

absl::StatusOr<std::unique_ptr<BpeTokenizer>> BpeTokenizer::FromRanks(
    std::string name, SplitPattern pattern,
    const std::vector<std::pair<std::string, uint32_t>>& ranks) {
  std::unique_ptr<BpeTokenizer> t(new BpeTokenizer(std::move(name), pattern));
  if (absl::Status s = t->AddRanks(ranks); !s.ok()) return s;
  return t;
}

absl::Status BpeTokenizer::ParseTiktoken(absl::string_view contents) {
  std::vector<std::pair<std::string, uint32_t>> ranks;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(contents, '\n', absl::SkipEmpty())) {
    ++line_number;
    const size_t space = line.find(' ');
    std::string bytes;
    uint32_t rank;
    if (space == absl::string_view::npos ||
        !absl::Base64Unescape(line.substr(0, space), &bytes) ||
        !absl::SimpleAtoi(line.substr(space + 1), &rank)) {
      return absl::FailedPreconditionError(absl::StrCat("vocabulary line ", line_number,
                                                        " is not '<base64> <rank>'"));
    }
    ranks.emplace_back(std::move(bytes), rank);
  }
  return AddRanks(ranks);
}

absl::Status BpeTokenizer::AddRanks(const std::vector<std::pair<std::string, uint32_t>>& ranks) {
  size_t total = 0;
  for (const auto& [bytes, rank] : ranks) total += bytes.size();
  arena_.reserve(total);  // Views into the arena stay valid: it never grows.
  decoder_.assign(ranks.size(), absl::string_view());
  ranks_.reserve(ranks.size());
  for (const auto& [bytes, rank] : ranks) {
    if (rank >= ranks.size()) {
      return absl::FailedPreconditionError(absl::StrCat("rank ", rank, " out of range"));
    }
    const size_t at = arena_.size();
    arena_.append(bytes);
    const absl::string_view view(arena_.data() + at, bytes.size());
    if (!ranks_.emplace(view, rank).second || !decoder_[rank].empty() || view.empty()) {
      return absl::FailedPreconditionError(absl::StrCat("duplicate or empty token at rank ", rank));
    }
    decoder_[rank] = view;
  }
  for (int b = 0; b < 256; ++b) {
    const char c = static_cast<char>(b);
    const uint32_t r = RankOf(absl::string_view(&c, 1));
    if (r == kNoRank) return absl::FailedPreconditionError(absl::StrCat("byte ", b, " has no rank"));
    byte_rank_[b] = r;
  }
  return absl::OkStatus();
}

uint32_t BpeTokenizer::RankOf(absl::string_view bytes) const {
  auto it = ranks_.find(bytes);
  return it == ranks_.end() ? kNoRank : it->second;
}

template <typename Sink>
void BpeTokenizer::EncodePiece(absl::string_view piece, Sink&& sink) const {
  if (piece.size() == 1) {
    sink(byte_rank_[static_cast<unsigned char>(piece[0])]);
    return;
  }
  if (const uint32_t r = RankOf(piece); r != kNoRank) {
    sink(r);
    return;
  }
  if (piece.size() <= kSmallPiece) {
    MergeSmall(piece, sink);
  } else {
    MergeLarge(piece, sink);
  }
}

// tiktoken's merge: parts[i] = (start, rank of the pair starting at part i);
// repeatedly merge the lowest-ranked pair, the leftmost among equals.
template <typename Sink>
void BpeTokenizer::MergeSmall(absl::string_view piece, Sink&& sink) const {
  thread_local std::vector<std::pair<uint32_t, uint32_t>> parts;
  parts.clear();
  const uint32_t n = static_cast<uint32_t>(piece.size());
  for (uint32_t i = 0; i + 1 < n; ++i) parts.emplace_back(i, RankOf(piece.substr(i, 2)));
  parts.emplace_back(n - 1, kNoRank);
  parts.emplace_back(n, kNoRank);
  auto pair_rank = [&](size_t i) {
    // Rank of parts i and i+1 merged with i+2 (before the removal of i+1).
    if (i + 3 < parts.size()) {
      return RankOf(piece.substr(parts[i].first, parts[i + 3].first - parts[i].first));
    }
    return kNoRank;
  };
  while (true) {
    uint32_t min_rank = kNoRank;
    size_t min_i = 0;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      if (parts[i].second < min_rank) {
        min_rank = parts[i].second;
        min_i = i;
      }
    }
    if (min_rank == kNoRank) break;
    parts[min_i].second = pair_rank(min_i);
    if (min_i > 0) parts[min_i - 1].second = pair_rank(min_i - 1);
    parts.erase(parts.begin() + min_i + 1);
  }
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    sink(RankOf(piece.substr(parts[i].first, parts[i + 1].first - parts[i].first)));
  }
}

// The same merges in O(n log n): parts form a linked list, candidate pairs
// sit in a heap ordered by (rank, start) -- lowest rank, then leftmost, as
// above -- and an entry is stale once either side of its pair has changed.
template <typename Sink>
void BpeTokenizer::MergeLarge(absl::string_view piece, Sink&& sink) const {
  const uint32_t n = static_cast<uint32_t>(piece.size());
  constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();
  // Parts are named by their start byte; end/next/prev are indexed by it.
  std::vector<uint32_t> end(n), next(n), prev(n);
  for (uint32_t i = 0; i < n; ++i) {
    end[i] = i + 1;
    next[i] = i + 1 < n ? i + 1 : kNone;
    prev[i] = i > 0 ? i - 1 : kNone;
  }
  struct Candidate {
    uint32_t rank, start, pair_end;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : start > o.start;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  auto push = [&](uint32_t left) {
    if (left == kNone || next[left] == kNone) return;
    const uint32_t pair_end = end[next[left]];
    const uint32_t r = RankOf(piece.substr(left, pair_end - left));
    if (r != kNoRank) heap.push({r, left, pair_end});
  };
  for (uint32_t i = 0; i + 1 < n; ++i) push(i);
  std::vector<bool> alive(n, true);
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    const uint32_t left = c.start;
    if (!alive[left] || next[left] == kNone || end[next[left]] != c.pair_end) continue;
    const uint32_t right = next[left];
    alive[right] = false;
    end[left] = end[right];
    next[left] = next[right];
    if (next[left] != kNone) prev[next[left]] = left;
    push(prev[left]);
    push(left);
  }
  for (uint32_t i = 0; i != kNone; i = next[i]) sink(RankOf(piece.substr(i, end[i] - i)));
}

std::vector<uint32_t> BpeTokenizer::Encode(absl::string_view text) const {
  std::vector<uint32_t> out;
  out.reserve(text.size() / 3 + 1);
  pretokenizer_.Split(text, [&](absl::string_view piece) {
    EncodePiece(piece, [&](uint32_t rank) { out.push_back(rank); });
  });
  return out;
}

int64_t BpeTokenizer::CountTokens(absl::string_view text) const {
  int64_t count = 0;
  pretokenizer_.Split(text, [&](absl::string_view piece) {
    EncodePiece(piece, [&](uint32_t) { ++count; });
  });
  return count;
}

absl::StatusOr<std::string> BpeTokenizer::Decode(const std::vector<uint32_t>& tokens) const {
  std::string out;
  for (uint32_t t : tokens) {
    if (t >= decoder_.size()) return absl::InvalidArgumentError(absl::StrCat("unknown token ", t));
    out.append(decoder_[t].data(), decoder_[t].size());
  }
  return out;
}

}  // namespace convstate
