"""``arenac.InferenceSession``: ONNX Runtime's interface over an arenac-compiled model."""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

import numpy as np

from . import _native
from ._errors import InvalidArgument, InvalidInput

PathLike = Union[str, "os.PathLike[str]"]
MemoryLimit = Union[int, str, None]
Shapes = Optional[Mapping[str, Union[int, Sequence[int]]]]


class NodeArg:
    """A graph input or output as ONNX Runtime describes it: ``name``, ``type``
    (``"tensor(float)"``...) and ``shape`` (an int per fixed dim, the symbol's name for a
    symbolic dim, ``None`` for an anonymous one, ``[]`` when the file declares no shape)."""

    __slots__ = ("name", "type", "shape")

    def __init__(self, name: str, type: str, shape: List[Union[int, str, None]]):
        self.name = name
        self.type = type
        self.shape = shape

    def __repr__(self) -> str:
        return f"NodeArg(name={self.name!r}, type={self.type!r}, shape={self.shape!r})"


class SessionOptions:
    """The subset of ONNX Runtime's ``SessionOptions`` arenac reads: ``intra_op_num_threads``
    (0 = arenac's default). Other attributes are accepted and ignored, so scripts written for
    ONNX Runtime run unchanged."""

    def __init__(self) -> None:
        self.intra_op_num_threads = 0
        self.inter_op_num_threads = 0
        self.graph_optimization_level = 99
        self.log_severity_level = 2


def get_available_providers() -> List[str]:
    """ONNX Runtime's provider list: arenac runs on the CPU."""
    return ["CPUExecutionProvider"]


def _memory_limit_text(memory_limit: MemoryLimit) -> Optional[str]:
    if memory_limit is None:
        return None
    if isinstance(memory_limit, bool) or not isinstance(memory_limit, (int, str)):
        raise InvalidArgument(
            f"memory_limit must be bytes (int) or a text like '10%' or '64MiB', not {memory_limit!r}"
        )
    return str(memory_limit)


