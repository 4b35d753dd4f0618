"""Type stubs of arenac's native module (the Rust extension behind ``arenac``)."""

from os import PathLike
from typing import List, Optional, Sequence, Tuple, Union

import numpy as np

__version__: str

_Dim = Union[int, str, None]
_Arg = Tuple[str, str, List[_Dim]]

class Session:
    """The compiled model(s) of one model file; see ``arenac.InferenceSession``."""

    def __init__(
        self,
        path: Union[str, PathLike[str]],
        shapes: Optional[Sequence[Tuple[str, Sequence[int]]]] = None,
        memory_limit: Optional[str] = None,
        threads: Optional[int] = None,
        max_sessions: Optional[int] = None,
        weights: Optional[str] = None,
        activations: Optional[str] = None,
    ) -> None: ...
    def run(
        self,
        feeds: Sequence[Tuple[str, np.ndarray, str]],
        output_names: Optional[Sequence[str]] = None,
    ) -> List[Tuple[str, str, List[int], np.ndarray]]: ...
    def inputs(self) -> List[_Arg]: ...
    def outputs(self) -> List[_Arg]: ...
    def plan_json(self) -> str: ...
    def arena_bytes(self) -> int: ...
    def weights_bytes(self) -> int: ...
    def frozen_inputs(self) -> List[str]: ...
    def compiled_shapes(self) -> List[List[List[int]]]: ...
    def arenas(self) -> int: ...
    def threads(self) -> int: ...
    def warnings(self) -> List[str]: ...

def default_threads() -> int: ...
def auto_batch(
    session: Session, input_row_bytes: int, rows: int, memory_limit: Optional[str] = None
) -> int: ...
def run_files(
    session: Session,
    inputs: Sequence[Tuple[str, Union[str, PathLike[str]]]],
    output_dir: Union[str, PathLike[str]],
    batch: Optional[int] = None,
    memory_limit: Optional[str] = None,
) -> Tuple[int, int, int, List[Tuple[str, str]]]: ...
