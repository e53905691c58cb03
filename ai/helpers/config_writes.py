"""Whether any assistant's configuration was written since a configuration was resolved.

Resolving an assistant's configuration reads every configuration attribute (about fifty)
and checks each value: about a millisecond, once a tick. The resolved configuration is kept
on the script with the generation it was resolved at (``AssistantScript.effective_config``),
and saving or deleting any Attribute whose key is a configuration name (Django's signals,
connected by ``AiConfig.ready``) raises the generation: every kept configuration is then
resolved again. Another object's attribute of the same name costs only a resolve.

The generation is this process's: a second server process writing the same attributes
would not raise it (Evennia runs one).
"""

from django.db.models.signals import post_delete, post_save

_generation = [0]


def generation():
    """Return the number of configuration writes this process has seen."""
    return _generation[0]


def _attribute_written(sender, instance, **kwargs):
    from ..config import SCRIPT_CONFIG

    if instance.db_key in SCRIPT_CONFIG:
        _generation[0] += 1


def connect():
    """Raise the generation on every save or delete of a configuration attribute."""
    from evennia.typeclasses.attributes import Attribute

    for signal in (post_save, post_delete):
        signal.connect(_attribute_written, sender=Attribute, dispatch_uid="ai-config-written")
