"""A TCP forwarder from the node's address to a broker that listens on 127.0.0.1 only.

local-xvfb starts every broker on loopback. On a real cluster the controller runs on
another machine, so the desktop actor listens on ``<node ip>:<free port>`` and copies bytes
both ways to the broker. Nothing is parsed or logged: the broker still authenticates every
request with the rollout's bearer token.
"""

from __future__ import annotations

import contextlib
import socket
import threading


class Forwarder:
    """Listens on ``(host, 0)`` and forwards every connection to ``target``; ``close()`` stops it.

    Raises :class:`OSError` from the constructor when the address cannot be bound.
    """

    def __init__(self, host: str, target: tuple[str, int]) -> None:
        self.target = target
        self._server = socket.create_server((host, 0))
        self.port: int = self._server.getsockname()[1]
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="broker-forwarder", daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=10)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pump, args=(source, sink), daemon=True).start()

    def close(self) -> None:
        """Stop accepting (idempotent); open connections end when either side closes."""
        self._closed.set()
        with contextlib.suppress(OSError):
            self._server.close()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while chunk := source.recv(65536):
            sink.sendall(chunk)
    except OSError:
        pass
    finally:
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                end.close()
