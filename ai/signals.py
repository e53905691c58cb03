"""Django signals a game can connect to, to watch or steer compactions.

``pre_compaction`` is sent before the summary call with a :class:`CompactionPlan`
(keyword ``plan``); a receiver may veto the compaction by raising
:class:`CompactionVetoed`, or annotate it with :meth:`CompactionPlan.add_note`.
``post_compaction`` is sent after every compaction that ``pre_compaction`` announced,
whatever its outcome, with the result dict (keyword ``result``). Both are sent with the
script's class as ``sender`` (connect with ``sender=MyAssistantScript`` to hear only those)
and ``script`` and ``character`` as keywords. A receiver that fails otherwise is logged and
the compaction goes on.
"""

import traceback
from dataclasses import dataclass, field

from django.dispatch import Signal
from evennia.utils import logger

pre_compaction = Signal()
post_compaction = Signal()


class CompactionVetoed(Exception):
    """Raised by a ``pre_compaction`` receiver to stop the compaction; its text is the reason."""


@dataclass
class CompactionPlan:
    """What a compaction is about to do, as ``pre_compaction`` receivers see it.

    Attributes:
        kind (str): ``sleep``, ``emergency`` or ``manual``.
        strategy (str): The ``compact_strategy``: ``summary``, ``masking``,
            ``assistant_runs`` or ``hybrid``.
        messages (list): The messages older than the preserve window, but pinned ones, that
            the strategy may replace, oldest first (read them, do not change them).
        message_count (int): How many they are.
        tokens (int): Their stored tokens.
        history_tokens (int): The live history's tokens.
        notes (list): Lines added by receivers, appended to every ``[CONTEXT SUMMARY]`` of
            this compaction and listed in its result.
        read_at (int or None): The history's revision when ``messages`` were read.
    """

    kind: str
    strategy: str
    messages: list
    message_count: int
    tokens: int
    history_tokens: int
    read_at: int = None
    notes: list = field(default_factory=list)

    def add_note(self, text):
        """Append ``text`` (one line) to the compaction's summaries."""
        self.notes.append(" ".join(str(text).split()))


def send_logged(signal, script, **kwargs):
    """Send ``signal`` for ``script``; log each failing receiver; return the vetoes raised."""
    vetoes = []
    for receiver, response in signal.send_robust(type(script), script=script, **kwargs):
        if isinstance(response, CompactionVetoed):
            vetoes.append(str(response) or "no reason given")
        elif isinstance(response, Exception):
            name = getattr(receiver, "__qualname__", repr(receiver))
            trace = "".join(traceback.format_exception(response)).rstrip()
            logger.log_err(f"AI {script.label}: compaction receiver {name} failed:\n{trace}")
    return vetoes
