"""Tool calls written as text by small models: every form, validation, repairs, markup."""

import json
import re

import pytest

from ai.utils.text_tool_calls import (
    TextToolCalls,
    extract_tool_calls,
    looks_like_markup,
)


def _tool(name, properties=None, required=()):
    parameters = {"type": "object", "properties": properties or {}, "required": list(required)}
    return {
        "type": "function",
        "function": {"name": name, "description": f"The {name} tool.", "parameters": parameters},
    }


TOOLS = [
    _tool("say", {"message": {"type": "string"}}, required=["message"]),
    _tool("noop"),
    _tool(
        "add_journal_entry",
        {
            "content": {"type": "string"},
            "importance": {"type": "integer"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        required=["content"],
    ),
    _tool(
        "update_entity_observation",
        {"entity": {"type": "string"}, "observation": {"type": "string"}},
    ),
]


def _calls(result):
    """``[(name, arguments dict), ...]`` of a result."""
    return [
        (call["function"]["name"], json.loads(call["function"]["arguments"]))
        for call in result.calls
    ]


def _extract(text, tools=TOOLS):
    return extract_tool_calls(text, tools)


SAY_HI = ("say", {"message": "hi"})


# --- the result's format


def test_calls_have_the_openai_format_and_unique_ids():
    result = _extract('say(message="a")\nsay(message="b")\nnoop()')
    assert isinstance(result, TextToolCalls)
    assert len(result.calls) == 3
    for call in result.calls:
        assert set(call) == {"id", "type", "function"}
        assert re.fullmatch(r"call_[0-9a-f]{12}", call["id"])
        assert call["type"] == "function"
        assert set(call["function"]) == {"name", "arguments"}
        assert isinstance(call["function"]["arguments"], str)
        assert isinstance(json.loads(call["function"]["arguments"]), dict)
    assert len({call["id"] for call in result.calls}) == 3
    assert result.text == "" and result.malformed == []


@pytest.mark.parametrize(
    "text",
    [
        "Hello there, traveller!",
        "I have (3) coins and a {curly} smile.",
        'Bob owes me 5 gold (he said so): "pay up", he was told.',
        "[laughs] Sure, I'd say(roughly) five of them.",
        "Meet me at 5:30 {sharp} [no excuses].",
        "",
    ],
)
def test_prose_without_calls_comes_back_unchanged(text):
    result = _extract(text)
    assert result.calls == [] and result.malformed == []
    assert result.text == text


def test_a_fact_sentence_survives_intact_next_to_a_call():
    fact = "Bob (the smith) owes Alice 5 gold: {he promised} to pay by Friday."
    result = _extract(f'{fact}\nsay(message="Pay up, Bob!")')
    assert _calls(result) == [("say", {"message": "Pay up, Bob!"})]
    assert result.text == fact


def test_non_string_text_gives_an_empty_result():
    assert extract_tool_calls(None, TOOLS) == TextToolCalls(calls=[], text="", malformed=[])


# --- 1. fenced blocks


@pytest.mark.parametrize(
    "text",
    [
        '```json\n{"name": "say", "arguments": {"message": "hi"}}\n```',
        '```\n{"name": "say", "arguments": {"message": "hi"}}\n```',
        '```{"name": "say", "arguments": {"message": "hi"}}```',
        '```json {"name": "say", "arguments": {"message": "hi"}} ```',
        '```tool_call\n{"name": "say", "arguments": {"message": "hi"}}\n```',
        '```json\n{"name": "say", "arguments": {"message": "hi"}}',  # never closed
        '```tool_code\nprint(default_api.say(message="hi"))\n```',  # Gemma style
    ],
)
def test_fenced_block(text):
    result = _extract(text)
    assert _calls(result) == [SAY_HI]
    assert result.text == "" and result.malformed == []


def test_fence_with_a_json_array_of_calls_and_prose_around():
    text = (
        "Let me do both.\n```json\n"
        '[{"name": "say", "arguments": {"message": "hi"}}, {"name": "noop", "arguments": {}}]'
        "\n```\nDone."
    )
    result = _extract(text)
    assert _calls(result) == [SAY_HI, ("noop", {})]
    assert result.text == "Let me do both.\n\nDone."


def test_fence_of_ordinary_code_is_left_alone():
    text = "Here:\n```python\nfor coin in range(3):\n    print(coin)\n```"
    assert _extract(text).text == text


def test_unreadable_tool_call_fence_is_malformed():
    result = _extract("Hmm.\n```tool_call\nsay hello to everyone\n```")
    assert result.calls == []
    assert len(result.malformed) == 1
    assert result.text == "Hmm."


# --- 2. bare JSON objects


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "say", "arguments": {"message": "hi"}}',
        '{"name": "say", "parameters": {"message": "hi"}}',
        '{"name": "say", "args": {"message": "hi"}}',
        '{"name": "say", "input": {"message": "hi"}}',
        '{"name": "say", "arguments": "{\\"message\\": \\"hi\\"}"}',
        '{"function": {"name": "say", "arguments": "{\\"message\\": \\"hi\\"}"}}',
        '{"type": "function", "function": {"name": "say", "arguments": {"message": "hi"}}}',
        '{"tool": "say", "arguments": {"message": "hi"}}',
        '{"tool": "say", "message": "hi"}',
        '{"function": "say", "arguments": {"message": "hi"}}',
        '{"say": {"message": "hi"}}',
        '{"tool_calls": [{"function": {"name": "say", "arguments": "{\\"message\\": \\"hi\\"}"}}]}',
        '{{"name": "say", "arguments": {{"message": "hi"}}}}',  # Qwen2.5 double braces
    ],
)
def test_bare_json_object(text):
    result = _extract(text)
    assert _calls(result) == [SAY_HI]
    assert result.text == "" and result.malformed == []


