#ifndef CONVSTATE_SERVICES_COMPACTION_LEDGER_INSTRUCTIONS_H_
#define CONVSTATE_SERVICES_COMPACTION_LEDGER_INSTRUCTIONS_H_

// Standing instructions: the sentences of a user's message that constrain
// the rest of the conversation ("never restart anything in payments-core
// during business hours", "every change needs a rollback step before it is
// approved"), wherever they stand in the message.

#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace convstate {

// Where the rule in `sentence` (a user's) begins: the byte offset of the
// first clause that states a standing instruction, after any lead-in
// ("Before we start, one rule for this incident: never ..."); nullopt if
// none does. Questions, one-off reports ("I never got the page"), guesses
// ("it must have been the cache") and idioms ("don't worry") are not rules.
std::optional<size_t> RuleStart(absl::string_view sentence);

// True if `sentence` (a user's) holds a standing instruction.
bool IsStandingInstruction(absl::string_view sentence);

// The rule of an instruction, without its lead-in and cut to about
// `max_bytes` at a word (never inside a UTF-8 character): what an
// instruction is shortened to when the instructions pass their budget.
std::string RuleOf(absl::string_view instruction, size_t max_bytes = 200);

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_COMPACTION_LEDGER_INSTRUCTIONS_H_
