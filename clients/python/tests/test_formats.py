"""The conversions in and out of the service's shapes; no server needed."""

import json
import unittest

from convstate.v1 import convstate_pb2 as pb

from convstate_client import items_from_messages, to_anthropic, to_openai, usage_from_provider


def entry(section, role, kind, content, *, tool_name="", tool_call_id="", sequence=0):
    return pb.ContextEntry(section=section, role=role, kind=kind, content=content,
                           tool_name=tool_name, tool_call_id=tool_call_id, sequence=sequence)


S, U, A, T = pb.ROLE_SYSTEM, pb.ROLE_USER, pb.ROLE_ASSISTANT, pb.ROLE_TOOL
MSG, CALL, RESULT, REASON = (pb.ITEM_KIND_MESSAGE, pb.ITEM_KIND_TOOL_CALL,
                             pb.ITEM_KIND_TOOL_RESULT, pb.ITEM_KIND_REASONING)

# A view with every section: 0 system, 1 pinned, 2 summary, 3 ledger, then
# live items (a turn with two parallel tool calls, a second round of calls,
# reasoning), the recalled passages and a pending user message.
VIEW = [
    entry(pb.SECTION_SYSTEM, S, MSG, "You are a weather bot."),                            # 0
    entry(pb.SECTION_PINNED, S, MSG, "Answer in English."),                                # 1
    entry(pb.SECTION_SUMMARY, S, MSG, "Summary of items #1-#4: ..."),                      # 2
    entry(pb.SECTION_LEDGER, S, MSG, "Facts: ticket ABC-1"),                               # 3
    entry(pb.SECTION_LIVE, U, MSG, "Weather in Oslo and Rome?", sequence=5),              # 4
    entry(pb.SECTION_LIVE, A, REASON, "Two cities, two calls.", sequence=6),              # 5
    entry(pb.SECTION_LIVE, A, MSG, "Checking both.", sequence=7),                         # 6
    entry(pb.SECTION_LIVE, A, CALL, '{"city":"Oslo"}', tool_name="weather",
          tool_call_id="c1", sequence=8),                                                 # 7
    entry(pb.SECTION_LIVE, A, CALL, '{"city":"Rome"}', tool_name="weather",
          tool_call_id="c2", sequence=9),                                                 # 8
    entry(pb.SECTION_LIVE, T, RESULT, "Oslo: 3 C", tool_name="weather",
          tool_call_id="c1", sequence=10),                                                # 9
    entry(pb.SECTION_LIVE, T, RESULT, "Rome: 18 C", tool_name="weather",
          tool_call_id="c2", sequence=11),                                                # 10
    entry(pb.SECTION_LIVE, A, CALL, "not json", tool_name="clock",
          tool_call_id="c3", sequence=12),                                                # 11
    entry(pb.SECTION_LIVE, T, RESULT, "12:00", tool_name="clock",
          tool_call_id="c3", sequence=13),                                                # 12
    entry(pb.SECTION_LIVE, A, MSG, "Oslo is cold, Rome is mild.", sequence=14),           # 13
    entry(pb.SECTION_RECALLED, S, MSG, "Recalled: ticket ABC-1 was about Oslo"),          # 14
    entry(pb.SECTION_PENDING, U, MSG, "Thanks!"),                                         # 15
]


def bp(kind, last_entry):
    return pb.CacheBreakpoint(kind=kind, last_entry=last_entry)