def test_bare_json_with_prose_around():
    result = _extract('Of course! {"name": "say", "arguments": {"message": "hi"}} Anything else?')
    assert _calls(result) == [SAY_HI]
    assert result.text == "Of course! Anything else?"


def test_json_lines_of_several_calls():
    text = '{"name": "say", "arguments": {"message": "hi"}}\n{"name": "noop", "arguments": {}}'
    assert _calls(_extract(text)) == [SAY_HI, ("noop", {})]


def test_call_without_arguments():
    assert _calls(_extract('{"name": "noop"}')) == [("noop", {})]
    assert _calls(_extract('{"name": "noop", "arguments": null}')) == [("noop", {})]
    assert _calls(_extract('{"name": "noop", "arguments": ""}')) == [("noop", {})]


@pytest.mark.parametrize(
    "text", ["noop", "noop()", "`noop`", " noop. ", "Update_entity_observation"]
)
def test_an_answer_that_is_only_a_tool_name_needing_no_argument_is_its_call(text):
    # Qwen2.5-Coder-1.5B answered goal steps with the bare word "noop".
    name = "noop" if "noop" in text else "update_entity_observation"
    result = _extract(text)
    assert _calls(result) == [(name, {})] and result.text == ""


@pytest.mark.parametrize("text", ["Noop", "say", "Say.", "noop now", "I will noop"])
def test_a_word_that_is_no_whole_call_or_needs_arguments_stays_text(text):
    result = _extract(text)
    assert result.calls == [] and result.text == text


def test_a_word_left_unquoted_as_a_value_is_read_as_a_string():
    text = '{"name": "add_journal_entry", "arguments": {"content": "x", "tags": [journal_1, b-2]}}'
    assert _calls(_extract(text)) == [
        ("add_journal_entry", {"content": "x", "tags": ["journal_1", "b-2"]})
    ]
    flags = '{"name": "add_journal_entry", "arguments": {"content": "x", "importance": null}}'
    assert _calls(_extract(flags)) == [("add_journal_entry", {"content": "x", "importance": None})]


def test_json_value_that_is_not_call_shaped_is_left_alone():
    text = 'The note said {"mood": "happy"} in the margin.'
    result = _extract(text)
    assert result.calls == [] and result.malformed == []
    assert result.text == text


def test_braces_inside_argument_strings_are_kept():
    text = (
        '{"name": "update_entity_observation", "arguments": '
        '{"entity": "Bob", "observation": "grins a {curly} grin (twice)"}}'
    )
    assert _calls(_extract(text)) == [
        (
            "update_entity_observation",
            {"entity": "Bob", "observation": "grins a {curly} grin (twice)"},
        )
    ]


# --- 3. <tool_call> tags


