#ifndef CONVSTATE_SERVICES_API_WIRE_CHECK_H_
#define CONVSTATE_SERVICES_API_WIRE_CHECK_H_

#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "google/protobuf/descriptor.h"

namespace convstate {

// Walks `wire`, the serialized form of a `descriptor` message, and returns
// the path of the first string field whose bytes are not valid UTF-8 (e.g.
// "items[1].content"), or nullopt if there is none or the bytes do not
// parse. Protobuf refuses such messages without saying where; this says
// where, so the client can be told which field to fix.
std::optional<std::string> FindInvalidUtf8(const google::protobuf::Descriptor* descriptor,
                                           absl::string_view wire);

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_API_WIRE_CHECK_H_
