#include "services/common/text_proto.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"

namespace convstate {
namespace {

// Keeps the first parse error with its line and column.
class FirstError : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, int column, const std::string& message) override {
    if (first_.empty()) first_ = absl::StrCat("line ", line + 1, ":", column + 1, ": ", message);
  }
  const std::string& first() const { return first_; }

 private:
  std::string first_;
};

}  // namespace

absl::Status ParseTextProto(absl::string_view text, google::protobuf::Message* out) {
  google::protobuf::TextFormat::Parser parser;
  FirstError errors;
  parser.RecordErrorsTo(&errors);
  if (parser.ParseFromString(std::string(text), out)) return absl::OkStatus();
  return absl::InvalidArgumentError(errors.first().empty() ? "does not parse" : errors.first());
}

}  // namespace convstate
