#ifndef CONVSTATE_SERVICES_COMPACTION_ENGINE_OVERFLOW_H_
#define CONVSTATE_SERVICES_COMPACTION_ENGINE_OVERFLOW_H_

#include <cstdint>
#include <string>
#include <vector>

#include "services/core/types.h"
#include "services/profiles/model_registry.h"
#include "storage/contract.h"

namespace convstate {

// What a provider's refusal of a view as too long changes for a
// conversation (BuildContext provider_overflow).
struct OverflowCorrection {
  // The hash of the view refused (the one `snapshot` gives, or one at least
  // as large): it must not come back.
  std::string refused_view_hash;
  // The conversation's overflow correction after it: how much more the
  // provider counts than the estimate, never lower than before.
  double correction = 1;
  // The prompt may not be as large again: nine tenths of the refused one,
  // in corrected counts.
  int64_t prompt_limit = 0;
  // The `provider_overflow` audit row.
  CompactionEvent event;
};

// The correction for a refusal of the view of `snapshot` for `pending`,
// with the prompt size the provider reported (0: it did not say). The
// factor is what it reported over the estimate, or a tenth more when it did
// not say; at least 5% more either way (it refused, so the estimate was too
// low), at most 4x per refusal, 16x in all.
OverflowCorrection CorrectForOverflow(const ContextSnapshot& snapshot,
                                      const ResolvedProfile& resolved,
                                      const std::vector<ItemData>& pending,
                                      int64_t reported_tokens);

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_COMPACTION_ENGINE_OVERFLOW_H_
