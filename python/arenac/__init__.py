"""arenac: ONNX models compiled for the CPU with a statically planned arena, behind ONNX
Runtime's ``InferenceSession`` interface.

    import arenac as ort   # in place of: import onnxruntime as ort
    sess = ort.InferenceSession("model.onnx", memory_limit="10%", threads=2)
    probs = sess.run(None, {"pixels": x})[0]
"""

from ._errors import (
    Error,
    InvalidArgument,
    InvalidInput,
    InvalidModel,
    MemoryLimitExceeded,
    NoSuchFile,
    RunFailed,
    Unsupported,
)
from ._session import InferenceSession, NodeArg, SessionOptions, get_available_providers

__version__ = "0.1.0"

__all__ = [
    "InferenceSession",
    "NodeArg",
    "SessionOptions",
    "get_available_providers",
    "Error",
    "NoSuchFile",
    "InvalidModel",
    "Unsupported",
    "InvalidArgument",
    "InvalidInput",
    "MemoryLimitExceeded",
    "RunFailed",
]
