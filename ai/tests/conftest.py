"""pytest set-up: initialise Evennia once Django is configured by pytest-django."""

import pytest


@pytest.fixture(scope="session", autouse=True)
def _evennia_initialised(django_db_setup, django_db_blocker):
    """Run `evennia._init()` so that `evennia.create_object` and friends exist.

    After the test database is set up: a connection opened before would stay on a private
    in-memory database, which a worker thread's connection cannot see
    (``AssistantTransactionTestCase``)."""
    import evennia
    from django.conf import settings
    from evennia.utils import logger

    with django_db_blocker.unblock():
        evennia._init()
    # Evennia's test cases put its default LOG_DIR (inside the installed package) back in
    # the settings; the logger keeps the first directory it is given, so give it ours.
    logger._LOGDIR = settings.LOG_DIR


@pytest.fixture(scope="session", autouse=True)
def _memory_stores_closed(django_db_setup):
    """Close long-term memory's own connections to the test database before it is dropped
    (pgvector's, on PostgreSQL)."""
    yield
    from ai.semantic_memory import WORKER

    from .support import wait_for

    wait_for(WORKER.close())


@pytest.fixture(scope="session", autouse=True)
def _no_network():
    """Fail any connection that leaves this machine: nothing may reach the network."""
    from ai.utils.network_guard import forbid_network

    restore = forbid_network()
    yield
    restore()


@pytest.fixture(autouse=True)
def _tool_offerings_forgotten():
    """Forget, after each test, which models were switched to tools listed as text: the
    switch is kept in memory as well as in the test's (rolled back) database."""
    yield
    from .support import forget_tool_offerings

    forget_tool_offerings()