def _default_threads(threads: Optional[int], sess_options: Any) -> Optional[int]:
    if threads is not None:
        return int(threads)
    n = getattr(sess_options, "intra_op_num_threads", 0) if sess_options is not None else 0
    if n:
        return int(n)
    # Ray (and other launchers) set OMP_NUM_THREADS to the CPUs a worker was given.
    env = os.environ.get("OMP_NUM_THREADS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    return None


def _shape_list(shapes: Shapes) -> Optional[List[tuple]]:
    if shapes is None:
        return None
    out = []
    for name, dims in shapes.items():
        if isinstance(dims, (int, np.integer)):
            out.append((str(name), [int(dims)]))
        else:
            out.append((str(name), [int(d) for d in dims]))
    return out


def _feed_array(name: str, value: Any) -> np.ndarray:
    """The array a feed is read from: the caller's own when it is C-contiguous in native byte
    order (no copy), else one contiguous copy."""
    a = np.asarray(value)
    if not a.dtype.isnative:
        a = a.astype(a.dtype.newbyteorder("="))
    if not a.flags.c_contiguous:
        a = np.ascontiguousarray(a)
    if a.dtype.hasobject or a.dtype.kind in "USVcMm":
        raise InvalidInput(f"input '{name}': numpy dtype {a.dtype} is not a tensor type arenac reads")
    return a


class InferenceSession:
    """Compiles an ONNX model with arenac and runs it, with ONNX Runtime's interface.

    ``path_or_bytes``: the ``.onnx`` file (external data beside it) or its bytes.
    ``sess_options`` / ``providers`` / ``provider_options``: accepted for ONNX Runtime
    compatibility; ``sess_options.intra_op_num_threads`` is read.
    ``shapes``: ``{input name: dims}`` or ``{symbol: n}`` bindings. Without them, symbolic dims
    are bound from the first feed's shapes; each new set of feed shapes compiles the model
    once more and is cached (the 8 most recently used).
    ``memory_limit``: bytes, or a text as the CLI takes (``"64MiB"``, ``"10%"`` of RAM); the
    plan (arena + weights) must fit, else :class:`MemoryLimitExceeded`.
    ``threads``: threads a run uses (default: ``OMP_NUM_THREADS`` when set, else every CPU
    this process may use).
    ``max_sessions``: how many runs may go at once from several Python threads, each in its
    own arena (default: as many arenas as fit the memory limit beside the weights, at most
    one per CPU; 1 makes runs take turns).
    ``weights``: the type the weights of Conv, Gemm and MatMul are stored in: ``"f32"``
    (default), ``"f16"``, ``"bf16"`` or ``"int8"`` (symmetric per output channel), widened to
    f32 inside the kernels; ``plan()["weights_storage"]`` shows the bytes saved and the nodes
    kept in f32.
    ``activations``: the type intermediates are stored in, in the arena: ``"f32"`` (default),
    ``"f16"`` or ``"bf16"``; each node computes in f32 and rounds once on store, graph inputs
    and outputs keep their types; ``plan()["activations_storage"]`` shows the arena against
    the f32 plan and the nodes kept in f32.

    Compiling and running release the GIL.
    """

    def __init__(
        self,
        path_or_bytes: Union[PathLike, bytes],
        sess_options: Any = None,
        providers: Any = None,
        provider_options: Any = None,
        *,
        shapes: Shapes = None,
        memory_limit: MemoryLimit = None,
        threads: Optional[int] = None,
        max_sessions: Optional[int] = None,
        weights: Optional[str] = None,
        activations: Optional[str] = None,
        **kwargs: Any,
    ) -> None:
        self._tmp = None
        if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
            self._tmp = tempfile.NamedTemporaryFile(suffix=".onnx")
            self._tmp.write(bytes(path_or_bytes))
            self._tmp.flush()
            path = self._tmp.name
        elif isinstance(path_or_bytes, (str, os.PathLike)):
            path = os.fspath(path_or_bytes)
        else:
            raise TypeError(f"Unable to load from type '{type(path_or_bytes)}'")
        self._model_path = path
        self._s = _native.Session(
            path,
            _shape_list(shapes),
            _memory_limit_text(memory_limit),
            _default_threads(threads, sess_options),
            max_sessions,
            weights,
            activations,
        )

    def run(
        self,
        output_names: Optional[Sequence[str]],
        input_feed: Mapping[str, Any],
        run_options: Any = None,
    ) -> List[np.ndarray]:
        """Runs the model on ``input_feed`` (``{input name: array}``; each of the input's
        exact dtype, never cast) and returns the outputs named in ``output_names`` (all when
        ``None`` or empty) as new numpy arrays, copied out of the arena."""
        feeds = []
        for name, value in input_feed.items():
            a = _feed_array(name, value)
            feeds.append((str(name), a, a.dtype.name))
        wanted = list(output_names) if output_names else None
        outs = self._s.run(feeds, wanted)
        return [raw.view(np.dtype(dtype)).reshape(shape) for _, dtype, shape, raw in outs]

    def get_inputs(self) -> List[NodeArg]:
        """The model's inputs (bound shapes when compiled for fixed shapes, else as declared)."""
        return [NodeArg(n, t, s) for n, t, s in self._s.inputs()]

    def get_outputs(self) -> List[NodeArg]:
        """The model's outputs (compiled shapes when compiled for fixed shapes, else as
        declared)."""
        return [NodeArg(n, t, s) for n, t, s in self._s.outputs()]

    def get_providers(self) -> List[str]:
        return ["CPUExecutionProvider"]

    def get_provider_options(self) -> Dict[str, Dict[str, str]]:
        return {"CPUExecutionProvider": {}}

    def plan(self) -> Dict[str, Any]:
        """The arena plan of the most recently run (or the only) compiled shapes, as
        ``arenac plan --json`` prints it."""
        return json.loads(self._s.plan_json())

    def run_batches(
        self,
        inputs: Mapping[str, Union[np.ndarray, PathLike]],
        batch: Union[str, int] = "auto",
        memory_limit: MemoryLimit = None,
        output_dir: Optional[PathLike] = None,
    ) -> List[np.ndarray]:
        """Runs every row (first dim) of ``inputs`` through the model in batches and returns
        each output with all its rows, in graph-output order.

        ``inputs``: ``{input name: array}`` or ``{input name: path to a .npy file}`` (all of one
        kind; every input with the same row count). ``.npy`` files are memory-mapped and
        streamed by arenac's batch runner (``arenac run --batch``): the pages already read are
        released, and outputs are written batch by batch to ``output_dir`` (a temporary
        folder when ``None``); the arrays returned are then memory-mapped from those files.
        Arrays are cut into batches here and each batch is run like :meth:`run`.
        ``batch``: rows per batch, or ``"auto"``: the largest whose arena + weights + staging
        fit ``memory_limit`` (else the session's, else the physical RAM). The last batch is
        padded with zero rows whose outputs are dropped; a model with a fixed first dim runs
        at that batch.
        """
        if not inputs:
            raise InvalidArgument("run_batches needs at least one input")
        if batch == "auto":
            rows_per_batch: Optional[int] = None
        elif isinstance(batch, (int, np.integer)) and not isinstance(batch, bool) and batch >= 1:
            rows_per_batch = int(batch)
        else:
            raise InvalidArgument(f"batch must be 'auto' or a positive int, not {batch!r}")
        limit = _memory_limit_text(memory_limit)
        is_path = [isinstance(v, (str, os.PathLike)) for v in inputs.values()]
        if all(is_path):
            return self._run_files(inputs, rows_per_batch, limit, output_dir)
        if any(is_path):
            raise InvalidArgument("run_batches: give every input as an array or every one as a .npy path, not a mix")
        return self._run_arrays(inputs, rows_per_batch, limit, output_dir)

    def _run_files(self, inputs, rows_per_batch, limit, output_dir) -> List[np.ndarray]:
        files = [(str(n), os.fspath(p)) for n, p in inputs.items()]
        if output_dir is None:
            tmp = tempfile.TemporaryDirectory(prefix="arenac-batches-")
            out_dir = tmp.name
        else:
            tmp = None
            out_dir = os.fspath(output_dir)
        _, _, _, written = _native.run_files(self._s, files, out_dir, rows_per_batch, limit)
        if tmp is None:
            return [np.load(p, mmap_mode="r") for _, p in written]
        # The files go with the temporary folder: load them into memory first.
        with tmp:
            return [np.load(p) for _, p in written]

    def _run_arrays(self, inputs, rows_per_batch, limit, output_dir) -> List[np.ndarray]:
        arrays = {str(n): _feed_array(str(n), v) for n, v in inputs.items()}
        for n, a in arrays.items():
            if a.ndim == 0:
                raise InvalidInput(f"input '{n}': a scalar has no rows to batch")
        counts = {n: a.shape[0] for n, a in arrays.items()}
        rows = next(iter(counts.values()))
        if any(c != rows for c in counts.values()):
            raise InvalidInput(f"inputs have different row counts (first dims): {counts}")
        fixed = None
        first = self._s.inputs()
        if first and first[0][2] and isinstance(first[0][2][0], int):
            fixed = first[0][2][0]
        if fixed is not None:
            b = fixed
        elif rows_per_batch is not None:
            b = rows_per_batch
        else:
            row_bytes = sum(a.nbytes // max(rows, 1) for a in arrays.values())
            b = _native.auto_batch(self._s, row_bytes, max(rows, 1), limit)
        outs: Optional[List[np.ndarray]] = None
        for start in range(0, rows, b):
            n = min(b, rows - start)
            feed = {}
            for name, a in arrays.items():
                part = a[start : start + n]
                if n < b:
                    padded = np.zeros((b,) + a.shape[1:], dtype=a.dtype)
                    padded[:n] = part
                    part = padded
                feed[name] = part
            res = self.run(None, feed)
            if outs is None:
                outs = [np.empty((rows,) + r.shape[1:], dtype=r.dtype) for r in res]
            for o, r in zip(outs, res):
                o[start : start + n] = r[:n]
        if outs is None:
            outs = []
        if output_dir is not None:
            os.makedirs(os.fspath(output_dir), exist_ok=True)
            for i, o in enumerate(outs):
                np.save(os.path.join(os.fspath(output_dir), f"output_{i}.npy"), o)
        return outs

    @property
    def arena_bytes(self) -> int:
        """Bytes of one arena (one per concurrent run) of the most recently used shapes."""
        return self._s.arena_bytes()

    @property
    def weights_bytes(self) -> int:
        """Bytes of the weights (constants), held once per compiled shapes."""
        return self._s.weights_bytes()

    @property
    def frozen_inputs(self) -> List[str]:
        """Graph inputs compiled in as constants (none unless their values were given)."""
        return self._s.frozen_inputs()

    @property
    def compiled_shapes(self) -> List[List[List[int]]]:
        """The input shapes of each compiled model kept, least recently used first."""
        return self._s.compiled_shapes()

    @property
    def arenas(self) -> int:
        """Arenas (sessions) created so far for the most recently used shapes."""
        return self._s.arenas()

    @property
    def threads(self) -> int:
        """Threads a run uses."""
        return self._s.threads()

    @property
    def warnings(self) -> List[str]:
        """The compiler's warnings for the most recently used shapes."""
        return self._s.warnings()