class OpenAIFormatTest(unittest.TestCase):
    def test_every_section_in_order(self):
        self.assertEqual(to_openai(VIEW), [
            {"role": "system", "content": "You are a weather bot."},
            {"role": "system", "content": "Answer in English."},
            {"role": "system", "content": "Summary of items #1-#4: ..."},
            {"role": "system", "content": "Facts: ticket ABC-1"},
            {"role": "user", "content": "Weather in Oslo and Rome?"},
            {"role": "assistant", "content": "Checking both.", "tool_calls": [
                {"id": "c1", "type": "function",
                 "function": {"name": "weather", "arguments": '{"city":"Oslo"}'}},
                {"id": "c2", "type": "function",
                 "function": {"name": "weather", "arguments": '{"city":"Rome"}'}},
            ]},
            {"role": "tool", "tool_call_id": "c1", "content": "Oslo: 3 C"},
            {"role": "tool", "tool_call_id": "c2", "content": "Rome: 18 C"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c3", "type": "function",
                 "function": {"name": "clock", "arguments": "not json"}},
            ]},
            {"role": "tool", "tool_call_id": "c3", "content": "12:00"},
            {"role": "assistant", "content": "Oslo is cold, Rome is mild."},
            {"role": "system", "content": "Recalled: ticket ABC-1 was about Oslo"},
            {"role": "user", "content": "Thanks!"},
        ])

    def test_merge_leading_system(self):
        messages = to_openai(VIEW, merge_leading_system=True)
        self.assertEqual(messages[0], {
            "role": "system",
            "content": "You are a weather bot.\n\nAnswer in English.\n\n"
                       "Summary of items #1-#4: ...\n\nFacts: ticket ABC-1",
        })
        self.assertEqual(messages[1]["role"], "user")
        # A system entry after the first message stays where it is.
        self.assertEqual(messages[-2], {"role": "system",
                                        "content": "Recalled: ticket ABC-1 was about Oslo"})

    def test_two_assistant_texts_stay_two_messages(self):
        messages = to_openai([entry(pb.SECTION_LIVE, A, MSG, "one"),
                              entry(pb.SECTION_LIVE, A, MSG, "two"),
                              entry(pb.SECTION_LIVE, A, CALL, "{}", tool_name="f",
                                    tool_call_id="x")])
        self.assertEqual(len(messages), 2)
        self.assertEqual(messages[0], {"role": "assistant", "content": "one"})
        self.assertEqual(messages[1]["content"], "two")
        self.assertEqual([c["id"] for c in messages[1]["tool_calls"]], ["x"])


