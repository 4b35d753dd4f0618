"""One session from several Python threads: the same answers as one thread."""

import threading

import numpy as np

import arenac


def test_threads_share_one_session(digits_path, samples):
    sess = arenac.InferenceSession(digits_path, shapes={"N": 10}, threads=1)
    chunks = [samples[i * 10 : (i + 1) * 10] for i in range(10)]
    expected = [sess.run(None, {"pixels": c})[0] for c in chunks]
    errors = []
    results = {}

    def worker(t):
        try:
            for rep in range(25):
                k = (t + rep) % len(chunks)
                (out,) = sess.run(None, {"pixels": chunks[k]})
                if not np.array_equal(out, expected[k]):
                    errors.append((t, rep, k))
            results[t] = True
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(results) == 4
    assert 1 <= sess.arenas <= max(1, arenac._native.default_threads())


def test_max_sessions_one_takes_turns(digits_path, samples):
    sess = arenac.InferenceSession(digits_path, shapes={"N": 5}, max_sessions=1)
    out = []
    ts = [threading.Thread(target=lambda: out.append(sess.run(None, {"pixels": samples[:5]})[0])) for _ in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert len(out) == 3 and all(np.array_equal(o, out[0]) for o in out)
    assert sess.arenas == 1


def test_symbolic_shapes_from_threads(digits_path, samples):
    """Threads running different batch sizes each get their own compiled shape."""
    sess = arenac.InferenceSession(digits_path)
    ref = {n: sess.run(None, {"pixels": samples[:n]})[0] for n in (1, 2, 3)}
    bad = []

    def worker(n):
        for _ in range(10):
            if not np.array_equal(sess.run(None, {"pixels": samples[:n]})[0], ref[n]):
                bad.append(n)

    ts = [threading.Thread(target=worker, args=(n,)) for n in (1, 2, 3, 1)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not bad
