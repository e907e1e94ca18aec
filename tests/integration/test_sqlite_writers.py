"""Sluice's own project on SQLite (the demo's default database) takes several writers at once: two processes of
four threads each read and then write one row in transactions, and none fails with "database is locked" (84 such
errors in the demo's workers for 180 sends, before WAL, a busy timeout and IMMEDIATE transactions)."""

import json
import os
import sqlite3
import subprocess
import sys

from sluice_tools.processes import ROOT

PROCESSES, THREADS, TRANSACTIONS = 2, 4, 40

WRITER = """
import json, os, sys, threading
import django
django.setup()
from django.db import connection, connections, transaction

failures = []

def write():
    for _ in range(TRANSACTIONS):
        try:
            # Read, then write what was read plus one: the fold's shape (it reads the unread item, then updates it).
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute("SELECT n FROM counter")
                (value,) = cursor.fetchone()
                cursor.execute("UPDATE counter SET n = %s", [value + 1])
        except Exception as exc:
            failures.append(f"{type(exc).__name__}: {exc}")
    connections.close_all()

threads = [threading.Thread(target=write) for _ in range(THREADS)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
with connection.cursor() as cursor:
    cursor.execute("PRAGMA journal_mode")
    mode = cursor.fetchone()[0]
print(json.dumps({"failures": failures, "journal_mode": mode}))
""".replace("TRANSACTIONS", str(TRANSACTIONS)).replace("THREADS", str(THREADS))


def test_concurrent_writers_on_sqlite_never_meet_database_is_locked(tmp_path):
    path = tmp_path / "sluice.sqlite3"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE counter (n integer)")
        db.execute("INSERT INTO counter VALUES (0)")
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "settings", "DATABASE_URL": f"sqlite:///{path}"}
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(PROCESSES)
    ]
    results = [json.loads(writer.communicate(timeout=60)[0].strip().splitlines()[-1]) for writer in writers]
    failures = [failure for result in results for failure in result["failures"]]
    assert not failures, f"{len(failures)} failed transactions, e.g. {failures[:3]}"
    assert {result["journal_mode"] for result in results} == {"wal"}
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT n FROM counter").fetchone() == (PROCESSES * THREADS * TRANSACTIONS,)  # none lost
