"""Django settings read through their checks.

A refused value is logged once, naming the setting and what it allows, and its default is
used instead: a typo in ``settings.py`` never stops the assistants. ``ai.config`` reads
every ``AI_*`` setting this way, and so does the context system for its own
(``ai.prompt_contexts``).
"""

from copy import deepcopy

from django.conf import settings
from django.core.signals import setting_changed
from evennia.utils import logger

from .value_checks import ConfigError

# name -> (repr of the value read, whether it was accepted): each value is checked, and a
# refused one logged, once; Django's setting_changed (override_settings too) forgets it.
_checked = {}


def read_setting(name, default, check):
    """Return the Django setting ``name`` if ``check`` accepts it, else a copy of ``default``.

    Args:
        name (str): The setting.
        default: Its value when it is not set or refused.
        check (callable): Raises ``ValueError`` (or a ``ConfigError`` naming the setting)
            for a value it refuses.
    """
    value = getattr(settings, name, default)
    seen = repr(value)
    known = _checked.get(name)
    if known is None or known[0] != seen:
        known = (seen, _accepted(name, value, default, check))
        _checked[name] = known
    return value if known[1] else deepcopy(default)


def _accepted(name, value, default, check):
    """Return whether ``check`` accepts ``value``; log why once when it does not."""
    try:
        check(value)
    except ConfigError as err:  # names the setting itself
        problem = str(err)
    except ValueError as err:
        problem = f"{name}={value!r} refused: {err}"
    else:
        return True
    logger.log_err(f"AI: setting {problem}; using the default {default!r}")
    return False


def _forget(setting, **kwargs):
    _checked.pop(setting, None)


setting_changed.connect(_forget, dispatch_uid="ai.utils.checked_settings")
