#ifndef CONVSTATE_SERVICES_PROFILES_MODEL_REGISTRY_H_
#define CONVSTATE_SERVICES_PROFILES_MODEL_REGISTRY_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "services/profiles/profile.h"
#include "services/tokenizer/tokens.h"

namespace convstate {

// A profile together with the tokenizer it names.
struct ResolvedProfile {
  ModelProfile profile;
  const Tokenizer* tokenizer = nullptr;
};

// The configured model profiles (see
// protos/convstate/config/v1/model_profiles.proto) and their tokenizers.
// Immutable after construction; thread-safe.
class ModelRegistry {
 public:
  // Parses `textproto` (text-format convstate.config.v1.ModelProfiles),
  // validates every profile and loads the exact tokenizers they name from
  // `vocab_dir`. INVALID_ARGUMENT naming the profile and field for a bad
  // file; the tokenizer loader's error if a vocabulary is missing or wrong.
  static absl::StatusOr<std::unique_ptr<ModelRegistry>> FromText(absl::string_view textproto,
                                                                 const std::string& vocab_dir);
  // Same, reading the file at `path`.
  static absl::StatusOr<std::unique_ptr<ModelRegistry>> FromFile(const std::string& path,
                                                                  const std::string& vocab_dir);
  // The profiles compiled into the binary
  // (services/profiles/default_model_profiles.textproto).
  static absl::string_view DefaultText();

  // The profile for `model`: one named exactly so, else the first whose
  // pattern matches, else the default profile. NOT_FOUND when there is none.
  absl::StatusOr<const ResolvedProfile*> Resolve(absl::string_view model) const;

  // The tokenizer for `profile` (which may carry per-conversation
  // overrides, but not of its encoding).
  const Tokenizer& TokenizerFor(const ModelProfile& profile) const;

  const std::vector<std::unique_ptr<ResolvedProfile>>& profiles() const { return profiles_; }

 private:
  ModelRegistry() = default;

  std::vector<std::unique_ptr<ResolvedProfile>> profiles_;
  std::vector<std::vector<std::string>> patterns_;  // parallel to profiles_
  const ResolvedProfile* default_ = nullptr;
  // Exact encodings by name; approximate ones by bytes per token.
  std::map<std::string, std::unique_ptr<Tokenizer>> exact_;
  std::map<double, std::unique_ptr<Tokenizer>> approximate_;
};

// True if `text` matches the glob `pattern` (`*` any run, `?` one byte).
bool GlobMatch(absl::string_view pattern, absl::string_view text);

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_PROFILES_MODEL_REGISTRY_H_
