#!/usr/bin/env python3
"""Floods POST /auth/token of a running agentry with concurrent wrong logins and reports
the server's memory (VmRSS, and its peak VmHWM, from /proc/<pid>/status) before and after.

    python3 scripts/login_flood.py --url http://127.0.0.1:8080 --pid "$(pgrep -n agentry)"

Every attempt uses a well-formed, unknown client id, so each one would cost a password
verification. Only the Python standard library is used.
"""

import argparse
import collections
import json
import threading
import time
import urllib.error
import urllib.request
import uuid


def memory(pid):
    fields = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                fields[key] = int(value.split()[0]) // 1024
    return fields


def attempt(url, counts, lock):
    body = json.dumps(
        {"client_id": f"cred_{uuid.uuid4().hex}", "client_secret": "wrong"}
    ).encode()
    request = urllib.request.Request(
        f"{url}/auth/token", data=body, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            status = response.status
    except urllib.error.HTTPError as error:
        status = error.code
    except OSError as error:
        status = type(error).__name__
    with lock:
        counts[status] += 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8080")
    parser.add_argument("--pid", type=int, required=True, help="the server's process id")
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    before = memory(args.pid)
    counts = collections.Counter()
    lock = threading.Lock()
    started = time.monotonic()
    for _ in range(args.rounds):
        threads = [
            threading.Thread(target=attempt, args=(args.url, counts, lock))
            for _ in range(args.concurrency)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    elapsed = time.monotonic() - started
    after = memory(args.pid)
    health_started = time.monotonic()
    with urllib.request.urlopen(f"{args.url}/healthz", timeout=10) as response:
        health = response.status
    health_ms = (time.monotonic() - health_started) * 1000
    print(
        f"{args.rounds} rounds of {args.concurrency} concurrent wrong logins in {elapsed:.1f} s: "
        f"{dict(sorted(counts.items(), key=str))}"
    )
    print(
        f"RSS before {before['VmRSS']} MiB, after {after['VmRSS']} MiB, "
        f"peak {after['VmHWM']} MiB (+{after['VmHWM'] - before['VmRSS']} MiB)"
    )
    print(f"/healthz after the flood: {health} in {health_ms:.1f} ms")


if __name__ == "__main__":
    main()
