#!/usr/bin/env python3
"""PyTorch-profiler (Kineto) traces of LitGPT models (Lightning AI's `litgpt`), for
`exitsim calibrate --kineto` and its tests.

A third framework's own model code beside Hugging Face transformers (hf_kineto_traces.py) and
SGLang: litgpt.GPT built from litgpt.Config.from_name(...) (the library's published configs),
random weights (seeded), bfloat16, on the CPU. LitGPT has its own Block/CausalSelfAttention: one
fused QKV linear split three ways, its own RoPE (a cos/sin cache indexed by position), K/V
repeated to the query heads before SDPA, and its own KVCache, preallocated and written with
index_copy_. Each step is what litgpt.generate.base runs: model(idx, input_pos,
input_pos_maxp1=...) over the KV cache set by model.set_kv_cache(batch_size=...), then
litgpt's batched_sample with temperature 0 (greedy, one argmax per sequence). One prof.step()
per model step; one unrecorded warm-up step first. One intra-op thread unless --threads says
otherwise.

Writes, per model: <out>/<model>.{prefill,decode}.kineto.json.gz and .steps.json (every step's
shape, and its wall and CPU times under the profiler and without it).
tests/analysis/data/kineto/litgpt/README.md describes the committed ones.

Usage:
  /work/pyenv/bin/python training/litgpt_kineto_traces.py --out DIR [--models llama3.2,qwen2.5]
  /work/pyenv/bin/python training/hf_kineto_traces.py --describe TRACE [--step N]
No network access and no checkpoint are needed.
"""

import argparse
import collections
import os
import sys
import tempfile
from importlib.metadata import version

import torch
from litgpt import GPT, Config
from litgpt.generate.base import batched_sample

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from hf_kineto_traces import (DECODE, PREFILL, calibration_rows, median_per_step,  # noqa: E402
                               profiled, unprofiled, write_json)
from kineto_traces import hardware, write_gzip  # noqa: E402

# A model: its name in litgpt's config list, and what is cut so that a step runs in well under a
# second on one CPU core and a trace stays under 400 KB (every other value is the published
# config's). Vocabularies are cut to 32000: Llama-3's 128256 and Qwen2.5's 151936 entries would
# dominate a decode step's time.
Model = collections.namedtuple("Model", "source shrunk")
MODELS = {
    "llama3.2": Model("Llama-3.2-1B", {"n_layer": 2, "vocab_size": 32000,
                                        "padded_vocab_size": 32000}),
    "qwen2.5": Model("Qwen2.5-1.5B", {"n_layer": 2, "vocab_size": 32000,
                                      "padded_vocab_size": 32000}),
}
TRACES = {"prefill": PREFILL, "decode": DECODE}
QUICK = {"prefill": [("prefill", 1, 8), ("prefill", 2, 4)],
         "decode": [("decode", 1, 8), ("decode", 2, 16)]}
DTYPE = torch.bfloat16
# The KV cache: as many sequences and positions as the largest step needs.
CACHE_BATCH = 8
CACHE_TOKENS = 520


def build(spec):
    """The model with its KV cache set, every cached K/V random (a decode step over `context`
    tokens reads the first `context` of them: the timing does not depend on their values)."""
    torch.manual_seed(0)
    model = GPT(Config.from_name(spec.source, **spec.shrunk)).to(DTYPE).eval()
    model.max_seq_length = CACHE_TOKENS
    model.set_kv_cache(batch_size=CACHE_BATCH, dtype=DTYPE)
    generator = torch.Generator().manual_seed(1)
    for block in model.transformer.h:
        for buffer in (block.attn.kv_cache.k, block.attn.kv_cache.v):
            buffer.copy_(torch.randn(buffer.shape, generator=generator).to(DTYPE))
    return model


def step_inputs(model, kind, batch, n, seed):
    """model()'s arguments, as litgpt.generate.base.generate_fn passes them: a prefill of `n`
    tokens per prompt at positions 0..n-1, or one token per sequence at position `n` over `n`
    cached ones; input_pos_maxp1 cuts the cache (and the mask) to the positions in use."""
    generator = torch.Generator().manual_seed(seed)
    query = n if kind == "prefill" else 1
    idx = torch.randint(0, model.config.vocab_size, (batch, query), generator=generator)
    if kind == "prefill":
        return idx, torch.arange(0, n, dtype=torch.int64), n
    return idx, torch.tensor([n], dtype=torch.int64), n + 1


