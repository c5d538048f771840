#!/usr/bin/env python3
"""Opens many connections to a running agentry that announce a large request body, send a
few bytes of it and then nothing; reports /healthz latency while they stall and when the
server answers and drops them.

    python3 scripts/stalled_bodies.py --url http://127.0.0.1:8080 --connections 500

Only the Python standard library is used. The process needs a file descriptor limit above
the number of connections (`ulimit -n`).
"""

import argparse
import selectors
import socket
import time
import urllib.parse
import urllib.request


def healthz_ms(url):
    started = time.monotonic()
    with urllib.request.urlopen(f"{url}/healthz", timeout=10) as response:
        assert response.status == 200
    return (time.monotonic() - started) * 1000


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8080")
    parser.add_argument("--connections", type=int, default=500)
    parser.add_argument("--wait", type=float, default=120, help="seconds to wait for drops")
    args = parser.parse_args()
    target = urllib.parse.urlsplit(args.url)
    host, port = target.hostname, target.port or 80

    head = (
        f"POST /auth/token HTTP/1.1\r\nHost: {host}:{port}\r\n"
        "Content-Type: application/json\r\nContent-Length: 1000000\r\n\r\n"
        '{"client_id":'
    ).encode()
    sockets = []
    started = time.monotonic()
    for _ in range(args.connections):
        conn = socket.create_connection((host, port))
        conn.sendall(head)
        sockets.append(conn)
    print(f"{len(sockets)} connections stalled mid-body")
    latencies = sorted(healthz_ms(args.url) for _ in range(20))
    print(
        f"/healthz while they stall: median {latencies[10]:.1f} ms, "
        f"max {latencies[-1]:.1f} ms"
    )

    selector = selectors.DefaultSelector()
    open_sockets = {}
    for conn in sockets:
        selector.register(conn, selectors.EVENT_READ)
        open_sockets[conn.fileno()] = conn
    answers = {}
    closed_at = []
    deadline = started + args.wait
    while open_sockets and time.monotonic() < deadline:
        for key, _ in selector.select(timeout=1.0):
            conn = key.fileobj
            try:
                data = conn.recv(65536)
            except ConnectionResetError:
                data = b""
            if data:
                answers.setdefault(conn.fileno(), data.split(b"\r\n", 1)[0].decode())
            else:
                closed_at.append(time.monotonic() - started)
                selector.unregister(conn)
                open_sockets.pop(conn.fileno())
                conn.close()
    statuses = {}
    for line in answers.values():
        statuses[line] = statuses.get(line, 0) + 1
    print(f"answers: {statuses}")
    if closed_at:
        print(
            f"{len(closed_at)} dropped by the server, between {min(closed_at):.1f} s and "
            f"{max(closed_at):.1f} s after they were opened; {len(open_sockets)} still open "
            f"after {args.wait:.0f} s"
        )
    else:
        print(f"none dropped within {args.wait:.0f} s")
    for conn in open_sockets.values():
        conn.close()


if __name__ == "__main__":
    main()
