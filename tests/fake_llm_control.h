#ifndef CONVSTATE_TESTS_FAKE_LLM_CONTROL_H_
#define CONVSTATE_TESTS_FAKE_LLM_CONTROL_H_

#include <string>

namespace convstate::testing {

// Posts `json` (see FakeLlm::Control) to the /control endpoint of the
// fake_llm_server program listening on 127.0.0.1:`port`. True on HTTP 200.
bool ControlFakeLlm(int port, const std::string& json);

// How many chat completion requests the fake_llm_server on `port` has
// received so far (from GET /stats); -1 if it cannot be asked.
int FakeLlmRequests(int port);

}  // namespace convstate::testing

#endif  // CONVSTATE_TESTS_FAKE_LLM_CONTROL_H_
