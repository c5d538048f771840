#!/usr/bin/env python3
"""Starts an agentry binary on a fresh SQLite database, follows and leaves many sessions'
event streams in bursts, and reports its resident memory (VmRSS of /proc/<pid>/status):
idle, at the peak of each burst, and a few seconds after each burst.

    cargo build --release
    python3 scripts/memory_burst.py --binary target/release/agentry --followers 1500 --runs 3

Each run starts its own server (a fresh database in a temporary directory, on a free port)
with the stream limits raised above `--followers` and a keep-alive comment every second
(a follower that left is noticed at the next one), creates the sessions (`--per-tenant` per
tenant), then runs `--rounds` bursts: every session gets one live follower
(`GET /sessions/{id}/events`, an SSE stream held open), RSS is sampled while they are open
(the peak is the largest sample), all of them are dropped, a few turns run, and RSS is read
again `--settle` seconds later. Extra `--env NAME=VALUE` pairs go to the server (allocator
settings, say). Only the Python standard library is used.
"""

import argparse
import asyncio
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

ADMIN_SECRET = "memory-burst-admin-secret"


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def call(url, method, path, token=None, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"{url}{path}", data=data, method=method)
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=60) as response:
        text = response.read()
    return json.loads(text) if text else None


def wait_ready(url, server, within=60):
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the server exited with {server.returncode}")
        try:
            call(url, "GET", "/readyz")
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("the server did not become ready")


async def follow(port, token, session, opened):
    """Opens a session's event stream and holds it until cancelled."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        (
            f"GET /sessions/{session}/events HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {token}\r\nAccept: text/event-stream\r\n\r\n"
        ).encode()
    )
    await writer.drain()
    status = await reader.readline()
    if b" 200 " not in status:
        rest = await reader.read(2048)
        raise RuntimeError(f"follow {session}: {(status + rest).decode(errors='replace')}")
    opened.append(writer)
    try:
        while await reader.read(4096):
            pass
    finally:
        writer.close()


async def burst(port, clients, pid, hold):
    """Opens one follower per session, samples RSS while they are open, drops them all."""
    opened = []
    tasks = []
    peak = rss_mb(pid)
    for i in range(0, len(clients), 100):
        for token, session in clients[i : i + 100]:
            tasks.append(asyncio.create_task(follow(port, token, session, opened)))
        await asyncio.sleep(0.05)
        peak = max(peak, rss_mb(pid))
    deadline = time.monotonic() + 60
    while len(opened) < len(clients):
        failed = [t for t in tasks if t.done() and t.exception()]
        if failed:
            raise failed[0].exception()
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {len(opened)} of {len(clients)} followers opened")
        await asyncio.sleep(0.05)
        peak = max(peak, rss_mb(pid))
    until = time.monotonic() + hold
    while time.monotonic() < until:
        await asyncio.sleep(0.1)
        peak = max(peak, rss_mb(pid))
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return peak


def run_once(args):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as data:
        env = dict(os.environ)
        env.update(
            {
                "AGENTRY__SERVER__BIND": f"127.0.0.1:{port}",
                "AGENTRY__DATABASE__URL": f"sqlite://{data}/agentry.db",
                "AGENTRY__AUTH__ADMIN_SECRET": ADMIN_SECRET,
                "AGENTRY__LOG__LEVEL": "warn",
                "AGENTRY__LIMITS__MAX_STREAMS_PER_TENANT": str(args.followers * 4),
                "AGENTRY__LIMITS__MAX_STREAMS_PER_ADDRESS": str(args.followers * 4),
                # A follower that left is noticed at the next keep-alive comment.
                "AGENTRY__ENGINE__SSE_KEEP_ALIVE_SECONDS": "1",
            }
        )
        for pair in args.env:
            name, _, value = pair.partition("=")
            env[name] = value
        server = subprocess.Popen(
            [args.binary, "serve"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=open(f"{data}/server.log", "w"),
        )
        try:
            wait_ready(url, server)
            admin = call(
                url,
                "POST",
                "/auth/token",
                body={"client_id": "admin", "client_secret": ADMIN_SECRET},
            )["access_token"]
            clients = []
            token = None
            for i in range(args.followers):
                if i % args.per_tenant == 0:
                    tenant = call(url, "POST", "/admin/tenants", admin, {"name": f"t{i}"})
                    token = call(url, "POST", f"/admin/tenants/{tenant['id']}/tokens", admin, {})[
                        "token"
                    ]
                session = call(url, "POST", "/sessions", token, {"agent": {"name": "echo"}})
                clients.append((token, session["sessionId"]))
            time.sleep(args.settle)
            figures = {"idle": rss_mb(server.pid), "peaks": [], "afters": []}
            for _ in range(args.rounds):
                peak = asyncio.run(burst(port, clients, server.pid, args.hold))
                for token, session in clients[:8]:
                    call(
                        url,
                        "POST",
                        f"/sessions/{session}/turns",
                        token,
                        {"stream": "none", "messages": [{"role": "user", "content": "hi"}]},
                    )
                time.sleep(args.settle)
                figures["peaks"].append(peak)
                figures["afters"].append(rss_mb(server.pid))
            return figures
        finally:
            server.terminate()
            server.wait(timeout=60)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", default="target/release/agentry")
    parser.add_argument("--followers", type=int, default=1500)
    parser.add_argument("--per-tenant", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--hold", type=float, default=2.0, help="seconds all followers stay")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds before 'after'")
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE for the server")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 65536)), hard))

    for run in range(1, args.runs + 1):
        f = run_once(args)
        rounds = ", ".join(
            f"peak {p:.1f} after {a:.1f}" for p, a in zip(f["peaks"], f["afters"])
        )
        print(f"run {run}: idle {f['idle']:.1f} MB; {rounds}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
