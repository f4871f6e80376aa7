"""The client against a real server and PostgreSQL, started by clients/python/test.

The runner passes where they are in CONVSTATE_TEST_* variables; without
them these tests fail (they are not skipped).
"""

import os
import socket
import subprocess
import time
import unittest
import uuid

import grpc

from convstate.v1 import convstate_pb2 as pb

from convstate_client import ConvStateClient, ConvStateError


def env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise RuntimeError(f"{name} is not set: run these tests with clients/python/test")
    return value


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def stored(items):
    """What ListItems returned, as comparable tuples."""
    return [(i.role, i.kind, i.content, i.tool_name, i.tool_call_id) for i in items]


S, U, A, T = pb.ROLE_SYSTEM, pb.ROLE_USER, pb.ROLE_ASSISTANT, pb.ROLE_TOOL
MSG, CALL, RESULT = pb.ITEM_KIND_MESSAGE, pb.ITEM_KIND_TOOL_CALL, pb.ITEM_KIND_TOOL_RESULT


def check_openai_pairing(test, messages):
    """Each tool message answers a call of the assistant message before its run of results."""
    calls: set = set()
    for m in messages:
        if m["role"] == "assistant":
            calls = {c["id"] for c in m.get("tool_calls", [])}
        elif m["role"] == "tool":
            test.assertIn(m["tool_call_id"], calls, f"tool result without its call: {m}")
            calls.discard(m["tool_call_id"])
        else:
            test.assertEqual(calls, set(), f"calls left unanswered before {m}")


class ServerTestCase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.address = env("CONVSTATE_TEST_ADDRESS")
        cls.client = ConvStateClient(cls.address, max_attempts=2, initial_backoff=0.05)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()


