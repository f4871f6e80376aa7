#ifndef CONVSTATE_SERVICES_COMMON_TEXT_PROTO_H_
#define CONVSTATE_SERVICES_COMMON_TEXT_PROTO_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"

namespace convstate {

// Parses protobuf text format into `out`. INVALID_ARGUMENT with the first
// error's place ("line 3:7: ...") if it does not parse.
absl::Status ParseTextProto(absl::string_view text, google::protobuf::Message* out);

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_COMMON_TEXT_PROTO_H_
