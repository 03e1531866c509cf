"""Unreachable endpoints on the loopback interface, for the real Hugging Face client: a port that
refuses connections, a host name that never resolves, and a server that accepts and never answers.
Nothing here reaches beyond 127.0.0.1 (``.invalid`` is reserved never to resolve)."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

UNRESOLVABLE_ENDPOINT = "http://nonexistent.invalid"


def refused_endpoint() -> str:
    """A loopback port nothing listens on: the OS picks a free one, then it is closed again."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@contextmanager
def silent_endpoint() -> Iterator[str]:
    """A loopback server that accepts every connection and never sends a byte."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except OSError:
                return  # closed below
            held.append(connection)

    thread = threading.Thread(target=accept, name="silent-endpoint", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        with contextlib.suppress(OSError):
            server.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept() on Linux
        server.close()
        for connection in held:
            connection.close()
        thread.join(timeout=5)


# Each way of being unreachable, and the reason the app gives for it.
UNREACHABLE_REASONS = {
    "refused": "the connection was refused",
    "unresolvable": "the host name could not be resolved",
    "silent": "no answer in time",
}


@contextmanager
def unreachable_endpoint(kind: str) -> Iterator[str]:
    """An ``HF_ENDPOINT`` for one of ``UNREACHABLE_REASONS``."""
    if kind == "silent":
        with silent_endpoint() as endpoint:
            yield endpoint
    elif kind == "refused":
        yield refused_endpoint()
    elif kind == "unresolvable":
        yield UNRESOLVABLE_ENDPOINT
    else:
        raise ValueError(f"unknown kind of unreachable endpoint: {kind!r}")