@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>\n{"name": "say", "arguments": {"message": "hi"}}\n</tool_call>',
        '<tool_call>{{"name": "say", "arguments": {{"message": "hi"}}}}</tool_call>',
        '<tool_call>\n{"name": "say", "arguments": {"message": "hi"}}',  # closing tag missing
        '<function_call>{"name": "say", "arguments": {"message": "hi"}}</function_call>',
        '<|tool_call|>{"name": "say", "arguments": {"message": "hi"}}<|/tool_call|>',
        '<|tool_call_start|>{"name": "say", "arguments": {"message": "hi"}}<|tool_call_end|>',
        '<|python_tag|>{"name": "say", "parameters": {"message": "hi"}}',
        '[TOOL_CALLS] [{"name": "say", "arguments": {"message": "hi"}}]',
        '{"name": "say", "arguments": {"message": "hi"}}\n</tool_call>',  # stray closing tag
    ],
)
def test_tool_call_tags(text):
    result = _extract(text)
    assert _calls(result) == [SAY_HI]
    assert result.text == "" and result.malformed == []


def test_several_tool_call_tags_with_prose():
    text = (
        "I'll note that.\n"
        '<tool_call>\n{"name": "add_journal_entry", "arguments": {"content": "Bob owes 5 gold"}}\n'
        '</tool_call>\n<tool_call>\n{"name": "say", "arguments": {"message": "hi"}}\n</tool_call>'
    )
    result = _extract(text)
    assert _calls(result) == [("add_journal_entry", {"content": "Bob owes 5 gold"}), SAY_HI]
    assert result.text == "I'll note that."


def test_unclosed_tool_call_tag_stops_at_the_next_one():
    text = '<tool_call>{"name": "noop"}\n<tool_call>{"name": "say", "arguments": {"message": "hi"}}'
    assert _calls(_extract(text)) == [("noop", {}), SAY_HI]


def test_unreadable_tool_call_tag_is_malformed_and_removed():
    result = _extract("<tool_call>say hello</tool_call> Be right back.")
    assert result.calls == []
    assert len(result.malformed) == 1 and "tool_call" in result.malformed[0]
    assert result.text == "Be right back."


def test_tags_named_after_a_tool_with_attributes_or_a_body():
    text = '<add_journal_entry content="Ada said the toll is 3 copper." importance="7"/>\n<noop/>'
    result = _extract(text)
    assert _calls(result) == [
        ("add_journal_entry", {"content": "Ada said the toll is 3 copper.", "importance": 7}),
        ("noop", {}),
    ]
    assert result.text == ""
    assert _calls(_extract("Sure. <say>hi</say>")) == [SAY_HI]
    assert _extract("Sure. <say>hi</say>").text == "Sure."


@pytest.mark.parametrize("text", ["I like <b>bold</b> text", "the <say> tag is old", "3<4 a<b"])
def test_tags_of_no_tool_or_without_arguments_are_prose(text):
    assert _extract(text) == TextToolCalls(text=text)


# --- 4. function-call syntax


@pytest.mark.parametrize(
    "text, expected",
    [
        ('say(message="Hello there")', ("say", {"message": "Hello there"})),
        ("say(message='x', extra=1)", ("say", {"message": "x", "extra": 1})),
        (
            'add_journal_entry(content="Bob owes 5 gold", importance=7)',
            ("add_journal_entry", {"content": "Bob owes 5 gold", "importance": 7}),
        ),
        ('say("Hello")', ("say", {"message": "Hello"})),
        (
            'add_journal_entry("Bob owes 5 gold")',
            ("add_journal_entry", {"content": "Bob owes 5 gold"}),
        ),
        ("noop()", ("noop", {})),
        ('functions.say(message="hi")', SAY_HI),
        ('Say(message="hi")', SAY_HI),
        (
            'add_journal_entry(content="x", tags=["debt", "bob"])',
            ("add_journal_entry", {"content": "x", "tags": ["debt", "bob"]}),
        ),
        ('say(message="hi", loud=true)', ("say", {"message": "hi", "loud": True})),
    ],
)
def test_function_call_syntax(text, expected):
    result = _extract(text)
    assert _calls(result) == [expected]
    assert result.text == "" and result.malformed == []


def test_function_call_in_prose():
    result = _extract('Good idea. say(message="Welcome, friend!") Then I will rest.')
    assert _calls(result) == [("say", {"message": "Welcome, friend!"})]
    assert result.text == "Good idea. Then I will rest."


def test_function_call_in_inline_code_leaves_no_backticks():
    result = _extract("Right away: `noop()`.")
    assert _calls(result) == [("noop", {})]
    assert result.text == "Right away:."


