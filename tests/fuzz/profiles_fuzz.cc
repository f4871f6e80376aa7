// Fuzzes the model-profiles text parser and its validation: any input is a
// registry or a clear error, never a crash. Exact tokenizers are looked up
// in a directory that does not exist, so their profiles fail cleanly.

#include <cstddef>
#include <cstdint>
#include <string>

#include "services/profiles/model_registry.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto registry = convstate::ModelRegistry::FromText(text, "/nonexistent");
  if (registry.ok()) (void)(*registry)->Resolve("gpt-4o");
  return 0;
}
