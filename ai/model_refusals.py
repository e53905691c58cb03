"""Model calls that cannot succeed until their configuration changes, said once each.

A missing or refused key, or a refused option, is not a passing trouble: retried on every
tick, it would fail every tick and fill the log. The provider's refusal of a key is kept
for the process, by model, server and key (hashed), so that no further call is made with
that key; each assistant is told once. A changed key, server or model is a new setup,
tried again; a reload forgets them all (a new key variable is only read by a new process).
"""

import hashlib

# The error kinds that no retry mends: only a change of configuration does.
PERMANENT = frozenset({"auth", "bad_config"})

_refused = {}
_reported = set()


def setup_of(model, kwargs):
    """Return what a refusal is kept by: the model, its server and its key (hashed)."""
    key = str(kwargs.get("api_key") or "")
    return model, str(kwargs.get("api_base") or ""), hashlib.sha256(key.encode()).hexdigest()


def refusal(setup):
    """Return ``(error kind, error)`` of the refusal kept for ``setup``, or None."""
    return _refused.get(setup)


def keep_refusal(setup, kind, error):
    """Keep the provider's refusal of ``setup``: no call is made with it again."""
    _refused[setup] = (kind, error)


def first_report(assistant_id, problem):
    """Tell whether ``problem`` (a setup, or the text of a refused option) is news to the
    assistant ``assistant_id``, and note that it has been told."""
    if (assistant_id, problem) in _reported:
        return False
    _reported.add((assistant_id, problem))
    return True


def forget_refusals():
    """Forget every refusal and report (as a reload does)."""
    _refused.clear()
    _reported.clear()
