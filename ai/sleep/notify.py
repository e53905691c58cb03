"""Telling builders (on the log channel) and, if wished, the room that compaction ran."""

from evennia.utils import logger

from ..log_channel import post_to_log_channel
from ..tools.communication import tell_room
from ..utils.columns import fitted
from ..utils.message_format import summary_depth
from ..utils.wording import plural


def announce_compaction(script, character, result):
    """Report a finished compaction on the log channel, and to the room if configured."""
    count = result["compacted_messages"]
    if result["strategy"] == "masking":
        done, depth = f"{plural(count, 'old tool output')} masked", ""
    elif result["strategy"] == "archive":
        done = f"{plural(count, 'oldest message')} archived whole (search_history)"
        depth = ""
    else:
        done = f"{plural(count, 'message')} into a summary"
        depth = f"; it is {summary_depth(result['successive_compactions'])}"
    text = (
        f"{character.key} compacted its context ({result['kind']}): {done}, "
        f"{result['original_tokens']}→{result['new_tokens']} tokens "
        f"({result['reduction_pct']:.0f}% less){depth}"
    )
    post_to_log_channel(script, text)
    if script.get_config("compact_notify_room") and character.location:
        try:
            asleep = script.db.operating_mode == "sleep"
            # Asleep, it does not pause: the room sees it stir.
            gesture = "stirs in their sleep" if asleep else "pauses and gathers their thoughts"
            tell_room(
                character.location, fitted(f"{character.key} {gesture}."), exclude=[character]
            )
        except Exception:
            logger.log_trace(f"AI {script.label}: could not tell the room")
