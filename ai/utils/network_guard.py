"""Refuse connections that leave this machine, to prove a run needs no network."""

import socket


def forbid_network():
    """Make every non-loopback ``socket.connect`` raise ConnectionRefusedError.

    Returns:
        callable: Restores the original ``connect`` when called.
    """
    real_connect = socket.socket.connect

    def local_only_connect(sock, address):
        host = address[0] if isinstance(address, tuple) else address
        if isinstance(host, str) and not (
            host.startswith("127.") or host in ("localhost", "::1") or host.startswith("/")
        ):
            raise ConnectionRefusedError(f"no network allowed here: tried {address!r}")
        return real_connect(sock, address)

    socket.socket.connect = local_only_connect

    def restore():
        socket.socket.connect = real_connect

    return restore
