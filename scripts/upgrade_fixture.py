#!/usr/bin/env python3
"""Writes the data of tests/fixtures/upgrade/ with a given agentry binary.

    python3 scripts/upgrade_fixture.py BINARY sqlite
    python3 scripts/upgrade_fixture.py BINARY postgres   # uses postgres://postgres@127.0.0.1:5432

It starts BINARY on a fresh database with tests/fixtures/upgrade/agents.toml, drives it
through its API (tenants, credentials, tokens, sessions with secret options, turns in
every stream mode, a cancelled turn, an idempotent retry, ACP runs with a stored file part,
an AgentScope request), stops it, and prints the rows of its tables as SQL INSERT
statements (schema history excluded): the fixture a test loads into a database migrated to
the same version before migrating it to the current one.
"""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

BASE = "http://127.0.0.1:18093"
HERE = os.path.dirname(os.path.abspath(__file__))
CONFIG = os.path.join(HERE, "..", "tests", "fixtures", "upgrade", "agents.toml")
TABLES = ["tenants", "credentials", "api_tokens", "instance_keys", "sessions", "history",
          "compacted_history", "runs", "turns", "events", "memory_notes", "files"]


def call(method, path, token=None, body=None, accept=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(BASE + path, data=data, method=method)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    if accept:
        request.add_header("Accept", accept)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            text = response.read().decode()
            return response.status, text
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def ok(result):
    status, text = result
    assert 200 <= status < 300, (status, text)
    try:
        return json.loads(text)
    except ValueError:
        return text


def wait_ready():
    for _ in range(300):
        try:
            if call("GET", "/healthz")[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.1)
    sys.exit("the server did not start")


def drive():
    admin = ok(call("POST", "/auth/token", body={
        "client_id": "admin", "client_secret": "fixture-admin-secret"}))["access_token"]
    tenant = ok(call("POST", "/admin/tenants", admin, {"name": "upgraded"}))["id"]
    other = ok(call("POST", "/admin/tenants", admin, {"name": "suspended-one"}))["id"]
    ok(call("PATCH", f"/admin/tenants/{other}", admin, {"status": "suspended"}))
    ok(call("POST", f"/admin/tenants/{tenant}/credentials", admin, {"name": "ci"}))
    revoked = ok(call("POST", f"/admin/tenants/{tenant}/tokens", admin, {"name": "old"}))
    ok(call("DELETE", f"/admin/tenants/{tenant}/tokens/{revoked['jti']}", admin))
    token = ok(call("POST", f"/admin/tenants/{tenant}/tokens", admin, {}))["token"]

    echo = ok(call("POST", "/sessions", token, {
        "agent": {"name": "echo", "options": {"api_key": "sk-fixture-secret"}}}))["sessionId"]
    for mode in ["none", "delta", "message"]:
        ok(call("POST", f"/sessions/{echo}/turns", token, {
            "stream": mode, "messages": [{"role": "user", "content": f"hello in {mode} mode"}]}))
    keyed = {"messages": [{"role": "user", "content": "once only"}]}
    request = urllib.request.Request(BASE + f"/sessions/{echo}/turns",
                                     data=json.dumps(keyed).encode(), method="POST")
    request.add_header("Content-Type", "application/json")
    request.add_header("Authorization", f"Bearer {token}")
    request.add_header("Idempotency-Key", "fixture-key")
    for _ in range(2):
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()

    thinker = ok(call("POST", "/sessions", token, {"agent": {"name": "thinker"}}))["sessionId"]
    ok(call("POST", f"/sessions/{thinker}/turns", token, {
        "stream": "delta", "messages": [{"role": "user", "content": "think about it"}]}))

    slow = ok(call("POST", "/sessions", token, {"agent": {"name": "slow"}}))["sessionId"]
    ok(call("POST", f"/sessions/{slow}/turns", token, {
        "stream": "none", "messages": [{"role": "user", "content": "abc"}]}))
    request = urllib.request.Request(
        BASE + f"/sessions/{slow}/turns", method="POST",
        data=json.dumps({"stream": "delta", "messages": [
            {"role": "user", "content": "a long answer to cancel"}]}).encode())
    request.add_header("Content-Type", "application/json")
    request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=30) as response:
        turn = response.headers["agentry-turn-id"]
        response.readline()
        ok(call("POST", f"/sessions/{slow}/turns/{turn}/cancel", token, {}))
        response.read()

    part = {"name": "/notes/long.txt", "content_type": "text/plain",
            "content": "a part longer than the inline limit, stored once as a file " * 3,
            "content_encoding": "plain", "content_url": None, "metadata": None}
    ok(call("POST", "/acp/runs", token, {
        "agent_name": "echo", "mode": "sync",
        "input": [{"role": "user", "parts": [part]}]}))
    ok(call("POST", "/acp/runs", token, {
        "agent_name": "thinker", "mode": "stream",
        "input": [{"role": "user", "parts": [dict(part, name=None, content="streamed run")]}]}))
    ok(call("POST", "/agentscope/process", token, {
        "input": [{"role": "user", "content": [{"type": "text", "text": "from agentscope"}]}],
        "session_id": "agentscope-fixture"}))


def dump_sqlite(path):
    import sqlite3
    db = sqlite3.connect(path)
    for table in TABLES:
        columns = [row[1] for row in db.execute(f"PRAGMA table_info({table})")]
        for row in db.execute(f"SELECT * FROM {table} ORDER BY rowid"):
            values = ", ".join(sqlite_literal(v) for v in row)
            print(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({values});")


def sqlite_literal(value):
    if value is None:
        return "NULL"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, bytes):
        return "x'" + value.hex() + "'"
    return "'" + value.replace("'", "''") + "'"


def main():
    binary, backend = sys.argv[1], sys.argv[2]
    work = tempfile.mkdtemp(prefix="agentry-fixture-")
    env = dict(os.environ, AGENTRY__LOG__LEVEL="warn")
    if backend == "sqlite":
        url = f"sqlite://{work}/fixture.db"
    else:
        name = "agentry_fixture"
        subprocess.run(["psql", "-qh", "127.0.0.1", "-U", "postgres", "-c",
                        f"DROP DATABASE IF EXISTS {name}", "-c", f"CREATE DATABASE {name}"],
                       check=True)
        url = f"postgres://postgres@127.0.0.1:5432/{name}?sslmode=disable"
    env["AGENTRY__DATABASE__URL"] = url
    server = subprocess.Popen([binary, "--config", CONFIG, "serve"], env=env)
    try:
        wait_ready()
        drive()
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
    if backend == "sqlite":
        dump_sqlite(f"{work}/fixture.db")
    else:
        dumped = subprocess.run(
            ["pg_dump", "-h", "127.0.0.1", "-U", "postgres", "--data-only", "--inserts",
             "--column-inserts", "--no-owner", "--no-privileges",
             "--exclude-table=refinery_schema_history", "agentry_fixture"],
            check=True, capture_output=True, text=True).stdout
        lines = [line for line in dumped.splitlines() if line.startswith("INSERT INTO")]
        # Parents before children.
        for table in TABLES:
            for line in lines:
                if line.startswith(f"INSERT INTO public.{table} "):
                    print(line)


if __name__ == "__main__":
    main()
