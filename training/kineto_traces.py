#!/usr/bin/env python3
"""PyTorch-profiler (Kineto) traces of a Llama-shaped model for `exitsim calibrate --kineto`.

Runs prefill and batched decode steps of a model written the way Hugging Face writes Llama
(nn.Linear projections, RMSNorm and rotary as elementwise ops, a K/V cache grown by torch.cat,
attention by scaled_dot_product_attention where this PyTorch has it, else matmul/softmax/matmul)
under torch.profiler with record_shapes=True, one profiler step (prof.step()) per model step, and
writes:

  <out>/<name>.kineto.json.gz  the calibration steps' trace, as torch.profiler exports it (gzipped)
  <out>/<name>.steps.json      every step's shape and PyTorch's own wall time: the calibration
                               steps, and held-out steps of other shapes that the trace does not
                               contain (timed under the profiler, as the calibration steps were,
                               and again without it)

Models: `tiny` loads the shipped models/tiny-recursive weights and marks each recursion of its
shared block with record_function("exitsim.recursion.<r>") (the convention docs/calibration.md
describes); `random` is a larger plain Llama-shaped model with random weights.

Usage: /usr/bin/python3 training/kineto_traces.py --model tiny|random --out DIR [--threads 1]
Needs Debian's python3-torch (apt-get install python3-torch); nothing else.
"""

import argparse
import gzip
import json
import math
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

from train_tiny import read_safetensors  # the shipped weights' reader (this folder)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SHAPES = {
    # name: d_model, heads, kv heads, head dim, ffn, vocab, (prelude, block, recursions, coda)
    "tiny": (192, 6, 2, 32, 512, 256, (1, 1, 4, 1)),
    "random": (768, 12, 4, 64, 2048, 4096, (4, 0, 0, 0)),
}
EPS, THETA = 1e-5, 10000.0

# Calibration steps: prefill (batch, prompt tokens) and decode (batch, context) shapes; held-out
# steps use other shapes inside the same ranges.
CALIBRATION = ([("prefill", b, t) for b, t in [(1, 32), (1, 128), (2, 64), (4, 32), (1, 256),
                                                (2, 128), (4, 96), (8, 16)]] +
               [("decode", b, c) for b, c in [(1, 32), (2, 256), (4, 64), (8, 512), (16, 128),
                                               (32, 32), (3, 400), (12, 300), (24, 200),
                                               (6, 96), (32, 256), (1, 500), (20, 48),
                                               (10, 160), (28, 400), (5, 20)]])
HELD_OUT = ([("prefill", b, t) for b, t in [(1, 64), (2, 96), (3, 48), (1, 192), (6, 40)]] +
            [("decode", b, c) for b, c in [(2, 100), (5, 300), (7, 50), (9, 450), (14, 220),
                                            (18, 90), (22, 350), (26, 140), (30, 480), (11, 30),
                                            (16, 400), (4, 180)]])

QUICK = [("prefill", 1, 16), ("prefill", 2, 8), ("decode", 1, 16), ("decode", 4, 24),
         ("decode", 8, 8), ("decode", 2, 40)]


class Config:
    def __init__(self, name):
        (self.d, self.heads, self.kv_heads, self.head_dim, self.ffn, self.vocab,
         (self.prelude, self.block, self.recursions, self.coda)) = SHAPES[name]
        self.name = name

    def layers(self):
        return self.prelude + self.block + self.coda


