#ifndef CONVSTATE_STORAGE_CONTEXT_DELTA_H_
#define CONVSTATE_STORAGE_CONTEXT_DELTA_H_

#include "storage/contract.h"

namespace convstate {

// How the conversation `now` differs from `held`, the row of a snapshot a
// caller keeps (null: none): kUnchanged at the same versions, kAppended
// when only the version moved (appends change nothing else), kReloaded
// otherwise. Every backend's LoadContextSince decides by this rule.
ContextDelta::Kind DeltaKind(const Conversation& now, const Conversation* held);

// `held` brought up to date with `delta` (from LoadContextSince(held's
// conversation)): the same snapshot, the new row, or the row and the
// appended items after the held ones.
ContextSnapshot ApplyDelta(const ContextSnapshot& held, ContextDelta delta);

}  // namespace convstate

#endif  // CONVSTATE_STORAGE_CONTEXT_DELTA_H_
