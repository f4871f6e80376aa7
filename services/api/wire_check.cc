#include "services/api/wire_check.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"
#include "services/api/validation.h"
#include "services/common/utf8.h"

namespace convstate {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::internal::WireFormatLite;

constexpr int kMaxDepth = 32;

std::optional<std::string> Walk(const Descriptor* d, absl::string_view wire,
                                 const std::string& prefix, int depth) {
  if (depth > kMaxDepth) return std::nullopt;
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(wire.data()),
                                            static_cast<int>(wire.size()));
  std::map<int, int> occurrences;
  while (uint32_t tag = in.ReadTag()) {
    const int number = WireFormatLite::GetTagFieldNumber(tag);
    const FieldDescriptor* field = d->FindFieldByNumber(number);
    if (field == nullptr ||
        WireFormatLite::GetTagWireType(tag) != WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      if (!WireFormatLite::SkipField(&in, tag)) return std::nullopt;
      continue;
    }
    uint32_t length;
    std::string bytes;
    if (!in.ReadVarint32(&length) || !in.ReadString(&bytes, static_cast<int>(length))) {
      return std::nullopt;
    }
    std::string path = prefix.empty() ? field->name() : absl::StrCat(prefix, ".", field->name());
    if (field->is_repeated() && !field->is_map()) {
      absl::StrAppend(&path, "[", occurrences[number]++, "]");
    }
    if (field->type() == FieldDescriptor::TYPE_STRING) {
      if (!IsValidUtf8(bytes)) return path;
    } else if (field->type() == FieldDescriptor::TYPE_MESSAGE) {
      if (auto found = Walk(field->message_type(), bytes, path, depth + 1)) return found;
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> FindInvalidUtf8(const Descriptor* descriptor,
                                           absl::string_view wire) {
  return Walk(descriptor, wire, "", 0);
}

}  // namespace convstate
