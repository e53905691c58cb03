"""Token counting: exact counts offline, tool calls counted, tiered fallback."""

from unittest import TestCase
from unittest.mock import patch

from ai.helpers.execution import count_conversation_tokens
from ai.litellm_loader import load_litellm
from ai.utils import token_counter
from ai.utils.token_counter import (
    count_message_tokens,
    count_tokens,
    heuristic_count,
    tokenizer_tier,
)

TOOL_CALL_MESSAGE = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {
            "id": "call_1",
            "type": "function",
            "function": {
                "name": "add_journal_entry",
                "arguments": '{"content": "Alice owes 5 gold"}',
            },
        }
    ],
}


class TestCountTokens(TestCase):
    def test_exact_counts_with_the_bundled_encodings(self):
        self.assertEqual(count_tokens("Hello, world!", "gpt-4o-mini"), 4)  # o200k
        self.assertEqual(count_tokens("hello world", "gpt-4"), 2)  # cl100k
        self.assertEqual(count_tokens("The quick brown fox", "openai/gpt-4"), 4)
        self.assertEqual(count_tokens("", "gpt-4"), 0)
        self.assertEqual(count_tokens(None, "gpt-4"), 0)

    def test_offline_engine_counts_as_cl100k(self):
        self.assertEqual(tokenizer_tier("offline/assistant"), "tiktoken")
        self.assertEqual(
            count_tokens("Alice found 12 coins", "offline/assistant"),
            count_tokens("Alice found 12 coins", "gpt-4"),
        )

    def test_unknown_model_falls_back_to_the_heuristic(self):
        with patch.object(token_counter, "_toksum", return_value=None):
            self.assertEqual(tokenizer_tier("ollama/llama3"), "heuristic")
            self.assertEqual(count_tokens("abcdefghij", "ollama/llama3"), 3)
        self.assertEqual(heuristic_count("abcd"), 1)

    def test_toksum_is_the_middle_tier_when_installed(self):
        with patch.object(token_counter, "_toksum", return_value=lambda text, model: 42):
            self.assertEqual(tokenizer_tier("anthropic/claude-3-haiku"), "toksum")
            self.assertEqual(count_tokens("anything", "anthropic/claude-3-haiku"), 42)
            self.assertEqual(tokenizer_tier("gpt-4"), "tiktoken")

    def test_special_token_text_is_counted_not_refused(self):
        self.assertGreater(count_tokens("<|endoftext|>", "gpt-4"), 1)


class TestCountMessages(TestCase):
    def test_tool_call_name_and_arguments_are_counted(self):
        bare = count_message_tokens({"role": "assistant", "content": None}, "gpt-4")
        with_call = count_message_tokens(TOOL_CALL_MESSAGE, "gpt-4")
        function = TOOL_CALL_MESSAGE["tool_calls"][0]["function"]
        expected_extra = (
            token_counter.TOKENS_PER_TOOL_CALL
            + count_tokens("call_1", "gpt-4")
            + count_tokens(function["name"], "gpt-4")
            + count_tokens(function["arguments"], "gpt-4")
        )
        self.assertEqual(with_call - bare, expected_extra)

    def test_tool_result_counts_its_call_id(self):
        result = {"role": "tool", "tool_call_id": "call_1", "content": "ok"}
        plain = {"role": "tool", "content": "ok"}
        self.assertEqual(
            count_message_tokens(result, "gpt-4") - count_message_tokens(plain, "gpt-4"),
            count_tokens("call_1", "gpt-4"),
        )

    def test_conversation_count_matches_litellm(self):
        history = [
            {"role": "system", "content": "You are a helper in a tavern."},
            {"role": "user", "content": 'Alice says, "my sword is called Dawnbringer."'},
            {"role": "assistant", "content": "Understood, Alice."},
        ]
        for model in ("gpt-4o-mini", "gpt-4"):
            self.assertEqual(
                count_conversation_tokens(history, model),
                load_litellm().token_counter(model=model, messages=history),
            )

    def test_stored_counts_are_not_recounted(self):
        history = [{"role": "user", "content": "long text " * 50, "token_count": 7}]
        self.assertEqual(
            count_conversation_tokens(history, "gpt-4"), 7 + token_counter.REPLY_PRIMING_TOKENS
        )
        self.assertEqual(count_conversation_tokens([], "gpt-4"), 0)


class TestOfflineEngineUsage(TestCase):
    def test_the_engine_reports_what_the_counter_counts_and_recounts_a_changed_message(self):
        from ai.utils.token_counter import kept_message_tokens

        model = "offline/assistant"
        call = {"id": "c1", "type": "function", "function": {"name": "noop", "arguments": "{}"}}
        messages = [
            {"role": "user", "content": 'Char says, "The ferry leaves at dawn."'},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "content": "ok", "tool_call_id": "c1"},
        ]
        for _ in range(2):  # the second time from what was kept
            for message in messages:
                self.assertEqual(
                    kept_message_tokens(message, model), count_message_tokens(message, model)
                )
        longer = {"role": "user", "content": messages[0]["content"] + " And at dusk, too."}
        self.assertGreater(
            kept_message_tokens(longer, model), kept_message_tokens(messages[0], model)
        )
        # A tool call's count is kept too, by what is counted of it.
        wordier = dict(call, function={"name": "noop", "arguments": '{"why": "nothing to do"}'})
        called_again = dict(messages[1], tool_calls=[wordier])
        self.assertEqual(
            kept_message_tokens(called_again, model), count_message_tokens(called_again, model)
        )
        self.assertGreater(
            kept_message_tokens(called_again, model), kept_message_tokens(messages[1], model)
        )
