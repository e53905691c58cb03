"""pytest set-up: initialise Evennia once Django is configured by pytest-django."""

import pytest


@pytest.fixture(scope="session", autouse=True)
def _evennia_initialised(django_db_blocker):
    """Run `evennia._init()` so that `evennia.create_object` and friends exist."""
    import evennia

    with django_db_blocker.unblock():
        evennia._init()


@pytest.fixture(scope="session", autouse=True)
def _no_network():
    """Fail any connection that leaves this machine: nothing may reach the network."""
    from ai.utils.network_guard import forbid_network

    restore = forbid_network()
    yield
    restore()
