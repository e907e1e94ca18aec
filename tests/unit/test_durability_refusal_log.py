"""A refused WAIT is logged once per process and Redis: never twice from racing threads, once more in a forked child."""

import os
import threading
import uuid

from pipeline.durability import first_refusal


def url():
    return f"redis://127.0.0.1:6379/0?test={uuid.uuid4().hex}"


def test_many_threads_refused_at_once_log_it_once():
    for _round in range(50):
        where = url()
        barrier = threading.Barrier(8)
        firsts = []

        def refused(where=where, barrier=barrier, firsts=firsts):
            barrier.wait()
            firsts.append(first_refusal(where))

        threads = [threading.Thread(target=refused) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(firsts) == [False] * 7 + [True]
    other = url()
    assert first_refusal(other), "each Redis once"
    assert not first_refusal(other)


def test_a_forked_child_logs_its_own_first_refusal_once():
    where = url()
    assert first_refusal(where)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its first two answers, then leave at once
        try:
            answers = b"".join(b"1" if first_refusal(where) else b"0" for _ in range(2))
        except Exception:  # noqa: BLE001 - the child reports any failure through the pipe
            answers = b"xx"
        os.write(write, answers)
        os._exit(0)
    os.close(write)
    answer = os.read(read, 2)
    os.close(read)
    os.waitpid(pid, 0)
    assert answer == b"10"
    assert not first_refusal(where), "the parent logged it already"
