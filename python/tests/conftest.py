"""Shared fixtures: the repository's models and onnxruntime as the reference."""

import os
import pathlib

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DIGITS = ROOT / "models" / "digits" / "digits.onnx"


@pytest.fixture(scope="session")
def digits_path() -> str:
    return str(DIGITS)


@pytest.fixture(scope="session")
def samples() -> np.ndarray:
    return np.load(ROOT / "models" / "digits" / "samples.npy")


@pytest.fixture(scope="session")
def light_dir() -> pathlib.Path:
    d = os.environ.get("ARENAC_LIGHT_RANDOM_DIR") or str(ROOT / ".cache" / "light-random")
    p = pathlib.Path(d)
    if not (p / "squeezenet.onnx").exists():
        pytest.skip(f"no light models in {p} (bash scripts/test.sh generates them)")
    return p


def ort_session(path):
    ort = pytest.importorskip("onnxruntime")
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def assert_close(ours, theirs, rtol=1e-3, atol=1e-4):
    assert ours.dtype == theirs.dtype, (ours.dtype, theirs.dtype)
    assert ours.shape == theirs.shape, (ours.shape, theirs.shape)
    np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=atol)
