"""pytest set-up: initialise Evennia once Django is configured by pytest-django."""

import pytest


@pytest.fixture(scope="session", autouse=True)
def _evennia_initialised(django_db_blocker):
    """Run `evennia._init()` so that `evennia.create_object` and friends exist."""
    import evennia

    with django_db_blocker.unblock():
        evennia._init()
