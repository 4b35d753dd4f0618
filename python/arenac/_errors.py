"""arenac's exceptions. Every one derives from :class:`Error` and carries the one-line
message the ``arenac`` CLI prints after ``error:``; where a built-in fits, it derives from that
too (a wrong input is a ``ValueError``, a missing file a ``FileNotFoundError``)."""


class Error(Exception):
    """Base class of every error arenac raises."""


class NoSuchFile(Error, FileNotFoundError):
    """The model (or a ``.npy`` input) file does not exist."""


class InvalidModel(Error):
    """The file is not a valid ONNX model (not protobuf, a broken graph, bad tensors...)."""


class Unsupported(Error):
    """A valid model using an op, opset or element type arenac does not implement."""


class InvalidArgument(Error, ValueError):
    """A bad option (``memory_limit``, ``shapes``, ``threads``, ``batch``...)."""


class InvalidInput(InvalidArgument):
    """A feed with an unknown name, a missing input, or the wrong dtype or shape
    (ONNX Runtime's ``InvalidArgument``); also a ``ValueError``."""


class MemoryLimitExceeded(Error):
    """The planned arena plus the weights do not fit ``memory_limit``."""


class RunFailed(Error):
    """A run met an invalid value (an index out of range...): its outputs are not valid; the
    session stays usable."""


__all__ = [
    "Error",
    "NoSuchFile",
    "InvalidModel",
    "Unsupported",
    "InvalidArgument",
    "InvalidInput",
    "MemoryLimitExceeded",
    "RunFailed",
]
