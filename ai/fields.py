"""Model fields that store NUL characters on every database.

PostgreSQL refuses NUL (``"\\x00"``) in text and in JSON strings, and players may say one
or a model return one. These fields write each NUL as ``ESCAPE`` + ``"0"`` and each
``ESCAPE`` as two, and undo it on reading, on every database alike, so what is read back is
exactly what was written. ``ESCAPE`` is U+FDD0, a Unicode noncharacter, which text from
outside does not carry; a lone one, written before these fields, reads back unchanged.
"""

import re

from django.db import models
from django.db.models import lookups

ESCAPE = "\ufdd0"
_ESCAPED = re.compile(f"{ESCAPE}([0{ESCAPE}])")
# How json.dumps writes ESCAPE in the JSON text that SQLite keeps.
_ESCAPE_IN_JSON = "\\ufdd0"


def escape_nul(text):
    """Return ``text`` (a string or None) with NUL and ``ESCAPE`` escaped."""
    if not text or ("\x00" not in text and ESCAPE not in text):
        return text
    return text.replace(ESCAPE, ESCAPE * 2).replace("\x00", f"{ESCAPE}0")


def restore_nul(text):
    """Return ``text`` as it was before :func:`escape_nul`."""
    if not text or ESCAPE not in text:
        return text
    return _ESCAPED.sub(lambda match: "\x00" if match[1] == "0" else ESCAPE, text)


def _map_strings(value, convert):
    """Return the JSON-able ``value`` with ``convert`` applied to every key and string."""
    if isinstance(value, str):
        return convert(value)
    if isinstance(value, (list, tuple)):
        return [_map_strings(item, convert) for item in value]
    if isinstance(value, dict):
        return {
            _map_strings(key, convert): _map_strings(item, convert) for key, item in value.items()
        }
    return value


def restore_nul_json(value, text):
    """Return ``value``, decoded from the JSON ``text``, with its strings restored.

    ``text`` tells cheaply whether any string was escaped: most values are returned as
    they are, without a walk.
    """
    if ESCAPE in text or _ESCAPE_IN_JSON in text:
        return _map_strings(value, restore_nul)
    return value


class _NulSafeText:
    """Escapes NUL in a text field's values, and in what its lookups look for."""

    def get_prep_value(self, value):
        return escape_nul(super().get_prep_value(value))

    def from_db_value(self, value, expression, connection):
        return restore_nul(value)


class NulSafeTextField(_NulSafeText, models.TextField):
    """A ``TextField`` that stores NUL characters (see the module's docstring)."""


class NulSafeCharField(_NulSafeText, models.CharField):
    """A ``CharField`` that stores NUL characters; ``max_length`` counts them escaped."""


# Pattern lookups (``content__icontains=...``) skip ``get_prep_value``: these look for the
# value escaped, as the column holds it.
for _lookup in (
    lookups.IExact,
    lookups.Contains,
    lookups.IContains,
    lookups.StartsWith,
    lookups.IStartsWith,
    lookups.EndsWith,
    lookups.IEndsWith,
):
    _escaped = type(_lookup.__name__, (_lookup,), {"prepare_rhs": True})
    NulSafeTextField.register_lookup(_escaped)
    NulSafeCharField.register_lookup(_escaped)


class NulSafeJSONField(models.JSONField):
    """A ``JSONField`` whose strings, keys included, may hold NUL characters."""

    def get_prep_value(self, value):
        return _map_strings(super().get_prep_value(value), escape_nul)

    def from_db_value(self, value, expression, connection):
        decoded = super().from_db_value(value, expression, connection)
        return restore_nul_json(decoded, value) if isinstance(value, str) else decoded
