"""Export randomly initialized ultralytics detectors to ONNX (no weights downloaded), for the
patch and ONNX Runtime comparisons on real detector graphs (issue 16).

Needs a venv with torch and ultralytics (not the repo's CI venv), e.g.:
  /work/torchvenv/bin/pip install ultralytics onnxslim
  /work/torchvenv/bin/python scripts/export_yolo.py [--out /work/exports] [--models yolov8n,yolov8s,yolo11n] [--sizes 640,320]

Writes OUT/<model>_<size>.onnx (opset 17, batch 1, static shapes, simplified by onnxslim when
installed). Random init: the graph and shapes are the trained model's, the values are not.
"""

import argparse
import os
import shutil
import tempfile


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="/work/exports")
    ap.add_argument("--models", default="yolov8n,yolov8s,yolo11n")
    ap.add_argument("--sizes", default="640,320")
    ap.add_argument("--no-simplify", action="store_true")
    args = ap.parse_args()

    import torch
    from ultralytics import YOLO

    torch.manual_seed(0)
    os.makedirs(args.out, exist_ok=True)
    for name in args.models.split(","):
        for size in [int(s) for s in args.sizes.split(",")]:
            with tempfile.TemporaryDirectory() as tmp:
                cwd = os.getcwd()
                os.chdir(tmp)
                try:
                    m = YOLO(f"{name}.yaml")
                    path = m.export(
                        format="onnx",
                        imgsz=size,
                        opset=17,
                        simplify=not args.no_simplify,
                        dynamic=False,
                        batch=1,
                    )
                    path = os.path.join(tmp, path)
                finally:
                    os.chdir(cwd)
                dst = os.path.join(args.out, f"{name}_{size}.onnx")
                shutil.copy(path, dst)
                print(dst)


if __name__ == "__main__":
    main()