class GatewayLoopTest(ServerTestCase):
    def test_three_turns_with_a_tool_call_stored_once(self):
        c = self.client
        conv = new_id("loop")
        system = "You are a travel assistant."
        turn1 = [{"role": "user", "content": "What is the weather in Oslo?"}]
        view = c.before_inference(conv, turn1, model="gpt-4o", system_prompt=system,
                                  idempotency_key=f"{conv}-1")
        self.assertEqual(view.messages, [{"role": "system", "content": system},
                                         {"role": "user", "content": "What is the weather in Oslo?"}])
        self.assertEqual(view.version, 1)
        self.assertEqual(len(view.view_hash), 64)

        # The gateway retries the whole call with the same key: nothing is
        # stored twice, the same view comes back.
        again = c.before_inference(conv, turn1, model="gpt-4o", system_prompt=system,
                                   idempotency_key=f"{conv}-1")
        self.assertEqual((again.view_hash, again.version), (view.view_hash, view.version))

        call = {"role": "assistant", "content": "Let me check.", "tool_calls": [
            {"id": "call_oslo", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}]}
        usage = {"prompt_tokens": 30, "completion_tokens": 12}
        r = c.after_inference(conv, call, usage, idempotency_key=f"{conv}-2")
        self.assertFalse(r.replayed)
        self.assertEqual(r.version, 2)
        r = c.after_inference(conv, call, usage, idempotency_key=f"{conv}-2")
        self.assertTrue(r.replayed)
        self.assertEqual(r.version, 2)

        # Turn 1 continues with the tool's result; then the model answers.
        view = c.before_inference(conv, [{"role": "tool", "tool_call_id": "call_oslo",
                                          "content": "3 C, snow"}])
        self.assertEqual(view.messages[-2:], [
            {"role": "assistant", "content": "Let me check.", "tool_calls": call["tool_calls"]},
            {"role": "tool", "tool_call_id": "call_oslo", "content": "3 C, snow"},
        ])
        c.after_inference(conv, {"role": "assistant", "content": "It is 3 C and snowing."},
                          {"prompt_tokens": 60, "completion_tokens": 8})

        # Turns 2 and 3: plain questions; the answer of turn 3 arrives
        # Anthropic shaped, with Anthropic usage.
        view = c.before_inference(conv, [{"role": "user", "content": "And tomorrow?"}])
        self.assertEqual(view.version, 5)
        c.after_inference(conv, {"role": "assistant", "content": "Tomorrow: sunny."},
                          {"prompt_tokens": 80, "completion_tokens": 5,
                           "prompt_tokens_details": {"cached_tokens": 64}})
        view = c.before_inference(conv, [{"role": "user", "content": "Thanks, bye!"}],
                                  idempotency_key=f"{conv}-7")
        answer = {"role": "assistant", "content": [{"type": "text", "text": "Bye!"}],
                  "usage": {"input_tokens": 10, "output_tokens": 2, "cache_read_input_tokens": 80}}
        c.after_inference(conv, answer, idempotency_key=f"{conv}-8")
        # Both retried once more after the fact.
        c.before_inference(conv, [{"role": "user", "content": "Thanks, bye!"}],
                           idempotency_key=f"{conv}-7")
        self.assertTrue(c.after_inference(conv, answer, idempotency_key=f"{conv}-8").replayed)

        expected = [
            (U, MSG, "What is the weather in Oslo?", "", ""),
            (A, MSG, "Let me check.", "", ""),
            (A, CALL, '{"city": "Oslo"}', "get_weather", "call_oslo"),
            # The call was stored by an earlier append, and an OpenAI tool
            # message without `name` does not say the tool's name.
            (T, RESULT, "3 C, snow", "", "call_oslo"),
            (A, MSG, "It is 3 C and snowing.", "", ""),
            (U, MSG, "And tomorrow?", "", ""),
            (A, MSG, "Tomorrow: sunny.", "", ""),
            (U, MSG, "Thanks, bye!", "", ""),
            (A, MSG, "Bye!", "", ""),
        ]
        items = c.list_items(conv)
        self.assertEqual(stored(items), expected)
        self.assertEqual([i.sequence for i in items], list(range(1, 10)))
        self.assertEqual([i.turn_index for i in items], [1, 1, 1, 1, 1, 2, 2, 3, 3])

        # The whole conversation as the next view shows it.
        final = c.build_context(conv)
        self.assertEqual(final.version, 8)  # eight appends
        self.assertEqual(final.messages, [
            {"role": "system", "content": system},
            {"role": "user", "content": "What is the weather in Oslo?"},
            {"role": "assistant", "content": "Let me check.", "tool_calls": call["tool_calls"]},
            {"role": "tool", "tool_call_id": "call_oslo", "content": "3 C, snow"},
            {"role": "assistant", "content": "It is 3 C and snowing."},
            {"role": "user", "content": "And tomorrow?"},
            {"role": "assistant", "content": "Tomorrow: sunny."},
            {"role": "user", "content": "Thanks, bye!"},
            {"role": "assistant", "content": "Bye!"},
        ])
        check_openai_pairing(self, final.messages)
        anthropic = c.build_context(conv, format="anthropic")
        self.assertEqual(anthropic.view_hash, final.view_hash)
        self.assertEqual(anthropic.system, [{"type": "text", "text": system,
                                             "cache_control": {"type": "ephemeral"}}])
        self.assertEqual([m["role"] for m in anthropic.messages],
                         ["user", "assistant", "user", "assistant", "user", "assistant", "user",
                          "assistant"])
        self.assertEqual(anthropic.messages[1]["content"][1],
                         {"type": "tool_use", "id": "call_oslo", "name": "get_weather",
                          "input": {"city": "Oslo"}})
        self.assertEqual(anthropic.messages[2]["content"],
                         [{"type": "tool_result", "tool_use_id": "call_oslo", "content": "3 C, snow"}])

    def test_after_inference_takes_whole_responses(self):
        """A ChatCompletion dict, an SDK object (model_dump), an Anthropic response."""
        class Message:  # as the provider SDKs' pydantic models
            def model_dump(self):
                return {"role": "assistant", "content": None, "refusal": None, "tool_calls": [
                    {"id": "c9", "type": "function",
                     "function": {"name": "lookup", "arguments": '{"k":1}'}}]}

        conv = new_id("shapes")
        c = self.client
        c.before_inference(conv, [{"role": "user", "content": "go"}], model="gpt-4o")
        completion = {"id": "chatcmpl-1", "object": "chat.completion",
                      "choices": [{"index": 0, "finish_reason": "stop",
                                   "message": {"role": "assistant", "content": "first"}}],
                      "usage": {"prompt_tokens": 12, "completion_tokens": 1}}
        c.after_inference(conv, completion)
        c.after_inference(conv, Message())
        c.before_inference(conv, [{"role": "tool", "tool_call_id": "c9", "name": "lookup",
                                   "content": "v"}])
        c.after_inference(conv, {"id": "msg_1", "type": "message", "role": "assistant",
                                 "content": [{"type": "thinking", "thinking": "so", "signature": "s"},
                                             {"type": "text", "text": "done"}],
                                 "usage": {"input_tokens": 30, "output_tokens": 3}})
        self.assertEqual(stored(c.list_items(conv)), [
            (U, MSG, "go", "", ""),
            (A, MSG, "first", "", ""),
            (A, CALL, '{"k":1}', "lookup", "c9"),
            (T, RESULT, "v", "lookup", "c9"),
            (A, pb.ITEM_KIND_REASONING, "so", "", ""),
            (A, MSG, "done", "", ""),
        ])
        # The reasoning is stored, not sent back.
        self.assertEqual(c.build_context(conv).messages[-1], {"role": "assistant", "content": "done"})
        with self.assertRaisesRegex(ValueError, "assistant_message.role"):
            c.after_inference(conv, {"role": "user", "content": "not an answer"})

    def test_same_key_for_other_messages_is_an_error(self):
        conv = new_id("key")
        self.client.before_inference(conv, [{"role": "user", "content": "one"}], model="gpt-4o",
                                     idempotency_key=f"{conv}-k")
        with self.assertRaises(ConvStateError) as caught:
            self.client.before_inference(conv, [{"role": "user", "content": "two"}],
                                         idempotency_key=f"{conv}-k")
        self.assertEqual(caught.exception.code, grpc.StatusCode.ALREADY_EXISTS)
        self.assertEqual(caught.exception.method, "AppendTurn")
        self.assertEqual(stored(self.client.list_items(conv)), [(U, MSG, "one", "", "")])

    def test_unknown_conversation_without_a_model(self):
        with self.assertRaises(ConvStateError) as caught:
            self.client.before_inference(new_id("none"), [{"role": "user", "content": "hi"}])
        self.assertEqual(caught.exception.code, grpc.StatusCode.NOT_FOUND)
        self.assertEqual(caught.exception.attempts, 1)
        self.assertIn("not found", caught.exception.details)

    def test_service_refusal_carries_code_and_message(self):
        conv = new_id("bad")
        self.client.create_conversation(conv, "gpt-4o")
        with self.assertRaises(ConvStateError) as caught:
            self.client.create_conversation(conv, "gpt-4o")
        self.assertEqual(caught.exception.code, grpc.StatusCode.ALREADY_EXISTS)
        # A tool message needs a call id: refused before it is sent.
        with self.assertRaisesRegex(ValueError, r"tool_call_id: required"):
            self.client.before_inference(conv, [{"role": "tool", "content": "x"}])


