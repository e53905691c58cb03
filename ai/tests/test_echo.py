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
