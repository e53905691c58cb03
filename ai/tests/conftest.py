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
    import socket

    real_connect = socket.socket.connect

    def guarded_connect(sock, address):
        host = address[0] if isinstance(address, tuple) else address
        if isinstance(host, str) and not (
            host.startswith("127.") or host in ("localhost", "::1") or host.startswith("/")
        ):
            raise AssertionError(f"test tried to reach the network: {address!r}")
        return real_connect(sock, address)

    socket.socket.connect = guarded_connect
    yield
    socket.socket.connect = real_connect
