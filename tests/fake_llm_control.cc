#include "tests/fake_llm_control.h"

#include <curl/curl.h>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"

namespace convstate::testing {

bool ControlFakeLlm(int port, const std::string& json) {
  CURL* curl = curl_easy_init();
  if (curl == nullptr) return false;
  const std::string url = absl::StrCat("http://127.0.0.1:", port, "/control");
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, json.c_str());
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 5000L);
  // The answer body is not needed; keep it off standard output.
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION,
                   +[](char*, size_t size, size_t count, void*) { return size * count; });
  const CURLcode code = curl_easy_perform(curl);
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_cleanup(curl);
  return code == CURLE_OK && status == 200;
}

int FakeLlmRequests(int port) {
  CURL* curl = curl_easy_init();
  if (curl == nullptr) return -1;
  const std::string url = absl::StrCat("http://127.0.0.1:", port, "/stats");
  std::string body;
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 5000L);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION,
                   +[](char* data, size_t size, size_t count, void* out) {
                     static_cast<std::string*>(out)->append(data, size * count);
                     return size * count;
                   });
  const CURLcode code = curl_easy_perform(curl);
  curl_easy_cleanup(curl);
  if (code != CURLE_OK) return -1;
  const nlohmann::json stats = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  return stats.is_object() ? stats.value("requests", -1) : -1;
}

}  // namespace convstate::testing
