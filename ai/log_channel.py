"""The builders' log channel (``AI_LOG_CHANNEL``): what the assistants did or wait for."""

from evennia.accounts.models import AccountDB
from evennia.comms.models import ChannelDB
from evennia.utils import create, logger

from .config import ai_setting
from .utils.columns import after_prefix

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
    """Post ``text`` on the log channel, wrapped so that every line fits a client's default
    width after the channel's prefix; a failing channel is logged, never raised (what it
    reports is already stored)."""
    try:
        channel = log_channel()
        channel.msg(after_prefix(text, channel.channel_prefix()))
    except Exception:
        logger.log_trace(f"AI {script.label}: could not post to the log channel")