class CompactedViewTest(ServerTestCase):
    """A view with summaries, the fact ledger and pruned tool output."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        c = cls.client
        cls.conv = new_id("compacted")
        # A small window with low thresholds: the first BuildContext
        # compacts (prune, summarize), which gives every breakpoint kind.
        c.create_conversation(
            cls.conv, "gpt-4o", system_prompt="You are a weather bot.",
            pinned_instructions="Always answer in English.",
            profile_overrides=pb.ProfileOverrides(
                context_window=8000, token_floor=0, soft_threshold=0.2, hard_threshold=0.3,
                emergency_threshold=0.95))
        for t in range(6):
            c.append(cls.conv, [
                {"role": "user", "content": f"Question {t}: the weather in city {t}? "
                                            + "Some padding words here. " * 20},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": f"call_{t}", "type": "function",
                     "function": {"name": "weather", "arguments": '{"city": %d}' % t}}]},
                {"role": "tool", "tool_call_id": f"call_{t}",
                 "content": f"Sunny, {20 + t} degrees, ticket ABC-{100 + t}. " + "Lots of output. " * 50},
                {"role": "assistant", "content": f"It is sunny in city {t}."},
            ])
        # The view as it stands (the first BuildContext compacts), then the
        # gateway's next call with a new question.
        cls.view = c.build_context(cls.conv, format="anthropic")
        cls.next_view = c.before_inference(
            cls.conv, [{"role": "user", "content": "Which ticket was city 1?"}], format="anthropic")
        cls.views = (cls.view, cls.next_view)

    def test_view_was_compacted_with_every_breakpoint_kind(self):
        r = self.view.response
        self.assertEqual(r.context_status, pb.CONTEXT_STATUS_SUMMARIZED)
        self.assertGreater(r.compaction_version, 0)
        self.assertEqual(self.view.compaction_version, r.compaction_version)
        self.assertEqual(sorted(b.kind for b in r.cache_breakpoints),
                         [pb.CACHE_BREAKPOINT_KIND_PINNED, pb.CACHE_BREAKPOINT_KIND_SUMMARIES,
                          pb.CACHE_BREAKPOINT_KIND_PRUNE_BOUNDARY])

    def test_anthropic_blocks_alternate_and_pair(self):
        for view in self.views:
            with self.subTest(view=view.view_hash):
                self.check_blocks(view)
        messages = self.next_view.messages
        self.assertEqual(messages[-1]["role"], "user")
        self.assertIn({"type": "text", "text": "Which ticket was city 1?"}, messages[-1]["content"])

    def check_blocks(self, view):
        messages = view.messages
        self.assertEqual(messages[0]["role"], "user")
        roles = [m["role"] for m in messages]
        self.assertTrue(all(a != b for a, b in zip(roles, roles[1:])), roles)
        for i, m in enumerate(messages):
            uses = [b["id"] for b in m["content"] if b["type"] == "tool_use"]
            if uses:
                results = [b["tool_use_id"] for b in messages[i + 1]["content"]
                           if b["type"] == "tool_result"]
                self.assertEqual(results, uses)
        # Every entry is one block: the leading system entries in `system`,
        # the rest in order.
        r = view.response
        n_system = sum(1 for e in r.entries if e.section in (pb.SECTION_SYSTEM, pb.SECTION_PINNED,
                                                              pb.SECTION_SUMMARY, pb.SECTION_LEDGER))
        self.assertEqual(len(view.system), n_system)
        self.assertEqual(sum(len(m["content"]) for m in messages), len(r.entries) - n_system)

    def test_cache_control_exactly_at_the_breakpoints(self):
        for view in self.views:
            with self.subTest(view=view.view_hash):
                self.check_cache_control(view)
        r = self.view.response
        pinned = [b for b in r.cache_breakpoints if b.kind == pb.CACHE_BREAKPOINT_KIND_PINNED][0]
        self.assertIn("cache_control", self.view.system[pinned.last_entry])
        # The prune boundary is in the messages: on the last pruned tool result.
        prune = [b for b in r.cache_breakpoints if b.kind == pb.CACHE_BREAKPOINT_KIND_PRUNE_BOUNDARY][0]
        blocks = list(self.view.system) + [b for m in self.view.messages for b in m["content"]]
        block = blocks[prune.last_entry]
        self.assertEqual(block["type"], "tool_result")
        self.assertEqual(block["cache_control"], {"type": "ephemeral"})
        self.assertTrue(r.entries[prune.last_entry].pruned)

    def check_cache_control(self, view):
        r = view.response
        self.assertTrue(r.cache_breakpoints)
        # The blocks in entry order, system first: block k shows entry k.
        blocks = list(view.system) + [b for m in view.messages for b in m["content"]]
        self.assertEqual(len(blocks), len(r.entries))
        marked = [k for k, b in enumerate(blocks) if "cache_control" in b]
        self.assertEqual(marked, sorted(b.last_entry for b in r.cache_breakpoints))
        for bp in r.cache_breakpoints:
            block, e = blocks[bp.last_entry], r.entries[bp.last_entry]
            self.assertEqual(block["cache_control"], {"type": "ephemeral"})
            shown = block.get("text", block.get("content", block.get("id")))
            self.assertEqual(shown, e.tool_call_id if e.kind == CALL else e.content)

    def test_openai_form_of_the_same_view(self):
        view = ConvStateClient.view(self.view.response, format="openai")
        self.assertEqual(view.view_hash, self.view.view_hash)
        r = self.view.response
        leading = [m for m in view.messages[:4]]
        self.assertEqual([m["role"] for m in leading], ["system"] * 4)
        self.assertEqual([m["content"] for m in leading], [e.content for e in r.entries[:4]])
        self.assertTrue(leading[2]["content"].startswith("Summary of"))
        check_openai_pairing(self, view.messages)
        pruned = [e for e in r.entries if e.pruned]
        self.assertTrue(pruned)
        self.assertIn({"role": "tool", "tool_call_id": pruned[0].tool_call_id,
                       "content": pruned[0].content}, view.messages)

    def test_overflow_returns_another_smaller_view(self):
        conv = new_id("overflow")
        c = self.client
        c.create_conversation(conv, "gpt-4o", system_prompt="Be brief.")
        for t in range(8):
            c.append(conv, [{"role": "user", "content": f"Question {t}. " + "words " * 300},
                            {"role": "assistant", "content": f"Answer {t}. " + "more " * 300}])
        before = c.before_inference(conv, [{"role": "user", "content": "Last question?"}])
        after = c.report_overflow(conv, provider_reported_tokens=130000)
        self.assertNotEqual(after.view_hash, before.view_hash)
        self.assertEqual(after.version, before.version)
        self.assertGreater(after.compaction_version, before.compaction_version)
        # Counts are in corrected units after an overflow: compare what is shown.
        self.assertEqual(after.response.context_status, pb.CONTEXT_STATUS_SUMMARIZED)
        self.assertLess(len(after.messages), len(before.messages))
        live = lambda v: [e.sequence for e in v.response.entries if e.section == pb.SECTION_LIVE]
        self.assertLess(set(live(after)), set(live(before)))
        self.assertEqual(after.messages[0], {"role": "system", "content": "Be brief."})
        self.assertEqual(after.messages[-1], {"role": "user", "content": "Last question?"})
        # The correction stays: the next view is not the refused one either.
        self.assertNotEqual(c.build_context(conv).view_hash, before.view_hash)


class UsageTest(ServerTestCase):
    def test_reported_usage_corrects_approximate_counts(self):
        """Claude's counts are estimated: a reported prompt twice the estimate raises them.

        Two conversations with the same items; only one reports usage. Its
        next view counts more tokens for the same entries.
        """
        c = self.client
        first = [{"role": "user", "content": "Please plan a trip to Lisbon. " + "Details follow. " * 40}]
        answer = {"role": "assistant", "content": "Here is a plan."}
        totals = {}
        for reported in (False, True):
            conv = new_id("usage")
            view = c.before_inference(conv, first, model="claude-sonnet-4", system_prompt="Plan trips.")
            t = view.response.tokens
            self.assertTrue(t.approximate)
            estimate = t.total - t.output_reserve
            self.assertGreaterEqual(estimate, 64)
            usage = {"input_tokens": 2 * estimate - 40, "output_tokens": 6,
                     "cache_read_input_tokens": 40} if reported else None
            c.after_inference(conv, answer, usage)
            later = c.before_inference(conv, [{"role": "user", "content": "Thanks."}])
            totals[reported] = (later.view_hash, later.response.tokens.total)
        self.assertEqual(totals[True][0], totals[False][0])  # the same entries
        self.assertGreater(totals[True][1], totals[False][1])


class TlsAndTokenTest(unittest.TestCase):
    """A server with TLS and an access file, configured from the environment."""

    @classmethod
    def setUpClass(cls):
        cls.env = {"CONVSTATE_ADDRESS": env("CONVSTATE_TEST_TLS_ADDRESS"),
                   "CONVSTATE_CACERT": env("CONVSTATE_TEST_CACERT"),
                   "CONVSTATE_TOKEN": env("CONVSTATE_TEST_TOKEN")}
        cls.cert, cls.key = env("CONVSTATE_TEST_CLIENT_CERT"), env("CONVSTATE_TEST_CLIENT_KEY")

    def test_token_over_tls_speaks_for_its_tenant(self):
        conv = new_id("tls")
        with ConvStateClient.from_env(self.env) as client:
            self.assertTrue(client.tls)
            view = client.before_inference(conv, [{"role": "user", "content": "Hello over TLS"}],
                                           model="gpt-4o")
            self.assertEqual(view.messages, [{"role": "user", "content": "Hello over TLS"}])
            self.assertEqual(client.get_conversation(conv).tenant_id, "acme")
        with ConvStateClient.from_env(dict(self.env, CONVSTATE_TENANT="acme")) as client:
            self.assertEqual(len(client.list_items(conv)), 1)
        with ConvStateClient.from_env(dict(self.env, CONVSTATE_TENANT="globex")) as client:
            with self.assertRaises(ConvStateError) as caught:
                client.get_conversation(conv)
            self.assertEqual(caught.exception.code, grpc.StatusCode.PERMISSION_DENIED)

    def test_without_a_credential(self):
        with ConvStateClient.from_env(dict(self.env, CONVSTATE_TOKEN="")) as client:
            with self.assertRaises(ConvStateError) as caught:
                client.get_conversation("anything")
            self.assertEqual(caught.exception.code, grpc.StatusCode.UNAUTHENTICATED)
        with ConvStateClient.from_env(dict(self.env, CONVSTATE_TOKEN="cst_" + "0" * 64)) as client:
            with self.assertRaises(ConvStateError) as caught:
                client.get_conversation("anything")
            self.assertEqual(caught.exception.code, grpc.StatusCode.UNAUTHENTICATED)

    def test_client_certificate(self):
        env_mtls = dict(self.env, CONVSTATE_TOKEN="", CONVSTATE_CERT=self.cert, CONVSTATE_KEY=self.key)
        conv = new_id("mtls")
        with ConvStateClient.from_env(env_mtls) as client:
            client.before_inference(conv, [{"role": "user", "content": "Hello with a certificate"}],
                                    model="gpt-4o")
            self.assertEqual(client.get_conversation(conv).tenant_id, "acme-mtls")

    def test_plaintext_client_cannot_reach_the_tls_server(self):
        address = self.env["CONVSTATE_ADDRESS"]
        with ConvStateClient(address, max_attempts=2, initial_backoff=0.01, timeout=5) as client:
            with self.assertRaises(ConvStateError) as caught:
                client.get_conversation("anything")
            self.assertEqual(caught.exception.code, grpc.StatusCode.UNAVAILABLE)
            self.assertEqual(caught.exception.attempts, 2)


class RetryUntilTheServerIsUpTest(unittest.TestCase):
    """The first attempt finds nothing listening; the server is then started
    (from the retry hook, so the order is certain) and a later attempt succeeds."""

    def setUp(self):
        self.server = None
        self.work = env("CONVSTATE_TEST_WORK_DIR")

    def tearDown(self):
        if self.server is not None:
            self.server.terminate()
            try:
                self.server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.server.kill()
                self.server.wait()

    def start_server(self, port: int) -> None:
        out = os.path.join(self.work, "retry-server.out")
        self.server = subprocess.Popen(
            [env("CONVSTATE_TEST_SERVER"), "--host=127.0.0.1", f"--port={port}",
             f"--database_url={env('CONVSTATE_TEST_DATABASE_URL')}",
             f"--vocab_dir={env('CONVSTATE_TEST_VOCAB_DIR')}", "--auth=none", "--otel_disabled=true"],
            stdout=open(out, "w"), stderr=open(os.path.join(self.work, "retry-server.log"), "w"))
        while True:  # Until it listens (or exits).
            with open(out) as f:
                if "convstate listening on" in f.read():
                    return
            if self.server.poll() is not None:
                raise RuntimeError("the retry test's server exited; see retry-server.log")
            time.sleep(0.05)

    def test_unavailable_then_served(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        retries = []

        def on_retry(method, attempt, error, delay):
            retries.append((method, attempt, error.code()))
            if self.server is None:
                self.start_server(port)

        conv = new_id("retry")
        with ConvStateClient(f"127.0.0.1:{port}", max_attempts=8, initial_backoff=0.2,
                             max_backoff=1, on_retry=on_retry) as client:
            # Nothing is stored by an attempt that fails: one user message.
            with ConvStateClient(env("CONVSTATE_TEST_ADDRESS")) as other:
                other.create_conversation(conv, "gpt-4o")
            view = client.before_inference(conv, [{"role": "user", "content": "Are you there?"}])
            self.assertEqual(view.messages, [{"role": "user", "content": "Are you there?"}])
            self.assertGreaterEqual(len(retries), 1)
            self.assertEqual(retries[0], ("AppendTurn", 1, grpc.StatusCode.UNAVAILABLE))
            self.assertEqual(len(client.list_items(conv)), 1)


if __name__ == "__main__":
    unittest.main()