def test_pythonic_list_of_calls():
    result = _extract('[say(message="hi"), noop()]')
    assert _calls(result) == [SAY_HI, ("noop", {})]
    assert result.text == ""


def test_a_pythonic_call_with_a_missing_equals_sign_and_bare_ids_is_mended():
    # Qwen2.5-Coder-1.5B reflecting; left as text, the whole call became a journal entry.
    text = (
        '[add_journal_entry("Sten\'s luck (at dice) is bad, as usual.", importance 2, '
        'tags=["reflection"], cites=[journal_20261127_003102])]'
    )
    journal = _tool(
        "add_journal_entry",
        {
            "content": {"type": "string"},
            "importance": {"type": "integer"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "cites": {"type": "array", "items": {"type": "string"}},
        },
        required=["content"],
    )
    result = _extract(text, tools=[journal])
    assert _calls(result) == [
        (
            "add_journal_entry",
            {
                "content": "Sten's luck (at dice) is bad, as usual.",
                "importance": 2,
                "tags": ["reflection"],
                "cites": ["journal_20261127_003102"],
            },
        )
    ]
    assert result.text == ""


def test_mending_a_call_leaves_its_strings_as_they_were():
    result = _extract('add_journal_entry("Ada said [bees, honey] matter, 2 say", importance 3)')
    assert _calls(result) == [
        ("add_journal_entry", {"content": "Ada said [bees, honey] matter, 2 say", "importance": 3})
    ]


def test_call_cut_off_at_the_end_is_closed():
    assert _calls(_extract('say(message="hi')) == [SAY_HI]


def test_words_of_prose_are_not_calls():
    for text in ["I'd say (quietly) hello.", "I'll say(maybe) later.", "Do you say(so)?"]:
        result = _extract(text)
        assert result.calls == [] and result.malformed == []
        assert result.text == text


def test_non_literal_arguments_on_their_own_line_are_malformed():
    result = _extract("Well...\nsay(message=greeting)")
    assert result.calls == []
    assert len(result.malformed) == 1
    assert result.text == "Well..."


def test_code_is_never_evaluated():
    result = _extract('say(message=__import__("os").system("echo pwned"))')
    assert result.calls == []
    assert len(result.malformed) == 1


def test_too_many_positional_arguments_are_malformed():
    result = _extract('say("a", "b")')
    assert result.calls == [] and len(result.malformed) == 1


def test_unknown_function_alone_on_a_line_is_malformed():
    result = _extract('Let me try.\ncast_spell(target="Bob")')
    assert result.calls == []
    assert result.malformed == ["tool 'cast_spell' was not offered"]
    assert result.text == "Let me try."


def test_unknown_function_inside_a_sentence_is_left_alone():
    text = 'He wrote cast_spell(target="Bob") on the wall.'
    assert _extract(text).text == text


# --- 5. XML-ish tags


@pytest.mark.parametrize(
    "text",
    [
        '<function=say>{"message": "hi"}</function>',
        "<function=say><parameter=message>hi</parameter></function>",
        "<function=say>\n<parameter=message>\nhi\n</parameter>\n</function>",
        "<tool_call>\n<function=say>\n<parameter=message>\nhi\n</parameter>\n</function>\n"
        "</tool_call>",
        '<tools><function name="say"><message>hi</message></function></tools>',
        '<invoke name="say"><parameter name="message">hi</parameter></invoke>',
        '<function_calls><invoke name="say"><parameter name="message">hi</parameter></invoke>'
        "</function_calls>",
        "<function=say><parameter=message>hi</function>",  # </parameter> missing
        '<function=say>{"message": "hi"}',  # </function> missing
    ],
)
def test_xml_tags(text):
    result = _extract(text)
    assert _calls(result) == [SAY_HI]
    assert result.text == "" and result.malformed == []


def test_xml_parameters_are_coerced_to_the_schema():
    text = (
        "<function=add_journal_entry>\n<parameter=content>\nBob owes 5 gold\n</parameter>\n"
        '<parameter=importance>\n7\n</parameter>\n<parameter=tags>["debt"]</parameter>\n'
        "</function>"
    )
    assert _calls(_extract(text)) == [
        ("add_journal_entry", {"content": "Bob owes 5 gold", "importance": 7, "tags": ["debt"]})
    ]


def test_xml_tag_without_parameters_is_a_call_without_arguments():
    assert _calls(_extract("<function=noop></function>")) == [("noop", {})]


def test_unreadable_xml_arguments_are_malformed():
    result = _extract("<function=say>just some words</function>")
    assert result.calls == [] and len(result.malformed) == 1 and result.text == ""


# --- several calls, mixed forms


def test_several_calls_in_mixed_forms_keep_their_order():
    text = (
        'First <tool_call>{"name": "noop"}</tool_call> then say(message="b"), and:\n'
        '```json\n{"name": "add_journal_entry", "arguments": {"content": "c"}}\n```\n'
        "<function=update_entity_observation><parameter=entity>Bob</parameter>"
        "<parameter=observation>tall</parameter></function>\nThat is all."
    )
    result = _extract(text)
    assert _calls(result) == [
        ("noop", {}),
        ("say", {"message": "b"}),
        ("add_journal_entry", {"content": "c"}),
        ("update_entity_observation", {"entity": "Bob", "observation": "tall"}),
    ]
    assert result.text == "First then, and:\n\nThat is all."
    assert result.malformed == []


def test_valid_and_malformed_calls_together():
    text = (
        '{"name": "say", "arguments": {"message": "hi"}}\n'
        '{"name": "cast_spell", "arguments": {"target": "Bob"}}\n'
        "Done."
    )
    result = _extract(text)
    assert _calls(result) == [SAY_HI]
    assert result.malformed == ["tool 'cast_spell' was not offered"]
    assert result.text == "Done."


# --- malformed JSON


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "say", "arguments": {"message": "hi",},}',  # trailing commas
        "{'name': 'say', 'arguments': {'message': 'hi'}}",  # single quotes
        '{"name": "say", "arguments": {"message": "hi"}',  # final brace missing
        '{"name": "say", "arguments": {"message": "hi',  # cut off inside a string
        "{name: 'say', arguments: {message: 'hi'}}",  # bare keys
        '{{"name": "say", "arguments": {{"message": "hi",}}}}',  # doubled and a trailing comma
        '<tool_call>{"name": "say", "arguments": {"message": "hi"}</tool_call>',
    ],
)
def test_repairable_json(text):
    result = _extract(text)
    assert _calls(result) == [SAY_HI]
    assert result.text == "" and result.malformed == []


