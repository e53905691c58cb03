"""Telling builders (on the log channel) and, if wished, the room that compaction ran."""

from evennia.utils import logger

from ..log_channel import post_to_log_channel
from ..utils.columns import fitted


def announce_compaction(script, character, result):
    """Report a finished compaction on the log channel, and to the room if configured."""
    if result["strategy"] == "masking":
        done, in_a_row = f"{result['compacted_messages']} old tool outputs masked", ""
    elif result["strategy"] == "archive":
        done = f"{result['compacted_messages']} oldest messages archived whole (search_history)"
        in_a_row = ""
    else:
        done = f"{result['compacted_messages']} messages into a summary"
        in_a_row = f", compaction #{result['successive_compactions']} in a row"
    text = (
        f"{character.key} compacted its context ({result['kind']}): {done}, "
        f"{result['original_tokens']}→{result['new_tokens']} tokens "
        f"({result['reduction_pct']:.0f}% less){in_a_row}"
    )
    post_to_log_channel(script, text)
    if script.get_config("compact_notify_room") and character.location:
        try:
            asleep = script.db.operating_mode == "sleep"
            # Asleep, it does not pause: the room sees it stir.
            gesture = "stirs in their sleep" if asleep else "pauses and gathers their thoughts"
            character.location.msg_contents(
                fitted(f"{character.key} {gesture}."), exclude=[character]
            )
        except Exception:
            logger.log_trace(f"AI {script.label}: could not tell the room")
