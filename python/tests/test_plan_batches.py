"""The plan dict (the `arenac plan --json` schema) and run_batches against a whole run."""

import json
import os
import pathlib
import subprocess

import numpy as np
import pytest

import arenac
from conftest import ROOT


def test_plan_dict(digits_path):
    sess = arenac.InferenceSession(digits_path, shapes={"N": 8}, threads=1)
    plan = sess.plan()
    assert plan["arena_bytes"] == sess.arena_bytes > 0
    assert sess.weights_bytes > 0
    assert sess.frozen_inputs == []
    cli = pathlib.Path(os.environ.get("ARENAC_BIN", ROOT / "target" / "debug" / "arenac"))
    if not cli.exists():
        pytest.skip(f"no arenac CLI at {cli} to compare with")
    out = subprocess.run(
        [str(cli), "plan", digits_path, "--shape", "N=8", "--threads", "1", "--json"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    cli_plan = json.loads(out)
    # Timings differ run to run; everything else is the same plan.
    timing = [k for k in cli_plan if k.endswith("_ms")]
    for k in timing:
        plan.pop(k, None)
        cli_plan.pop(k)
    assert plan == cli_plan


def test_plan_needs_shapes(digits_path, samples):
    sess = arenac.InferenceSession(digits_path)
    with pytest.raises(arenac.Error) as e:
        sess.plan()
    assert "shapes" in str(e.value)
    sess.run(None, {"pixels": samples[:3]})
    assert sess.plan()["arena_bytes"] == sess.arena_bytes


@pytest.mark.parametrize("batch", ["auto", 7, 100, 1000])
def test_run_batches_arrays(digits_path, samples, batch):
    sess = arenac.InferenceSession(digits_path)
    (whole,) = sess.run(None, {"pixels": samples})
    (batched,) = sess.run_batches({"pixels": samples}, batch=batch, memory_limit="64MiB")
    np.testing.assert_array_equal(batched, whole)


@pytest.mark.parametrize("batch", ["auto", 32])
def test_run_batches_npy_files(digits_path, samples, tmp_path, batch):
    sess = arenac.InferenceSession(digits_path)
    (whole,) = sess.run(None, {"pixels": samples})
    src = str(ROOT / "models" / "digits" / "samples.npy")
    (from_files,) = sess.run_batches({"pixels": src}, batch=batch)
    np.testing.assert_allclose(from_files, whole, rtol=1e-6, atol=1e-7)
    out = tmp_path / "out"
    (mapped,) = sess.run_batches({"pixels": src}, batch=batch, output_dir=out)
    assert any(out.iterdir())
    np.testing.assert_array_equal(np.asarray(mapped), from_files)


def test_run_batches_errors(digits_path, samples, tmp_path):
    sess = arenac.InferenceSession(digits_path)
    with pytest.raises(arenac.InvalidArgument):
        sess.run_batches({"pixels": samples}, batch=0)
    with pytest.raises(arenac.NoSuchFile):
        sess.run_batches({"pixels": str(tmp_path / "none.npy")})
    with pytest.raises(arenac.Error):
        sess.run_batches({"pixels": samples}, memory_limit="1KiB")