def test_missing_final_brace_before_prose():
    result = _extract('{"name": "say", "arguments": {"message": "hi"} And then I leave.')
    assert _calls(result) == [SAY_HI]
    assert result.text == "And then I leave."


def test_unrepairable_json_is_malformed_and_removed():
    result = _extract('Hmm. {"name": "say", "arguments": {"message": hi there}} Bye.')
    assert result.calls == []
    assert len(result.malformed) == 1 and result.malformed[0].startswith("unreadable")
    assert result.text == "Hmm. Bye."


def test_arguments_that_are_not_an_object_are_malformed():
    for arguments in ['"hello"', "[1, 2]", "42"]:
        result = _extract(f'{{"name": "say", "arguments": {arguments}}}')
        assert result.calls == []
        assert result.malformed == ["arguments for 'say' are not a JSON object"]
        assert result.text == ""


def test_an_echoed_tool_definition_is_not_a_call():
    result = _extract(json.dumps(TOOLS[0]))
    assert result.calls == [] and len(result.malformed) == 1


# --- offered tools


def test_unknown_tool_is_malformed_and_removed():
    result = _extract('{"name": "cast_spell", "arguments": {"target": "Bob"}} Then I wait.')
    assert result.calls == []
    assert result.malformed == ["tool 'cast_spell' was not offered"]
    assert result.text == "Then I wait."


def test_a_call_under_a_wrong_name_is_the_one_tool_its_arguments_fit():
    text = '{"name": "Ada", "arguments": {"content": "Ada hid the map.", "importance": 1}}'
    result = _extract(text)
    assert _calls(result) == [
        ("add_journal_entry", {"content": "Ada hid the map.", "importance": 1})
    ]
    assert result.malformed == []
    # Arguments that fit no tool, or more than one, make no call.
    tools = TOOLS + [_tool("remember", {"content": {"type": "string"}}, required=["content"])]
    assert _extract('{"name": "Ada", "arguments": {"content": "x"}}', tools).calls == []
    assert _extract('{"name": "Ada", "arguments": {"colour": "red"}}').calls == []


