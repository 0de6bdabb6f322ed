"""A stand-in for ``session-manager-plugin`` (port forwarding only), for the AWS tests.

Invoked exactly like the real plugin by the tunnel: argv[1] is the StartSession response
(or the name of the environment variable holding it), argv[5] the request parameters. The
fake SessionManager returns ``StreamUrl = tcp://127.0.0.1:<broker port>``; this process
listens on ``localPortNumber`` and forwards every connection there, like the real data
channel does over the SSM websocket. ``--version`` prints a version.

Like the real plugin, it ends when its session can no longer exist: the real one exits when
the data channel closes (the instance is gone, the session was terminated); here, when the
target's broker has refused connections for a few seconds. Without that, the tunnels of a
SIGKILLed controller (its own session, ``start_new_session``) would outlive every test.
"""

import contextlib
import json
import os
import socket
import sys
import threading
import time


def pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


def serve(conn: socket.socket, host: str, port: int) -> None:
    try:
        upstream = socket.create_connection((host, port), timeout=10)
    except OSError:
        conn.close()
        return
    upstream.settimeout(None)
    threading.Thread(target=pump, args=(conn, upstream), daemon=True).start()
    pump(upstream, conn)


def watch_target(host: str, port: int, interval_s: float = 1.0, refusals: int = 3) -> None:
    """Exit once the target refused ``refusals`` probes in a row (its instance was shut down)."""
    refused = 0
    while True:
        time.sleep(interval_s)
        try:
            socket.create_connection((host, port), timeout=5).close()
            refused = 0
        except ConnectionRefusedError:
            refused += 1
            if refused >= refusals:
                os._exit(0)
        except OSError:
            refused = 0  # a timeout under load is not a closed data channel


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--version":
        print("1.2.707.0-fake")
        return 0
    raw = sys.argv[1]
    response = json.loads(os.environ.get(raw, raw))
    parameters = json.loads(sys.argv[5])["Parameters"]
    local = int(parameters["localPortNumber"][0])
    host, port = response["StreamUrl"][len("tcp://"):].rsplit(":", 1)
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", local))
    server.listen(128)
    print(f"Starting session with SessionId: {response['SessionId']}")
    print(f"Port {local} opened for sessionId {response['SessionId']}.")
    print("Waiting for connections...", flush=True)
    threading.Thread(target=watch_target, args=(host, int(port)), daemon=True).start()
    while True:
        conn, _ = server.accept()
        threading.Thread(target=serve, args=(conn, host, int(port)), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
