"""What counts as a reply that only repeats the player's line."""

import pytest

from ai.utils.echo import is_echo, repeats_itself

CASES = [
    (
        "I buried 40 gold coins under the old oak.",
        "I buried 40 gold coins under the old oak.",
        True,
    ),
    (
        "Carol buried 40 gold coins under the old oak in Mirkwood.",
        "I buried 40 gold coins under the old oak in Mirkwood.",
        True,
    ),
    ("Bob runs the forge by the north gate.", "I run the forge by the north gate.", True),
    ("What a fine forge, Bob! I will remember it.", "I run the forge by the north gate.", False),
    ("Bob's forge is by the north gate.", "Where is Bob's forge?", False),
    (
        "The password for the cellar door is swordfish.",
        "What is the password for the cellar door?",
        False,
    ),
    (
        "What is the password for the cellar door?",
        "What is the password for the cellar door?",
        True,
    ),
    (
        "Ada, can you remind me what the weaver in Dunmere charges for a bolt of cloth?",
        "How much does the weaver in Dunmere charge for a bolt of cloth?",
        True,
    ),
    (
        "Which weaver do you mean, Ada: the one in Dunmere?",
        "How much does the weaver in Dunmere charge for a bolt of cloth?",
        False,
    ),
    ("Hello there!", "Hello there!", False),
    ("", "I run the forge by the north gate.", False),
]


@pytest.mark.parametrize("reply, line, expected", CASES)
def test_is_echo(reply, line, expected):
    assert is_echo(reply, line) is expected


@pytest.mark.parametrize(
    "reply, earlier, repeated",
    [
        (
            "I'm glad you're doing well, Bob! Let me know if you need anything else.",
            ["I'm glad you're doing well, Alice! Let me know if you need anything else."],
            True,
        ),
        (
            "The ferry to Port Ashby leaves at six bells, Bob.",
            ["Carol buried 40 gold coins under the old oak, Alice."],
            False,
        ),
        ("Understood, Bob. I'll remember that.", ["Understood, Bob. I'll remember that."], False),
        ("I'm glad you're doing well, Bob! Let me know if you need anything else.", [], False),
    ],
)
def test_a_reply_said_before(reply, earlier, repeated):
    assert repeats_itself(reply, earlier) is repeated


TEMPLATE = [
    'I will add the cellar code "4417" to my journal.',
    "I will add the ferry time to my journal.",
    "I will add the name of the horse to my journal.",
]


@pytest.mark.parametrize("index", [1, 2])
def test_a_template_said_again_around_new_nouns_is_a_repeat(index):
    assert repeats_itself(TEMPLATE[index], TEMPLATE[:index])


@pytest.mark.parametrize(
    "reply, earlier",
    [
        (
            "Thank you for telling me about the ferry, Alice! I will keep it in mind.",
            ["Thank you for telling me about your horse, Bob! I will keep it in mind."],
        ),
        ("I will add the ferry time to my journal.", [TEMPLATE[0], "Hello, Bob!"]),
    ],
)
def test_other_templates_are_repeats_too(reply, earlier):
    assert repeats_itself(reply, earlier)


@pytest.mark.parametrize(
    "reply, earlier",
    [
        (
            "From what I recall, Bob said the ferry leaves at the sixth bell.",
            ["From what I recall, Alice said the cellar door is painted green."],
        ),
        (
            "The password for the cellar door is swordfish, Bob, so keep it quiet.",
            ["The cellar is under the inn, and the door is locked at night, Alice."],
        ),
        (
            "You told me: the ferry to the island leaves at dawn.",
            ["You told me: the smith by the river sells horseshoes."],
        ),
        (
            "The blacksmith by the mill is called Orrin, and he owes you a favour.",
            ["The baker by the mill is called Tansy, and she sells rye bread."],
        ),
        (
            "Yes, the gate closes at dusk, so you should hurry back before then.",
            ["No, the gate is guarded at night, so you should find another way in."],
        ),
        # The same frame carrying a new value is a new answer.
        (
            "It costs 20 copper a barrel at the inn by the river, Bob.",
            ["It costs 17 copper a barrel at the inn by the river, Bob."],
        ),
    ],
)
def test_different_answers_sharing_some_words_are_no_repeats(reply, earlier):
    assert not repeats_itself(reply, earlier)
