"""Telling builders (on a log channel) and, if wished, the room that compaction ran or
was undone."""

from evennia.accounts.models import AccountDB
from evennia.comms.models import ChannelDB
from evennia.utils import create, logger

from ..config import ai_setting

CHANNEL_LOCKS = "control:perm(Developer);listen:perm(Builder);send:false()"


def log_channel():
    """Return the builders' AI log channel, creating it if it does not exist."""
    name = ai_setting("AI_LOG_CHANNEL")
    found = ChannelDB.objects.channel_search(name, exact=True)
    if found:
        return found[0]
    return create.create_channel(name, locks=CHANNEL_LOCKS, desc="AI assistant events")


def open_log_channel():
    """Create the log channel if needed and subscribe every Builder who is not yet.

    Run when an assistant is created and at every server start, so builders hear the
    first compaction, not only those after someone subscribed by hand.
    """
    channel = log_channel()
    for account in AccountDB.objects.all():
        builder = account.is_superuser or account.check_permstring("Builder")
        if builder and not channel.subscriptions.has(account):
            channel.connect(account)
    return channel


def post_to_log_channel(script, text):
    """Post ``text`` on the log channel; a failing channel is logged, never raised (what
    it reports is already stored)."""
    try:
        log_channel().msg(text)
    except Exception:
        logger.log_trace(f"AI {script.label}: could not post to the log channel")


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
            character.location.msg_contents(f"{character.key} {gesture}.", exclude=[character])
        except Exception:
            logger.log_trace(f"AI {script.label}: could not tell the room")