class AnthropicFormatTest(unittest.TestCase):
    def test_every_section(self):
        request = to_anthropic(VIEW)
        self.assertEqual(request.system, [
            {"type": "text", "text": "You are a weather bot."},
            {"type": "text", "text": "Answer in English."},
            {"type": "text", "text": "Summary of items #1-#4: ..."},
            {"type": "text", "text": "Facts: ticket ABC-1"},
        ])
        self.assertEqual(request.messages, [
            {"role": "user", "content": [{"type": "text", "text": "Weather in Oslo and Rome?"}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Checking both."},
                {"type": "tool_use", "id": "c1", "name": "weather", "input": {"city": "Oslo"}},
                {"type": "tool_use", "id": "c2", "name": "weather", "input": {"city": "Rome"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "c1", "content": "Oslo: 3 C"},
                {"type": "tool_result", "tool_use_id": "c2", "content": "Rome: 18 C"},
            ]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "c3", "name": "clock", "input": {"arguments": "not json"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "c3", "content": "12:00"},
            ]},
            {"role": "assistant", "content": [{"type": "text", "text": "Oslo is cold, Rome is mild."}]},
            {"role": "user", "content": [
                {"type": "text", "text": "Recalled: ticket ABC-1 was about Oslo"},
                {"type": "text", "text": "Thanks!"},
            ]},
        ])
        roles = [m["role"] for m in request.messages]
        self.assertTrue(all(a != b for a, b in zip(roles, roles[1:])), roles)

    def cached(self, request):
        """Where cache_control is: ("system", i) or (message, block)."""
        out = [("system", i) for i, b in enumerate(request.system) if "cache_control" in b]
        for m, message in enumerate(request.messages):
            out += [(m, b) for b, block in enumerate(message["content"]) if "cache_control" in block]
        return out

    def test_breakpoints_on_the_blocks_that_end_their_prefix(self):
        request = to_anthropic(VIEW, [bp(pb.CACHE_BREAKPOINT_KIND_PINNED, 1),
                                      bp(pb.CACHE_BREAKPOINT_KIND_SUMMARIES, 3),
                                      bp(pb.CACHE_BREAKPOINT_KIND_PRUNE_BOUNDARY, 9)])
        # Entry 1 is system block 1, entry 3 system block 3, entry 9 (the
        # result for c1) the first block of the third message.
        self.assertEqual(self.cached(request), [("system", 1), ("system", 3), (2, 0)])
        self.assertEqual(request.messages[2]["content"][0]["cache_control"], {"type": "ephemeral"})
        self.assertEqual(request.block_of_entry[9], ("messages", 2, 0))

    def test_breakpoint_on_an_entry_without_a_block_marks_the_one_before(self):
        # Entry 5 is reasoning (left out): its prefix ends with entry 4's block.
        request = to_anthropic(VIEW, [bp(pb.CACHE_BREAKPOINT_KIND_PRUNE_BOUNDARY, 5)])
        self.assertEqual(self.cached(request), [(0, 0)])

    def test_empty_text_is_left_out(self):
        request = to_anthropic([entry(pb.SECTION_LIVE, U, MSG, "hi"),
                                entry(pb.SECTION_LIVE, A, MSG, ""),
                                entry(pb.SECTION_LIVE, A, CALL, "", tool_name="f", tool_call_id="x")],
                               [bp(pb.CACHE_BREAKPOINT_KIND_PRUNE_BOUNDARY, 1)])
        self.assertEqual(request.messages, [
            {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "x", "name": "f", "input": {}}]},
        ])

    def test_breakpoint_outside_the_view_is_refused(self):
        with self.assertRaises(ValueError):
            to_anthropic(VIEW[:2], [bp(pb.CACHE_BREAKPOINT_KIND_PINNED, 2)])


