#ifndef CONVSTATE_SERVICES_COMPACTION_SUMMARIZERS_EXTRACTIVE_H_
#define CONVSTATE_SERVICES_COMPACTION_SUMMARIZERS_EXTRACTIVE_H_

#include <memory>

#include "services/compaction/summarizers/summarizer.h"

namespace convstate {

// The built-in summarizer: deterministic, no network. Works on the items
// (or, for a fold, on the merged chunks' lines) and keeps, within the
// budget, what the ledger does not already hold: the user's requests and
// questions first, then the assistant's answers, then one short attributed
// line per tool call and result (what ran, its outcome, error lines found
// anywhere in the output), never raw fragments of tool output. Each line
// keeps who said it, in the original order.
std::unique_ptr<Summarizer> NewExtractiveSummarizer();

inline constexpr char kExtractiveModel[] = "convstate-extractive";
inline constexpr char kExtractivePromptVersion[] = "extractive-v2";

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_COMPACTION_SUMMARIZERS_EXTRACTIVE_H_
