#include "services/compaction/engine/overflow.h"

#include <algorithm>

#include "services/compaction/engine/summaries.h"
#include "services/compaction/view/context_view.h"

namespace convstate {

OverflowCorrection CorrectForOverflow(const ContextSnapshot& snapshot,
                                      const ResolvedProfile& resolved,
                                      const std::vector<ItemData>& pending,
                                      int64_t reported_tokens) {
  const Tokenizer& tokenizer = *resolved.tokenizer;
  ViewOptions options;
  options.tokenizer = &tokenizer;
  const ContextView refused =
      AssembleView(snapshot, resolved.profile, tokenizer.approximate(), pending, options);
  OverflowCorrection out;
  out.refused_view_hash = DigestView(refused, snapshot.conversation.prune_boundary).view_hash;
  const int64_t estimated = refused.tokens.total - refused.tokens.output_reserve;
  double factor = 1.1;
  if (reported_tokens > 0 && estimated > 0) {
    factor = static_cast<double>(reported_tokens) / static_cast<double>(estimated);
  }
  factor = std::clamp(factor, 1.05, 4.0);
  const double before = snapshot.conversation.overflow_correction;
  out.correction = std::min(before * factor, 16.0);
  out.prompt_limit = std::max<int64_t>(
      1, static_cast<int64_t>(0.9 * static_cast<double>(estimated) * out.correction / before));
  out.event.event = "provider_overflow";
  out.event.tokens_before = estimated;
  out.event.tokens_after = reported_tokens;
  out.event.detail = DetailOf({{"reported_tokens", reported_tokens},
                               {"estimated_tokens", estimated},
                               {"correction_before", before},
                               {"correction_after", out.correction},
                               {"prompt_limit", out.prompt_limit},
                               {"refused_view_hash", out.refused_view_hash}});
  return out;
}

}  // namespace convstate
