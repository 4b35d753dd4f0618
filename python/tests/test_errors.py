"""Errors are arenac.Error subclasses (and ValueError where ONNX Runtime raises one) carrying
the CLI's one-line message."""

import numpy as np
import pytest

import arenac


def one_line(e):
    msg = str(e.value)
    assert msg and "\n" not in msg, msg
    return msg


def test_hostile_model_file(tmp_path):
    bad = tmp_path / "hostile.onnx"
    bad.write_bytes(b"\x0a\xff\xff\xff\xff\x0f" + bytes(range(256)) * 4)
    with pytest.raises(arenac.InvalidModel) as e:
        arenac.InferenceSession(str(bad))
    assert isinstance(e.value, arenac.Error)
    assert "not a valid ONNX model" in one_line(e)


def test_missing_file(tmp_path):
    with pytest.raises(arenac.NoSuchFile) as e:
        arenac.InferenceSession(str(tmp_path / "nope.onnx"))
    assert isinstance(e.value, FileNotFoundError) and isinstance(e.value, arenac.Error)
    assert "nope.onnx" in one_line(e)


def test_wrong_shape(digits_path, samples):
    sess = arenac.InferenceSession(digits_path, shapes={"N": 1})
    with pytest.raises(arenac.InvalidInput) as e:
        sess.run(None, {"pixels": samples[:2]})
    assert isinstance(e.value, ValueError) and isinstance(e.value, arenac.Error)
    msg = one_line(e)
    assert "pixels" in msg and "[1,64]" in msg.replace(" ", "") and "[2,64]" in msg.replace(" ", "")
    # Advice in this package's terms, not the CLI's.
    assert "--shape" not in msg and "shapes=" in msg


def test_wrong_rank_on_symbolic_model(digits_path):
    sess = arenac.InferenceSession(digits_path)
    with pytest.raises(arenac.InvalidInput) as e:
        sess.run(None, {"pixels": np.zeros((2, 8, 8), np.float32)})
    assert "pixels" in one_line(e)


def test_wrong_dtype(digits_path, samples):
    sess = arenac.InferenceSession(digits_path)
    with pytest.raises(arenac.InvalidInput) as e:
        sess.run(None, {"pixels": samples.astype(np.float64)})
    msg = one_line(e)
    assert "pixels" in msg and "f64" in msg and "float32" in msg


def test_missing_and_unknown_names(digits_path, samples):
    sess = arenac.InferenceSession(digits_path)
    with pytest.raises(ValueError) as e:
        sess.run(None, {})
    assert isinstance(e.value, arenac.InvalidInput)
    assert "missing input 'pixels'" in one_line(e)
    with pytest.raises(arenac.InvalidInput) as e:
        sess.run(None, {"pixels": samples, "extra": samples})
    assert "unknown input 'extra'" in one_line(e)
    with pytest.raises(arenac.InvalidInput) as e:
        sess.run(["nope"], {"pixels": samples})
    assert "unknown output 'nope'" in one_line(e)


def test_memory_limit(digits_path):
    with pytest.raises(arenac.MemoryLimitExceeded) as e:
        arenac.InferenceSession(digits_path, shapes={"N": 1000}, memory_limit="16KiB")
    assert "16KiB" in one_line(e)
    with pytest.raises(arenac.InvalidArgument) as e:
        arenac.InferenceSession(digits_path, memory_limit="lots")
    assert isinstance(e.value, ValueError)
    one_line(e)


def test_session_usable_after_errors(digits_path, samples):
    sess = arenac.InferenceSession(digits_path, shapes={"N": 3})
    for bad in ({"pixels": samples[:2]}, {"pixels": samples[:3].astype(np.int64)}, {}):
        with pytest.raises(arenac.InvalidInput):
            sess.run(None, bad)
    assert sess.run(None, {"pixels": samples[:3]})[0].shape == (3, 10)
