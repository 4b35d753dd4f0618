"""Exports PyTorch models to ONNX for local testing of arenac's importer (never run in CI).

Usage: python scripts/export_torch.py OUTDIR [NAME...]

Needs torch and torchvision (a separate venv; they are not part of .venv). Exports with the
legacy TorchScript exporter (dynamo=False) at opset 17, random weights (weights=None), eval
mode; BatchNorm running statistics are first warmed by a few train-mode random batches so
they are not the trivial 0/1. Models (NAME):

- resnet18, mobilenet_v2, efficientnet_b0, shufflenet_v2_x1_0, squeezenet1_1, resnet50, vgg19:
  torchvision,
  input "input" float[N,3,224,224] with a symbolic batch dim N, output "logits" [N,1000];
- transformer_encoder: nn.TransformerEncoder, 4 layers, d_model 256, nhead 4, batch_first,
  input "x" float[1,128,256]; exported with autograd enabled (not under no_grad) so PyTorch
  does not take its fused fast path (a single custom op) and exports plain ops;
- gpt_decoder: a small GPT-style decoder (token + position embedding, 2 pre-LN blocks of
  causal self-attention and GELU MLP, final LayerNorm, LM head), input "tokens"
  int64[1,64], output "logits" [1,64,1000].

Then check them with: ARENAC_MODEL_DIR=OUTDIR cargo test -p arenac-tests --test models \
    -- --ignored model_dir --nocapture
"""

import math
import os
import sys

import torch
from torch import nn

OPSET = 17


def warm_bn(model: nn.Module, make_input, steps: int = 3) -> None:
    """Runs a few train-mode batches so BatchNorm running stats are non-trivial."""
    model.train()
    with torch.no_grad():
        for _ in range(steps):
            model(make_input())
    model.eval()


def torchvision_model(name: str) -> nn.Module:
    import torchvision

    model = getattr(torchvision.models, name)(weights=None)
    warm_bn(model, lambda: torch.randn(4, 3, 224, 224))
    return model


class CausalSelfAttention(nn.Module):
    def __init__(self, d: int, heads: int, max_len: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.register_buffer("mask", torch.tril(torch.ones(max_len, max_len, dtype=torch.bool)))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        hd = d // self.heads
        q = q.view(b, t, self.heads, hd).transpose(1, 2)
        k = k.view(b, t, self.heads, hd).transpose(1, 2)
        v = v.view(b, t, self.heads, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
        att = att.masked_fill(~self.mask[:t, :t], float("-inf"))
        att = torch.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        return self.proj(y)


class Block(nn.Module):
    def __init__(self, d: int, heads: int, max_len: int):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = CausalSelfAttention(d, heads, max_len)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    def __init__(self, vocab=1000, d=128, heads=4, layers=2, max_len=128):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(max_len, d)
        self.blocks = nn.ModuleList(Block(d, heads, max_len) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, tokens):
        t = tokens.shape[1]
        pos = torch.arange(t, device=tokens.device)
        x = self.tok(tokens) + self.pos(pos)
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x))


def export(model, args, path, input_names, output_names, dynamic_axes=None, no_grad=True):
    kwargs = dict(
        input_names=input_names,
        output_names=output_names,
        opset_version=OPSET,
        dynamo=False,
        do_constant_folding=True,
        dynamic_axes=dynamic_axes,
    )
    if no_grad:
        with torch.no_grad():
            torch.onnx.export(model, args, path, **kwargs)
    else:
        torch.onnx.export(model, args, path, **kwargs)


TORCHVISION = [
    "resnet18",
    "mobilenet_v2",
    "efficientnet_b0",
    "shufflenet_v2_x1_0",
    "squeezenet1_1",
    "resnet50",
    "vgg19",
]
ALL = TORCHVISION + ["transformer_encoder", "gpt_decoder"]


def export_one(name: str, outdir: str) -> None:
    path = os.path.join(outdir, f"{name}.onnx")
    if name in TORCHVISION:
        model = torchvision_model(name)
        export(
            model,
            (torch.randn(1, 3, 224, 224),),
            path,
            ["input"],
            ["logits"],
            dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}},
        )
    elif name == "transformer_encoder":
        layer = nn.TransformerEncoderLayer(d_model=256, nhead=4, batch_first=True)
        model = nn.TransformerEncoder(layer, num_layers=4, enable_nested_tensor=False).eval()
        # Autograd enabled: the fused fast path (_transformer_encoder_layer_fwd) is skipped.
        export(model, (torch.randn(1, 128, 256),), path, ["x"], ["y"], no_grad=False)
    elif name == "gpt_decoder":
        model = TinyGPT().eval()
        export(model, (torch.randint(0, 1000, (1, 64)),), path, ["tokens"], ["logits"])
    else:
        raise SystemExit(f"unknown model {name!r}; known: {', '.join(ALL)}")
    print(f"{name}: wrote {path} ({os.path.getsize(path) / 1e6:.1f} MB)", flush=True)


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    outdir = sys.argv[1]
    names = sys.argv[2:] or ALL
    os.makedirs(outdir, exist_ok=True)
    torch.manual_seed(0)
    failed = []
    for name in names:
        try:
            export_one(name, outdir)
        except Exception as e:  # report and go on with the other models
            print(f"{name}: FAILED: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
