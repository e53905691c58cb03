"""Two answers an idle tick needs every tick, kept in memory between the writes that change
them.

Every awake tick without a player's line asks whether a reflection is due (the importance
of the journal entries no reflection covered yet) and whether the assistant has an active
goal. Asked of the database, the two questions cost more than the rest of such a tick. Each
answer is kept on the assistant (``ndb``: a reload, or an assistant out of Evennia's object
cache, asks again) and forgotten when a journal entry or a goal of that assistant is saved
or deleted (Django's signals, connected by ``AiConfig.ready``), or changed by a bulk write,
which sends no signal: such a writer calls :func:`forget` itself.

The answers are this process's: a second server process writing the same assistant's
journal or goals would not clear them (Evennia runs one).
"""

from django.db.models.signals import post_delete, post_save

PENDING_IMPORTANCE = "ai_pending_importance"
HAS_ACTIVE_GOALS = "ai_has_active_goals"


def remembered(character, name, ask):
    """Return the answer kept on ``character`` as ``name``, else ``ask()``'s, then kept."""
    answer = getattr(character.ndb, name)
    if answer is None:
        answer = ask()
        setattr(character.ndb, name, answer)
    return answer


def forget(object_id, name):
    """Forget the answer ``name`` kept on the assistant of id ``object_id``, if it is loaded.

    Looks in Evennia's object cache only: an assistant not loaded keeps no answer.
    """
    from evennia.objects.models import ObjectDB

    character = ObjectDB.get_cached_instance(object_id)
    if character is not None:
        setattr(character.ndb, name, None)


def _journal_written(sender, instance, **kwargs):
    forget(instance.db_object_id, PENDING_IMPORTANCE)


def _goal_written(sender, instance, **kwargs):
    forget(instance.db_object_id, HAS_ACTIVE_GOALS)


def connect():
    """Forget the answers on every save or delete of a journal entry or a goal."""
    from ..models import Goal, JournalEntry

    for signal in (post_save, post_delete):
        signal.connect(_journal_written, sender=JournalEntry, dispatch_uid="ai-journal-written")
        signal.connect(_goal_written, sender=Goal, dispatch_uid="ai-goal-written")