class ItemsFromMessagesTest(unittest.TestCase):
    def fields(self, items):
        return [(i.role, i.kind, i.content, i.tool_name, i.tool_call_id) for i in items]

    def test_openai_messages(self):
        items = items_from_messages([
            {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
            {"role": "assistant", "content": "Let me look.", "reasoning_content": "think",
             "tool_calls": [{"id": "c1", "type": "function",
                             "function": {"name": "search", "arguments": '{"q": "x"}'}},
                            {"id": "c2", "function": {"name": "calc", "arguments": {"n": 1}}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "found"},
            {"role": "tool", "tool_call_id": "c2", "name": "calculator", "content": "2"},
            {"role": "assistant", "content": None},
        ])
        self.assertEqual(self.fields(items), [
            (U, MSG, "a\nb", "", ""),
            (A, REASON, "think", "", ""),
            (A, MSG, "Let me look.", "", ""),
            (A, CALL, '{"q": "x"}', "search", "c1"),
            (A, CALL, '{"n":1}', "calc", "c2"),
            (T, RESULT, "found", "search", "c1"),
            (T, RESULT, "2", "calculator", "c2"),
            (A, MSG, "", "", ""),
        ])

    def test_anthropic_messages(self):
        items = items_from_messages([
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                {"type": "redacted_thinking", "data": "xx"},
                {"type": "text", "text": "Looking."},
                {"type": "tool_use", "id": "t1", "name": "search", "input": {"q": "é"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1",
                 "content": [{"type": "text", "text": "r1"}, {"type": "text", "text": "r2"}]},
                {"type": "text", "text": "and now?"},
            ]},
        ])
        self.assertEqual(self.fields(items), [
            (A, REASON, "hmm", "", ""),
            (A, MSG, "Looking.", "", ""),
            (A, CALL, '{"q":"é"}', "search", "t1"),
            (T, RESULT, "r1\nr2", "search", "t1"),
            (U, MSG, "and now?", "", ""),
        ])
        self.assertEqual(json.loads(items[2].content), {"q": "é"})

    def test_bytes_must_be_utf8(self):
        self.assertEqual(items_from_messages([{"role": "user", "content": "ü".encode()}])[0].content, "ü")
        with self.assertRaisesRegex(ValueError, r"messages\[0\]\.content: not valid UTF-8"):
            items_from_messages([{"role": "user", "content": b"\xff\xfe"}])

    def test_refusals_name_the_field(self):
        cases = [
            ([{"role": "robot", "content": "x"}], r"messages\[0\]\.role"),
            ([{"role": "user", "content": "x\ud800"}], r"messages\[0\]\.content: not valid UTF-8"),
            ([{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}],
             r"messages\[0\]\.content\[0\]\.type: only text"),
            ([{"role": "tool", "content": "x"}], r"messages\[0\]\.tool_call_id: required"),
            ([{"role": "user", "content": "x", "tool_calls": [{"id": "a"}]}],
             r"messages\[0\]\.tool_calls"),
            ([{"role": "assistant", "tool_calls": [{"id": "a", "function": {"arguments": "{}"}}]}],
             r"messages\[0\]\.tool_calls\[0\]\.function\.name: required"),
            ([{"role": "user", "content": [{"type": "tool_use", "id": "a", "name": "f"}]}],
             r"messages\[0\]\.content\[0\]: a tool_use block"),
            ([{"role": "user", "content": 5}], r"messages\[0\]\.content"),
            ({"role": "user", "content": "x"}, r"messages: expected a list"),
            (["hello"], r"messages\[0\]: expected a dict"),
        ]
        for messages, pattern in cases:
            with self.subTest(pattern=pattern):
                with self.assertRaisesRegex(ValueError, pattern):
                    items_from_messages(messages)


class UsageTest(unittest.TestCase):
    def counts(self, usage):
        u = usage_from_provider(usage)
        return (u.input_tokens, u.output_tokens, u.cached_input_tokens, u.reasoning_tokens)

    def test_openai_chat(self):
        self.assertEqual(self.counts({
            "prompt_tokens": 1200, "completion_tokens": 80, "total_tokens": 1280,
            "prompt_tokens_details": {"cached_tokens": 1024},
            "completion_tokens_details": {"reasoning_tokens": 32},
        }), (1200, 80, 1024, 32))
        self.assertEqual(self.counts({"prompt_tokens": 5, "completion_tokens": 1,
                                      "prompt_tokens_details": None}), (5, 1, 0, 0))

    def test_openai_responses(self):
        self.assertEqual(self.counts({
            "input_tokens": 900, "output_tokens": 50,
            "input_tokens_details": {"cached_tokens": 512},
            "output_tokens_details": {"reasoning_tokens": 20},
        }), (900, 50, 512, 20))

    def test_anthropic_prompt_is_the_sum(self):
        self.assertEqual(self.counts({
            "input_tokens": 20, "output_tokens": 70,
            "cache_read_input_tokens": 1000, "cache_creation_input_tokens": 300,
        }), (1320, 70, 1000, 0))

    def test_sdk_objects(self):
        class Usage:
            def model_dump(self):
                return {"prompt_tokens": 10, "completion_tokens": 2,
                        "prompt_tokens_details": {"cached_tokens": 7}}

        self.assertEqual(self.counts(Usage()), (10, 2, 7, 0))

    def test_refusals(self):
        self.assertIsNone(usage_from_provider(None))
        for bad in ({"prompt_tokens": -1}, {"prompt_tokens": True}, {"prompt_tokens": "5"},
                    {"tokens": 5}, 42):
            with self.subTest(bad=bad):
                with self.assertRaises(ValueError):
                    usage_from_provider(bad)


if __name__ == "__main__":
    unittest.main()
