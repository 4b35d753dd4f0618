"""Outputs and metadata equal onnxruntime's: the shipped digits model and the light models."""

import numpy as np
import pytest

import arenac
from conftest import assert_close, ort_session

LIGHT = [
    "bvlc_alexnet",
    "densenet121",
    "inception_v1",
    "inception_v2",
    "resnet50",
    "shufflenet",
    "squeezenet",
    "vgg19",
    "zfnet512",
]


def test_digits_matches_onnxruntime(digits_path, samples):
    ref = ort_session(digits_path)
    sess = arenac.InferenceSession(digits_path)
    for batch in (samples[:1], samples[:7], samples):
        theirs = ref.run(None, {"pixels": batch})
        ours = sess.run(None, {"pixels": batch})
        assert len(ours) == len(theirs)
        for o, t in zip(ours, theirs):
            assert_close(o, t)
    # Each batch size compiled once.
    assert sorted(s[0][0] for s in sess.compiled_shapes) == [1, 7, len(samples)]


@pytest.mark.parametrize("threads,limit", [(2, "10%"), (1, None), (2, 64 << 20)])
def test_digits_threads_and_memory_limit(digits_path, samples, threads, limit):
    ref = ort_session(digits_path)
    sess = arenac.InferenceSession(digits_path, threads=threads, memory_limit=limit)
    assert sess.threads == threads
    (ours,) = sess.run(["probs"], {"pixels": samples})
    (theirs,) = ref.run(["probs"], {"pixels": samples})
    assert_close(ours, theirs)


def test_metadata_spelled_as_onnxruntime(digits_path):
    ref = ort_session(digits_path)
    sess = arenac.InferenceSession(digits_path)
    for ours, theirs in ((sess.get_inputs(), ref.get_inputs()), (sess.get_outputs(), ref.get_outputs())):
        assert [(a.name, a.type, a.shape) for a in ours] == [(a.name, a.type, a.shape) for a in theirs]
    bound = arenac.InferenceSession(digits_path, shapes={"N": 4})
    assert bound.get_inputs()[0].shape == [4, 64]
    assert bound.get_outputs()[0].type == "tensor(float)"


def test_input_layouts(digits_path, samples):
    """A Fortran-ordered or strided input gives the same answer as a C-ordered one."""
    sess = arenac.InferenceSession(digits_path)
    (expected,) = sess.run(None, {"pixels": samples[:8]})
    fortran = np.asfortranarray(samples[:8])
    strided = np.repeat(samples[:8], 2, axis=0)[::2]
    assert not fortran.flags.c_contiguous and not strided.flags.c_contiguous
    for x in (fortran, strided, np.array(samples[:8].tolist(), np.float32)):
        (out,) = sess.run(None, {"pixels": x})
        np.testing.assert_array_equal(out, expected)


def test_outputs_are_fresh_arrays(digits_path, samples):
    """Outputs are copies out of the arena: a later run does not change them."""
    sess = arenac.InferenceSession(digits_path, shapes={"N": 1})
    (a,) = sess.run(None, {"pixels": samples[:1]})
    kept = a.copy()
    sess.run(None, {"pixels": samples[1:2]})
    np.testing.assert_array_equal(a, kept)
    assert a.flags.writeable


def test_model_bytes(digits_path, samples):
    with open(digits_path, "rb") as f:
        sess = arenac.InferenceSession(f.read())
    ref = ort_session(digits_path)
    assert_close(sess.run(None, {"pixels": samples})[0], ref.run(None, {"pixels": samples})[0])


@pytest.mark.parametrize("name", LIGHT)
def test_light_model_matches_onnxruntime(light_dir, name):
    """ONNX's light models with random weights against onnxruntime's outputs (written by
    scripts/randomize_light.py with onnxruntime, one thread)."""
    x = np.load(light_dir / f"{name}_input_0.npy")
    sess = arenac.InferenceSession(str(light_dir / f"{name}.onnx"), memory_limit="10%")
    inp = sess.get_inputs()[0]
    outs = sess.run(None, {inp.name: x})
    for k, ours in enumerate(outs):
        theirs = np.load(light_dir / f"{name}_output_{k}.npy")
        assert_close(ours, theirs)


@pytest.mark.parametrize("weights,tol", [("f16", 1e-2), ("bf16", 6e-2), ("int8", 6e-2)])
def test_digits_reduced_weights(digits_path, samples, weights, tol):
    """Weights stored in 16 or 8 bits: outputs near the f32 run's, the same top-1 on at least
    97 of 100 samples, and the plan reports the storage and its saving."""
    (full,) = arenac.InferenceSession(digits_path).run(None, {"pixels": samples})
    sess = arenac.InferenceSession(digits_path, weights=weights)
    (ours,) = sess.run(None, {"pixels": samples})
    assert np.max(np.abs(ours - full)) <= tol * np.max(np.abs(full))
    agree = np.mean(np.argmax(ours, axis=1) == np.argmax(full, axis=1))
    assert agree >= 0.97
    storage = sess.plan()["weights_storage"]
    assert storage["storage"] == weights
    assert storage["saving_bytes"] > 0


@pytest.mark.parametrize("activations,tol", [("f16", 1e-2), ("bf16", 6e-2)])
def test_digits_16_bit_activations(digits_path, samples, activations, tol):
    """Intermediates stored in 16 bits: outputs near the f32 run's (relative to its largest;
    bf16 keeps 8 bits of mantissa, f16 11), the same top-1 on at least 97 of 100 samples, a
    smaller arena in the plan."""
    full_sess = arenac.InferenceSession(digits_path)
    (full,) = full_sess.run(None, {"pixels": samples})
    sess = arenac.InferenceSession(digits_path, activations=activations)
    (ours,) = sess.run(None, {"pixels": samples})
    assert ours.dtype == np.float32
    assert np.max(np.abs(ours - full)) <= tol * np.max(np.abs(full))
    assert np.mean(np.argmax(ours, axis=1) == np.argmax(full, axis=1)) >= 0.97
    storage = sess.plan()["activations_storage"]
    assert storage["activations"] == activations
    assert storage["arena_bytes"] < storage["arena_f32_bytes"]
    assert sess.arena_bytes == storage["arena_bytes"] < full_sess.arena_bytes
    # The f32 input is stored in 16 bits, rounded on copy-in: still declared and fed as f32,
    # the same outputs from a non-contiguous or unaligned array.
    assert storage["narrowed_inputs"] == ["pixels"]
    assert sess.get_inputs()[0].type == "tensor(float)"
    raw = np.zeros(samples.nbytes + 1, dtype=np.uint8)
    shifted = raw[1:].view(np.float32).reshape(samples.shape)
    shifted[...] = samples
    (again,) = sess.run(None, {"pixels": shifted})
    assert np.array_equal(again, ours)
    with pytest.raises(arenac.InvalidArgument, match="activations: unknown type 'f8'"):
        arenac.InferenceSession(digits_path, activations="f8")


def test_unknown_weights_type_is_a_value_error(digits_path):
    with pytest.raises(arenac.InvalidArgument, match="weights: unknown type 'f8'") as e:
        arenac.InferenceSession(digits_path, weights="f8")
    assert isinstance(e.value, ValueError)