class RMSNorm(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(d))

    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + EPS))


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Layer(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.input_layernorm = RMSNorm(c.d)
        self.post_attention_layernorm = RMSNorm(c.d)
        self.q_proj = torch.nn.Linear(c.d, c.heads * c.head_dim, bias=False)
        self.k_proj = torch.nn.Linear(c.d, c.kv_heads * c.head_dim, bias=False)
        self.v_proj = torch.nn.Linear(c.d, c.kv_heads * c.head_dim, bias=False)
        self.o_proj = torch.nn.Linear(c.heads * c.head_dim, c.d, bias=False)
        self.gate_proj = torch.nn.Linear(c.d, c.ffn, bias=False)
        self.up_proj = torch.nn.Linear(c.d, c.ffn, bias=False)
        self.down_proj = torch.nn.Linear(c.ffn, c.d, bias=False)

    def forward(self, x, cos, sin, cache, causal):
        c = self.c
        b, t, _ = x.shape
        h = self.input_layernorm(x)
        q = self.q_proj(h).view(b, t, c.heads, c.head_dim).transpose(1, 2)
        k = self.k_proj(h).view(b, t, c.kv_heads, c.head_dim).transpose(1, 2)
        v = self.v_proj(h).view(b, t, c.kv_heads, c.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if cache is not None:  # the K/V written so far (HF's DynamicCache grows it by cat)
            k = torch.cat([cache[0], k], dim=2)
            v = torch.cat([cache[1], v], dim=2)
        groups = c.heads // c.kv_heads
        k = k[:, :, None].expand(b, c.kv_heads, groups, k.shape[2], c.head_dim).reshape(
            b, c.heads, k.shape[2], c.head_dim)
        v = v[:, :, None].expand(b, c.kv_heads, groups, v.shape[2], c.head_dim).reshape(
            b, c.heads, v.shape[2], c.head_dim)
        if hasattr(F, "scaled_dot_product_attention"):
            attn = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        else:
            scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(c.head_dim)
            if causal:
                scores = scores + causal_mask(t, k.shape[2])
            attn = torch.matmul(torch.softmax(scores, dim=-1), v)
        x = x + self.o_proj(attn.transpose(1, 2).reshape(b, t, -1))
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


def causal_mask(t, total):
    """Queries at positions total-t..total-1 see keys up to their own position."""
    mask = torch.full((t, total), float("-inf")).triu(total - t + 1)
    return mask[None, None]


class Model(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.embed_tokens = torch.nn.Embedding(c.vocab, c.d)
        self.layers = torch.nn.ModuleList([Layer(c) for _ in range(c.layers())])
        self.norm = RMSNorm(c.d)
        self.lm_head = torch.nn.Linear(c.d, c.vocab, bias=False)

    def schedule(self):
        """(layer index, recursion or 0) in execution order: prelude, the block per recursion,
        coda."""
        c = self.c
        out = [(i, 0) for i in range(c.prelude)]
        for r in range(1, c.recursions + 1):
            out += [(c.prelude + j, r) for j in range(c.block)]
        out += [(c.prelude + c.block + j, 0) for j in range(c.coda)]
        return out

    def step(self, ids, positions, caches):
        """One step: embed, every layer, the final norm and LM head on each sequence's last
        token, greedy sampling."""
        c = self.c
        x = self.embed_tokens(ids)
        angle = positions[:, None].float() * (
            THETA ** (-torch.arange(0, c.head_dim, 2).float() / c.head_dim))[None, :]
        emb = torch.cat((angle, angle), dim=-1)
        cos, sin = emb.cos()[None, None], emb.sin()[None, None]
        causal = ids.shape[1] > 1
        recursion_range = None
        for n, (layer, recursion) in enumerate(self.schedule()):
            if recursion and (recursion_range is None or recursion_range[0] != recursion):
                if recursion_range is not None:
                    recursion_range[1].__exit__(None, None, None)
                recursion_range = (recursion,
                                   torch.autograd.profiler.record_function(
                                       f"exitsim.recursion.{recursion}"))
                recursion_range[1].__enter__()
            elif not recursion and recursion_range is not None:
                recursion_range[1].__exit__(None, None, None)
                recursion_range = None
            x = self.layers[layer](x, cos, sin, caches[n] if caches else None, causal)
        if recursion_range is not None:
            recursion_range[1].__exit__(None, None, None)
        logits = self.lm_head(self.norm(x[:, -1:, :]))
        return torch.argmax(logits, dim=-1)


def load_tiny(model):
    """The shipped tiny model's weights (engine tensor names, tied embeddings)."""
    t = read_safetensors(os.path.join(REPO, "models", "tiny-recursive", "model.safetensors"))
    with torch.no_grad():
        model.embed_tokens.weight.copy_(t["model.embed_tokens.weight"])
        model.lm_head.weight.copy_(t["model.embed_tokens.weight"])
        model.norm.weight.copy_(t["model.norm.weight"])
        for i, layer in enumerate(model.layers):
            for name in ["input_layernorm", "post_attention_layernorm"]:
                getattr(layer, name).weight.copy_(t[f"model.layers.{i}.{name}.weight"])
            for name in ["q_proj", "k_proj", "v_proj", "o_proj"]:
                getattr(layer, name).weight.copy_(t[f"model.layers.{i}.self_attn.{name}.weight"])
            for name in ["gate_proj", "up_proj", "down_proj"]:
                getattr(layer, name).weight.copy_(t[f"model.layers.{i}.mlp.{name}.weight"])


def inputs(c, model, kind, batch, n, generator):
    """(ids, positions, caches) of one step: a prefill of `n` prompt tokens per sequence, or a
    decode token per sequence over `n` cached tokens (random K/V: timing only)."""
    if kind == "prefill":
        ids = torch.randint(0, c.vocab, (batch, n), generator=generator)
        return ids, torch.arange(n), None
    ids = torch.randint(0, c.vocab, (batch, 1), generator=generator)
    caches = [(torch.randn(batch, c.kv_heads, n, c.head_dim, generator=generator),
               torch.randn(batch, c.kv_heads, n, c.head_dim, generator=generator))
              for _ in model.schedule()]
    return ids, torch.tensor([n]), caches


def timed_steps(model, prepared, profiler=None, kineto=True):
    """Wall time of each step in ms (one profiler step each when profiled)."""
    times = []
    with torch.no_grad():
        for n, (ids, positions, caches) in enumerate(prepared):
            start = time.perf_counter()
            if profiler is not None and not kineto:
                # What prof.step() records under Kineto: one range per step.
                with torch.autograd.profiler.record_function(f"ProfilerStep#{n}"):
                    model.step(ids, positions, caches)
            else:
                model.step(ids, positions, caches)
            times.append((time.perf_counter() - start) * 1e3)
            if profiler is not None:
                profiler.step()
    return times


def kineto_available():
    return hasattr(torch.autograd, "kineto_available") and torch.autograd.kineto_available()


def profiled(model, prepared, trace_path=None):
    """Profiled steps' wall times; writes their trace to `trace_path` when given."""
    kineto = kineto_available()
    activities = [torch.profiler.ProfilerActivity.CPU]
    with torch.profiler.profile(activities=activities, record_shapes=True) as prof:
        times = timed_steps(model, prepared, prof, kineto)
    if trace_path:
        metadata = {"exitsim_framework": f"pytorch {torch.__version__}",
                    "exitsim_hardware": hardware(torch.get_num_threads())}
        if kineto:
            for key, value in metadata.items():
                prof.add_metadata(key, value)
            prof.export_chrome_trace(trace_path)
        else:
            write_kineto_schema(prof.events(), metadata, trace_path)
    return times


def write_kineto_schema(events, metadata, path):
    """A PyTorch built without Kineto (Debian's python3-torch 1.13: USE_KINETO=0) exports the
    legacy autograd profiler's trace, which has no input shapes. Its events hold them, so they
    are written here in the schema torch.profiler's Kineto export uses ("traceEvents"; operators
    as "cpu_op" with "Input Dims", record_function ranges as "user_annotation"). Operators are
    kept to the top level and their direct children (deeper ones, such as the per-matrix
    `select` calls inside a CPU bmm, only make the file larger; the importer reads top-level
    operators)."""
    user_scope = 7  # at::RecordScope::USER_SCOPE: record_function ranges
    trace = []
    for e in events:
        depth, parent = 0, e.cpu_parent
        while parent is not None:
            if parent.scope != user_scope:
                depth += 1
            parent = parent.cpu_parent
        user = e.scope == user_scope
        if not user and depth > 1:
            continue
        start, end = e.time_range.start, e.time_range.end
        event = {"ph": "X", "cat": "user_annotation" if user else "cpu_op", "name": e.name,
                 "pid": os.getpid(), "tid": e.thread, "ts": start, "dur": end - start,
                 "args": {"External id": e.id}}
        if user and e.name.startswith("ProfilerStep"):
            event["name"] = e.name  # kept as recorded
        if not user:
            event["args"]["Input Dims"] = [list(shape) for shape in e.input_shapes]
        trace.append(event)
    # Steps as Kineto names them: the n-th step range is "ProfilerStep#n".
    steps = sorted((e for e in trace if e["name"].startswith("ProfilerStep")),
                   key=lambda e: e["ts"])
    for n, e in enumerate(steps):
        e["name"] = f"ProfilerStep#{n}"
    trace.sort(key=lambda e: (e["ts"], -e["dur"]))
    document = {"schemaVersion": 1, "deviceProperties": [], **metadata,
                "traceEvents": trace, "traceName": os.path.basename(path),
                "displayTimeUnit": "ms"}
    with open(path, "w") as f:
        json.dump(document, f, separators=(",", ":"))


def write_gzip(raw_path, target_path):
    """Gzips a trace reproducibly: no timestamp in the header, the highest compression."""
    with open(raw_path, "rb") as src, open(target_path, "wb") as out, gzip.GzipFile(
            fileobj=out, mode="wb", mtime=0, compresslevel=9) as dst:
        shutil.copyfileobj(src, dst)


def hardware(threads):
    model = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{model} x {threads} threads (PyTorch CPU)"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", choices=sorted(SHAPES), required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3,
                        help="unprofiled repetitions per step; their median is kept")
    parser.add_argument("--quick", action="store_true",
                        help="a few small steps only (the test of this script)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    c = Config(args.model)
    model = Model(c).eval()
    if args.model == "tiny":
        load_tiny(model)
    generator = torch.Generator().manual_seed(1)
    shapes, held_shapes = (QUICK, QUICK[:2]) if args.quick else (CALIBRATION, HELD_OUT)
    calibration = [inputs(c, model, *s, generator) for s in shapes]
    held_out = [inputs(c, model, *s, generator) for s in held_shapes]

    timed_steps(model, calibration + held_out)  # warm-up: allocator, thread pool, caches
    os.makedirs(args.out, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        raw = os.path.join(scratch, "trace.json")
        profiled_cal = profiled(model, calibration, raw)
        write_gzip(raw, os.path.join(args.out, f"{args.model}.kineto.json.gz"))
    profiled_held = profiled(model, held_out)
    plain = [timed_steps(model, calibration + held_out) for _ in range(args.repeats)]
    unprofiled = [statistics.median(run[i] for run in plain) for i in range(len(plain[0]))]

    def rows(shapes, profiled_ms, offset):
        return [{"kind": k, "batch": b, ("prompt_tokens" if k == "prefill" else "context"): n,
                 "profiled_ms": round(p, 4), "unprofiled_ms": round(unprofiled[offset + i], 4)}
                for i, ((k, b, n), p) in enumerate(zip(shapes, profiled_ms))]

    steps = {
        "format": "exitsim-kineto-steps v1",
        "model": args.model,
        "shape": {"d_model": c.d, "n_heads": c.heads, "n_kv_heads": c.kv_heads,
                  "head_dim": c.head_dim, "ffn_dim": c.ffn, "vocab": c.vocab,
                  "prelude": c.prelude, "block": c.block, "recursions": c.recursions,
                  "coda": c.coda},
        "framework": f"pytorch {torch.__version__}",
        "threads": torch.get_num_threads(),
        "attention": ("scaled_dot_product_attention"
                      if hasattr(F, "scaled_dot_product_attention") else "matmul_softmax_matmul"),
        "calibration": rows(shapes, profiled_cal, 0),
        "held_out": rows(held_shapes, profiled_held, len(shapes)),
    }
    with open(os.path.join(args.out, f"{args.model}.steps.json"), "w") as f:
        json.dump(steps, f, indent=1)
        f.write("\n")
    print(f"wrote {args.out}/{args.model}.kineto.json.gz and {args.model}.steps.json "
          f"({len(shapes)} calibration steps, {len(held_shapes)} held out)", file=sys.stderr)


if __name__ == "__main__":
    main()
