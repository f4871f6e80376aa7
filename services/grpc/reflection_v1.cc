#include "services/grpc/reflection_v1.h"

#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"
#include "services/grpc/status.h"

namespace convstate {
namespace {

namespace refl = grpc::reflection::v1;
using google::protobuf::DescriptorPool;
using google::protobuf::FileDescriptor;

// `file` and everything it imports, each once, the file itself first.
void AddFiles(const FileDescriptor* file, absl::flat_hash_set<std::string>* sent,
              refl::FileDescriptorResponse* out) {
  if (!sent->insert(file->name()).second) return;
  google::protobuf::FileDescriptorProto proto;
  file->CopyTo(&proto);
  out->add_file_descriptor_proto(proto.SerializeAsString());
  for (int i = 0; i < file->dependency_count(); ++i) AddFiles(file->dependency(i), sent, out);
}

void NotFound(const std::string& what, refl::ServerReflectionResponse* out) {
  out->mutable_error_response()->set_error_code(static_cast<int>(grpc::StatusCode::NOT_FOUND));
  out->mutable_error_response()->set_error_message(what);
}

class Reactor final
    : public grpc::ServerBidiReactor<refl::ServerReflectionRequest, refl::ServerReflectionResponse> {
 public:
  explicit Reactor(const ReflectionV1* service) : service_(service) { StartRead(&request_); }

  void OnReadDone(bool ok) override {
    if (!ok) {  // The client closed its side: the stream is over.
      Finish(grpc::Status::OK);
      return;
    }
    response_ = service_->Answer(request_);
    StartWrite(&response_);
  }
  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::UNKNOWN, "write failed"));
      return;
    }
    StartRead(&request_);
  }
  void OnDone() override { delete this; }

 private:
  const ReflectionV1* const service_;
  refl::ServerReflectionRequest request_;
  refl::ServerReflectionResponse response_;
};

// A stream refused before its first message.
class Refused final
    : public grpc::ServerBidiReactor<refl::ServerReflectionRequest, refl::ServerReflectionResponse> {
 public:
  explicit Refused(const absl::Status& status) { Finish(ToGrpcStatus(status)); }
  void OnDone() override { delete this; }
};

}  // namespace

ReflectionV1::ReflectionV1(std::vector<std::string> services, AccessGate* gate)
    : services_(std::move(services)), gate_(gate) {}

grpc::ServerBidiReactor<refl::ServerReflectionRequest, refl::ServerReflectionResponse>*
ReflectionV1::ServerReflectionInfo(grpc::CallbackServerContext* ctx) {
  if (gate_ != nullptr) {
    if (absl::Status admitted = gate_->AdmitReflection(*ctx); !admitted.ok()) {
      return new Refused(admitted);
    }
  }
  return new Reactor(this);
}

refl::ServerReflectionResponse ReflectionV1::Answer(
    const refl::ServerReflectionRequest& request) const {
  const DescriptorPool* pool = DescriptorPool::generated_pool();
  refl::ServerReflectionResponse out;
  out.set_valid_host(request.host());
  *out.mutable_original_request() = request;
  absl::flat_hash_set<std::string> sent;
  switch (request.message_request_case()) {
    case refl::ServerReflectionRequest::kListServices:
      for (const std::string& name : services_) {
        out.mutable_list_services_response()->add_service()->set_name(name);
      }
      break;
    case refl::ServerReflectionRequest::kFileByFilename: {
      const FileDescriptor* file = pool->FindFileByName(request.file_by_filename());
      if (file == nullptr) {
        NotFound(absl::StrCat("file not found: ", request.file_by_filename()), &out);
      } else {
        AddFiles(file, &sent, out.mutable_file_descriptor_response());
      }
      break;
    }
    case refl::ServerReflectionRequest::kFileContainingSymbol: {
      const FileDescriptor* file = pool->FindFileContainingSymbol(request.file_containing_symbol());
      if (file == nullptr) {
        NotFound(absl::StrCat("symbol not found: ", request.file_containing_symbol()), &out);
      } else {
        AddFiles(file, &sent, out.mutable_file_descriptor_response());
      }
      break;
    }
    case refl::ServerReflectionRequest::kFileContainingExtension: {
      const refl::ExtensionRequest& ext = request.file_containing_extension();
      const auto* type = pool->FindMessageTypeByName(ext.containing_type());
      const auto* field =
          type == nullptr ? nullptr : pool->FindExtensionByNumber(type, ext.extension_number());
      if (field == nullptr) {
        NotFound(absl::StrCat("extension not found: ", ext.containing_type(), " ",
                              ext.extension_number()),
                 &out);
      } else {
        AddFiles(field->file(), &sent, out.mutable_file_descriptor_response());
      }
      break;
    }
    case refl::ServerReflectionRequest::kAllExtensionNumbersOfType: {
      const auto* type = pool->FindMessageTypeByName(request.all_extension_numbers_of_type());
      if (type == nullptr) {
        NotFound(absl::StrCat("type not found: ", request.all_extension_numbers_of_type()), &out);
        break;
      }
      std::vector<const google::protobuf::FieldDescriptor*> extensions;
      pool->FindAllExtensions(type, &extensions);
      auto* numbers = out.mutable_all_extension_numbers_response();
      numbers->set_base_type_name(type->full_name());
      for (const auto* e : extensions) numbers->add_extension_number(e->number());
      break;
    }
    case refl::ServerReflectionRequest::MESSAGE_REQUEST_NOT_SET:
      out.mutable_error_response()->set_error_code(
          static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
      out.mutable_error_response()->set_error_message("the request names nothing to look up");
      break;
  }
  return out;
}

}  // namespace convstate
