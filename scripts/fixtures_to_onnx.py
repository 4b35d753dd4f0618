#!/usr/bin/env python3
"""Converts the text fixtures (tests/fixtures/<family>/<name>.onnxtxt) to .onnx files with
ONNX's own parser, for the cross-check test `onnx_reference_parser_agrees` in tests/fixtures.rs.

    python scripts/fixtures_to_onnx.py OUTDIR
    ARENAC_FIXTURE_ONNX_DIR=OUTDIR cargo test -p arenac-tests --test fixtures

Every fixture except the syntax-error ones (tests/fixtures/errors/syntax_*) is parsed with
onnx.parser.parse_model and saved as OUTDIR/<family>/<name>.onnx. Fixtures outside errors/
must also pass onnx.checker.check_model; error fixtures (cycles, undefined values...) are
allowed to fail the checker, since that is the point of them. Exit status 1 on any failure.
"""

import sys
from pathlib import Path

import onnx
import onnx.checker
import onnx.parser

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures"


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(sys.argv[1])
    failures = []
    written = 0
    for path in sorted(FIXTURES.glob("*/*.onnxtxt")):
        family, name = path.parent.name, path.stem
        if family == "errors" and name.startswith("syntax_"):
            continue
        try:
            model = onnx.parser.parse_model(path.read_text())
        except Exception as e:  # noqa: BLE001 - report every fixture, then fail
            failures.append(f"{family}/{name}: onnx.parser: {e}")
            continue
        try:
            onnx.checker.check_model(model)
        except Exception as e:  # noqa: BLE001
            if family != "errors":
                failures.append(f"{family}/{name}: onnx.checker: {e}")
                continue
        dest = out / family / f"{name}.onnx"
        dest.parent.mkdir(parents=True, exist_ok=True)
        onnx.save(model, str(dest))
        written += 1
    print(f"wrote {written} models to {out} (onnx {onnx.__version__})")
    for f in failures:
        print(f"FAIL {f}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