def run_step(model, inputs):
    """One model step and greedy sampling of each sequence's next token, as litgpt's
    batched_next_token does it (its logits for every position, one sample per sequence)."""
    idx, input_pos, maxp1 = inputs
    logits = model(idx, input_pos, input_pos_maxp1=maxp1)
    return batched_sample([row.unsqueeze(0) for row in logits.unbind(0)],
                          kwargs=[{"temperature": 0.0}] * idx.size(0))


def framework():
    return f"pytorch {torch.__version__}, litgpt {version('litgpt')}"


def write_traces(name, args):
    spec = MODELS[name]
    model = build(spec)
    config = model.config
    metadata = {"exitsim_framework": framework(),
                "exitsim_hardware": hardware(torch.get_num_threads()),
                "exitsim_model": f"litgpt.GPT of Config.from_name({spec.source!r}) with "
                                 f"{spec.shrunk}, KV cache {CACHE_BATCH} x {CACHE_TOKENS}, "
                                 f"random weights, {str(DTYPE).split('.')[1]}"}
    run = lambda inputs: run_step(model, inputs)  # noqa: E731
    for trace, shapes in TRACES.items():
        shapes = QUICK[trace] if args.quick else shapes
        make_inputs = [lambda s=s, i=i: step_inputs(model, *s, seed=1000 + i)
                       for i, s in enumerate(shapes)]
        stem = os.path.join(args.out, f"{name}.{trace}")
        # Unprofiled runs before and after the profiled one (hf_kineto_traces.py says why).
        with torch.inference_mode(), tempfile.TemporaryDirectory() as scratch:
            unprofiled(run, make_inputs, 1)  # warm-up: allocator, oneDNN
            before = unprofiled(run, make_inputs, args.repeats // 2)
            raw = os.path.join(scratch, "trace.json")
            with_profiler = profiled(run, make_inputs, raw, metadata)
            write_gzip(raw, stem + ".kineto.json.gz")
            after = unprofiled(run, make_inputs, args.repeats - args.repeats // 2)
            without = median_per_step(before + after)
        write_steps(stem + ".steps.json", name, config, shapes, with_profiler, without)
        print(f"wrote {stem}.kineto.json.gz ({os.path.getsize(stem + '.kineto.json.gz')} bytes, "
              f"{len(shapes)} steps; wall {sum(w for w, _ in with_profiler):.0f} ms profiled, "
              f"{sum(w for w, _ in without):.0f} ms not; CPU "
              f"{sum(c for _, c in with_profiler):.0f} and {sum(c for _, c in without):.0f} ms)",
              file=sys.stderr)


def write_steps(path, name, config, shapes, with_profiler, without):
    spec = MODELS[name]
    keys = ["n_layer", "n_embd", "n_head", "n_query_groups", "head_size", "intermediate_size",
            "vocab_size", "padded_vocab_size", "attn_bias", "bias", "mlp_class_name",
            "norm_class_name", "rotary_percentage", "rope_base"]
    steps = {
        "format": "exitsim-kineto-steps v1",
        "model": name,
        "config_source": f"litgpt Config.from_name({spec.source!r})",
        "shrunk": spec.shrunk,
        "lm_head": True,
        "config": {k: getattr(config, k) for k in keys},
        "framework": framework(),
        "dtype": str(DTYPE).split(".")[1],
        "threads": torch.get_num_threads(),
        "kv_cache": {"batch_size": CACHE_BATCH, "max_seq_length": CACHE_TOKENS},
        "calibration": calibration_rows(shapes, with_profiler, without),
        "held_out": [],
    }
    write_json(path, steps)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--models", default=",".join(MODELS),
                        help=f"comma-separated, of {', '.join(MODELS)} (default: all)")
    parser.add_argument("--threads", type=int, default=1,
                        help="intra-op threads (default 1: steady on a shared machine)")
    parser.add_argument("--repeats", type=int, default=3,
                        help="unprofiled runs of each step (half before the profiled run, the "
                             "rest after); their median is kept")
    parser.add_argument("--quick", action="store_true", help="two tiny steps per trace")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error(f"--repeats: expected 1 or more, found {args.repeats}")
    unknown = [m for m in args.models.split(",") if m not in MODELS]
    if unknown:
        parser.error(f"unknown model {unknown[0]}: expected one of {', '.join(MODELS)}")
    torch.set_num_threads(args.threads)
    os.makedirs(args.out, exist_ok=True)
    for name in args.models.split(","):
        write_traces(name, args)


if __name__ == "__main__":
    main()