def test_a_tool_that_exists_elsewhere_but_was_not_offered():
    text = '<tool_call>{"name": "add_journal_entry", "arguments": {"content": "x"}}</tool_call>'
    result = _extract(text, tools=[TOOLS[0], TOOLS[1]])
    assert result.calls == []
    assert result.malformed == ["tool 'add_journal_entry' was not offered"]
    assert result.text == ""


@pytest.mark.parametrize("tools", [None, []])
def test_without_tools_nothing_is_a_call(tools):
    result = extract_tool_calls('{"name": "say", "arguments": {"message": "hi"}}', tools)
    assert result.calls == [] and len(result.malformed) == 1


def test_names_tolerate_case_and_a_functions_prefix():
    text = '{"name": "functions.SAY", "arguments": {"message": "hi"}}'
    assert _calls(_extract(text)) == [SAY_HI]


# --- type coercion


def test_string_values_are_coerced_to_the_schema_types():
    text = '{"name": "add_journal_entry", "arguments": {"content": "x", "importance": "7"}}'
    assert _calls(_extract(text)) == [("add_journal_entry", {"content": "x", "importance": 7})]


def test_obvious_coercions():
    tools = [
        _tool(
            "roll",
            {
                "count": {"type": "integer"},
                "bonus": {"type": "number"},
                "secret": {"type": "boolean"},
                "label": {"type": "string"},
                "tags": {"type": "array", "items": {"type": "string"}},
            },
        )
    ]
    text = 'roll(count="3", bonus="1.5", secret="true", label=12, tags="dice")'
    assert _calls(extract_tool_calls(text, tools)) == [
        ("roll", {"count": 3, "bonus": 1.5, "secret": True, "label": "12", "tags": ["dice"]})
    ]


def test_values_that_do_not_fit_are_left_for_later_validation():
    text = '{"name": "add_journal_entry", "arguments": {"content": "x", "importance": "very"}}'
    assert _calls(_extract(text)) == [("add_journal_entry", {"content": "x", "importance": "very"})]


# --- looks_like_markup


@pytest.mark.parametrize(
    "text",
    [
        "```",
        'Sure!\n```json\n{"name": "say"}\n```',
        "<tool_call>",
        '<tool_call>{"name": "say"',
        "</tool_call>",
        "<function=say>hi</function>",
        '<invoke name="say">',
        "<|im_end|>",
        '{"message": "hi"}',
        '  {"name": "say", "arguments": {"message": "hi"}}  ',
        '{"name": "say", "arguments": {',
        '{{"name": "say"}}',
        "[1, 2, 3]",
        '["hello"]',
        '"name": "say"',
        'I will call it: "arguments": {}',
        'say(message="Hello")',
        "cast_spell(target='Bob')",
        "add_journal_entry(",
        "noop()",
        'say("Hello")',
        "{'name': 'say'}",
        '<add_journal_entry content="Thank you."/>',
        "<noop/>",
    ],
)
def test_markup_is_recognised(text):
    assert looks_like_markup(text) is True


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        None,
        "Hello there, traveller!",
        'She said "meet me at noon": that was all.',
        "I have (3) coins and 5 silver.",
        "Meet me at 5:30 (sharp), near the {old} well.",
        "[laughs] Sure thing!",
        "{sighs} Fine, fine.",
        "The price is 3 < 5 gold, and 7 > 2.",
        "Bob (the smith) owes Alice 5 gold: he promised.",
        "f(x) = 2x, as the sage wrote.",
        "I'd say (quietly) hello.",
        "Name: Bob. Age: 42.",
    ],
)
def test_ordinary_sentences_are_not_markup(text):
    assert looks_like_markup(text) is False


def test_text_left_after_extraction_is_not_markup():
    text = 'Hello! <tool_call>{"name": "noop"}</tool_call>\nsay(message="hi")\nSee you.'
    result = _extract(text)
    assert len(result.calls) == 2
    assert not looks_like_markup(result.text)


@pytest.mark.parametrize(
    "text",
    [
        "[" * 3000 + "]" * 3000,
        '{"name": "say", "arguments": ' + "[" * 3000 + "]" * 3000 + "}",
        "say(message=" + "[" * 3000 + "]" * 3000 + ")",
        "{" * 3000,
    ],
)
def test_absurd_nesting_neither_crashes_nor_becomes_a_call(text):
    assert extract_tool_calls(text, TOOLS).calls == []
    assert looks_like_markup(text) is True
