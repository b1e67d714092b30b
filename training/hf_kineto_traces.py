#!/usr/bin/env python3
"""PyTorch-profiler (Kineto) traces of real Hugging Face `transformers` models, for
`exitsim calibrate --kineto` and its tests.

Unlike training/kineto_traces.py (a Llama-shaped model written here), this runs the library's
own model code: AutoModelForCausalLM.from_config (AutoModel for a base model without an LM head)
of the published configs, random weights (seeded), bfloat16, on the CPU, with the attention the
library picks by default (SDPA; eager for Gemma-2, whose softcapping SDPA cannot do). Each step is
what generate() runs: the forward pass with an attention mask, a DynamicCache (empty for a prefill,
holding `context` random K/V tokens per sequence for a decode step), logits_to_keep=1, and greedy
sampling of each sequence's next token. One profiler step (prof.step()) per model step, under
torch.profiler.profile(activities=[CPU], record_shapes=True); one unrecorded warm-up step first.
One intra-op thread unless --threads says otherwise.

Writes, per model and trace (prefill; decode; `mixed` for the base model):
  <out>/<model>.<trace>.kineto.json.gz  the trace as export_chrome_trace writes it, gzipped
  <out>/<model>.<trace>.steps.json      every step's shape, and its wall and CPU times under the
                                        profiler and without it (median of --repeats runs)
tests/analysis/data/kineto/hf/README.md describes the committed ones.

Usage:
  /work/pyenv/bin/python training/hf_kineto_traces.py --out DIR [--models llama3,qwen3,...]
  /work/pyenv/bin/python training/hf_kineto_traces.py --describe TRACE [--step N]
The configs are read from ../shared/models/hf beside the repository (--configs to change it);
Gemma-2's is written below. No network access is needed.
"""

import argparse
import collections
import gzip
import inspect
import json
import os
import statistics
import sys
import tempfile
import time

import torch
import transformers
from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, DynamicCache, Gemma2Config

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from kineto_traces import hardware, write_gzip  # noqa: E402 (this folder)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = os.path.join(os.path.dirname(REPO), "shared", "models", "hf")

# google/gemma-2-2b's config.json (https://huggingface.co/google/gemma-2-2b/blob/main/config.json):
# the values its shape depends on. No Gemma-2 config is in ../shared; transformers' Gemma2Config
# defaults are this model's, which gemma2_config() checks.
GEMMA2_2B = {
    "hidden_size": 2304, "num_hidden_layers": 26, "num_attention_heads": 8,
    "num_key_value_heads": 4, "head_dim": 256, "intermediate_size": 9216, "vocab_size": 256000,
    "sliding_window": 4096, "query_pre_attn_scalar": 256, "attn_logit_softcapping": 50.0,
    "final_logit_softcapping": 30.0, "hidden_activation": "gelu_pytorch_tanh",
    "rms_norm_eps": 1e-6, "tie_word_embeddings": True,
}

# Prefill steps: (prompts, tokens per prompt); decode steps: (sequences, tokens of context), one
# new token per sequence.
PREFILL = [("prefill", b, t) for b, t in [(1, 16), (1, 64), (2, 32), (1, 128), (4, 16), (2, 96),
                                           (1, 256), (4, 64)]]
DECODE = [("decode", b, c) for b, c in [(1, 32), (2, 64), (4, 128), (8, 32), (1, 512), (3, 200),
                                         (8, 256), (2, 384), (6, 96), (5, 448), (4, 300),
                                         (8, 512)]]

# A model: its config (a folder of CONFIGS, or "gemma-2-2b" for the values above); what is shrunk
# so that a step runs in well under a second on one CPU core (every other value is the published
# one); whether it is a base model (AutoModel: the decoder stack without LM head nor sampling);
# its traces (name: steps); and from_config's options.
Model = collections.namedtuple("Model", "source shrunk base traces options")
LAYERS_2_VOCAB_32K = {"num_hidden_layers": 2, "vocab_size": 32000}
# One layer of Mixtral-8x7B holds 8 experts of 3 x 4096 x 14336 (1.4 G parameters): the width is
# cut by 4, keeping the heads (32 of 128, 8 K/V) and the experts (8, top 2). Its vocabulary is
# 32000 already.
MIXTRAL_SHRUNK = {"num_hidden_layers": 2, "hidden_size": 1024, "intermediate_size": 3584,
                  "head_dim": 128}
MODELS = {
    "llama3": Model("llama-3.1-8b-instruct", LAYERS_2_VOCAB_32K, False,
                    {"prefill": PREFILL, "decode": DECODE}, {}),
    "qwen3": Model("qwen3-14b", LAYERS_2_VOCAB_32K, False,
                   {"prefill": PREFILL, "decode": DECODE}, {}),
    # Four layers: two of Gemma-2's sliding/global pairs. Its eager attention and four norms a
    # layer record twice Llama's operators: 8 decode steps keep the trace under 400 KB.
    "gemma2": Model("gemma-2-2b", {"num_hidden_layers": 4, "vocab_size": 32000}, False,
                    {"prefill": PREFILL, "decode": DECODE[:8]}, {}),
    # transformers 5 runs the experts as two grouped GEMMs (torch._grouped_mm) over the tokens
    # sorted by expert ...
    "mixtral": Model("mixtral-8x7b-v0.1", MIXTRAL_SHRUNK, False,
                     {"prefill": PREFILL, "decode": DECODE}, {}),
    # ... transformers 4 (and 5 with experts_implementation="eager") loops over the experts hit:
    # one linear for gate and up, one for down per expert, index_add_ into the output (8 decode
    # steps keep the trace under 400 KB).
    "mixtral-eager": Model("mixtral-8x7b-v0.1", MIXTRAL_SHRUNK, False,
                           {"prefill": PREFILL, "decode": DECODE[:8]},
                           {"experts_implementation": "eager"}),
    "llama3-base": Model("llama-3.1-8b-instruct", LAYERS_2_VOCAB_32K, True,
                         {"mixed": PREFILL[:4] + DECODE[:6]}, {}),
}

QUICK = {"prefill": [("prefill", 1, 8), ("prefill", 2, 4)],
         "decode": [("decode", 1, 8), ("decode", 2, 16)],
         "mixed": [("prefill", 1, 8), ("decode", 2, 16)]}
DTYPE = torch.bfloat16


def gemma2_config(overrides):
    defaults = Gemma2Config()
    differing = {k: (v, getattr(defaults, k)) for k, v in GEMMA2_2B.items()
                 if getattr(defaults, k) != v}
    if differing:
        sys.exit(f"GEMMA2_2B differs from transformers' Gemma2Config defaults: {differing}")
    return Gemma2Config(**{**GEMMA2_2B, **overrides})


def load_config(source, overrides, configs):
    """The published config with `overrides`; special token ids outside a cut vocabulary are
    dropped (they index nothing a forward pass reads)."""
    if source == "gemma-2-2b":
        config = gemma2_config(overrides)
    else:
        folder = os.path.join(configs, source)
        if not os.path.isfile(os.path.join(folder, "config.json")):
            sys.exit(f"{folder}/config.json: expected the published config (--configs names "
                     f"their folder), found no such file")
        config = AutoConfig.from_pretrained(folder, **overrides)
    for key in ["bos_token_id", "eos_token_id", "pad_token_id"]:
        ids = getattr(config, key, None)
        ids = ids if isinstance(ids, list) else [ids]
        if any(i is not None and i >= config.vocab_size for i in ids):
            setattr(config, key, None)
    return config


def head_dim(config):
    return getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads


def cache_argument(model):
    """transformers 5 renamed forward()'s `past_key_values` to `cache`."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def step_inputs(model, kind, batch, n, seed):
    """forward()'s arguments for one step, as generate() passes them: a prefill of `n` tokens per
    prompt into an empty cache, or one token per sequence over `n` cached tokens (random K/V:
    the timing does not depend on their values)."""
    config = model.config
    generator = torch.Generator().manual_seed(seed)
    query = n if kind == "prefill" else 1
    ids = torch.randint(0, config.vocab_size, (batch, query), generator=generator)
    cache = DynamicCache(config=config)
    if kind == "decode":
        shape = (batch, config.num_key_value_heads, n, head_dim(config))
        for layer in range(config.num_hidden_layers):
            cache.update(torch.randn(shape, generator=generator).to(DTYPE),
                         torch.randn(shape, generator=generator).to(DTYPE), layer)
    mask = torch.ones(batch, ids.shape[1] + (n if kind == "decode" else 0), dtype=torch.long)
    return {"input_ids": ids, "attention_mask": mask, cache_argument(model): cache,
            "use_cache": True}


def run_step(model, inputs, base):
    """One model step; a causal LM's ends with greedy sampling of each sequence's next token."""
    if base:
        return model(**inputs).last_hidden_state
    out = model(**inputs, logits_to_keep=1)
    return torch.argmax(out.logits[:, -1, :], dim=-1)


def timed(run, prepared, profiler=None):
    """Each step's (wall, CPU) time in ms, `run` called on each prepared input (the profiler, when
    given, steps after each). The
    process's CPU time leaves out the time other jobs on a shared machine hold the core, so the
    profiler's overhead shows in it when wall times are noisy."""
    times = []
    for inputs in prepared:
        wall, cpu = time.perf_counter(), time.process_time()
        run(inputs)
        times.append(((time.perf_counter() - wall) * 1e3, (time.process_time() - cpu) * 1e3))
        if profiler is not None:
            profiler.step()
    return times


def profiled(run, make_inputs, trace_path, metadata):
    """The steps' times under the profiler; writes their trace (one warm-up step first, which
    the schedule keeps out of it)."""
    prepared = [make() for make in make_inputs[:1] + make_inputs]

    schedule = torch.profiler.schedule(wait=0, warmup=1, active=len(make_inputs), repeat=1)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                record_shapes=True, schedule=schedule,
                                on_trace_ready=lambda p: p.export_chrome_trace(trace_path)) as prof:
        for key, value in metadata.items():  # only kept while the profiler runs
            prof.add_metadata(key, value)
        times = timed(run, prepared, prof)
    return times[1:]


def unprofiled(run, make_inputs, repeats):
    """The steps' times without the profiler, one list per run (inputs rebuilt per run: a
    decode step grows its cache)."""
    return [timed(run, [make() for make in make_inputs]) for _ in range(repeats)]


def median_per_step(runs):
    """Each step's median wall and median CPU time over `runs`."""
    return [tuple(statistics.median(run[i][k] for run in runs) for k in range(2))
            for i in range(len(runs[0]))]


def write_traces(name, args):
    spec = MODELS[name]
    config = load_config(spec.source, spec.shrunk, args.configs)
    torch.manual_seed(0)
    auto = AutoModel if spec.base else AutoModelForCausalLM
    model = auto.from_config(config, dtype=DTYPE, **spec.options).eval()
    metadata = {"exitsim_framework": framework(),
                "exitsim_hardware": hardware(torch.get_num_threads()),
                "exitsim_model": f"{type(model).__name__} of {spec.source} with {spec.shrunk}, "
                                 f"{implementations(model.config)}, random weights, "
                                 f"{str(DTYPE).split('.')[1]}"}
    for trace, shapes in spec.traces.items():
        shapes = QUICK[trace] if args.quick else shapes
        make_inputs = [lambda s=s, i=i: step_inputs(model, *s, seed=1000 + i)
                       for i, s in enumerate(shapes)]
        stem = os.path.join(args.out, f"{name}.{trace}")
        run = lambda inputs: run_step(model, inputs, spec.base)  # noqa: E731
        # Unprofiled runs before and after the profiled one: on a shared machine the load
        # drifts, and the median of runs on both sides follows the profiled run's better.
        with torch.no_grad(), tempfile.TemporaryDirectory() as scratch:
            unprofiled(run, make_inputs, 1)  # warm-up: allocator, oneDNN
            before = unprofiled(run, make_inputs, args.repeats // 2)
            raw = os.path.join(scratch, "trace.json")
            with_profiler = profiled(run, make_inputs, raw, metadata)
            write_gzip(raw, stem + ".kineto.json.gz")
            after = unprofiled(run, make_inputs, args.repeats - args.repeats // 2)
            without = median_per_step(before + after)
        write_steps(stem + ".steps.json", name, model.config, shapes, with_profiler, without)
        print(f"wrote {stem}.kineto.json.gz ({os.path.getsize(stem + '.kineto.json.gz')} bytes, "
              f"{len(shapes)} steps; wall {sum(w for w, _ in with_profiler):.0f} ms profiled, "
              f"{sum(w for w, _ in without):.0f} ms not; CPU "
              f"{sum(c for _, c in with_profiler):.0f} and {sum(c for _, c in without):.0f} ms)",
              file=sys.stderr)


def framework():
    return f"pytorch {torch.__version__}, transformers {transformers.__version__}"


def implementations(config):
    """The attention (and, for a mixture of experts, the experts) code the library runs."""
    text = f"attention {config._attn_implementation}"
    if getattr(config, "num_local_experts", None):
        text += f", experts {config._experts_implementation}"
    return text


def calibration_rows(shapes, with_profiler, without):
    """Each step's shape with its (wall, CPU) times under the profiler and without it, in ms."""
    return [{"kind": k, "batch": b, ("prompt_tokens" if k == "prefill" else "context"): n,
             "profiled_ms": round(p[0], 3), "unprofiled_ms": round(u[0], 3),
             "profiled_cpu_ms": round(p[1], 3), "unprofiled_cpu_ms": round(u[1], 3)}
            for (k, b, n), p, u in zip(shapes, with_profiler, without)]


def write_json(path, document):
    with open(path, "w") as f:
        json.dump(document, f, indent=1)
        f.write("\n")


def write_steps(path, name, config, shapes, with_profiler, without):
    spec = MODELS[name]
    keys = ["model_type", "hidden_size", "intermediate_size", "num_hidden_layers",
            "num_attention_heads", "num_key_value_heads", "head_dim", "vocab_size",
            "num_local_experts", "num_experts_per_tok", "sliding_window", "layer_types",
            "tie_word_embeddings"]
    steps = {
        "format": "exitsim-kineto-steps v1",
        "model": name,
        "config_source": spec.source,
        "shrunk": spec.shrunk,
        "lm_head": not spec.base,
        "config": {k: getattr(config, k) for k in keys if getattr(config, k, None) is not None},
        "framework": framework(),
        "dtype": str(DTYPE).split(".")[1],
        "threads": torch.get_num_threads(),
        "implementations": implementations(config),
        "calibration": calibration_rows(shapes, with_profiler, without),
        "held_out": [],
    }
    write_json(path, steps)


def describe(path, step_index):
    """Prints one step's top-level operators on the step's thread (an operator inside no other),
    with their input shapes: what the importer reads."""
    with gzip.open(path) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    steps = sorted((e for e in events if e["name"].startswith("ProfilerStep#")),
                   key=lambda e: e["ts"])
    if not 0 <= step_index < len(steps):
        sys.exit(f"{path}: --step {step_index}: expected 0 to {len(steps) - 1}, "
                 f"found {len(steps)} ProfilerStep ranges")
    step = steps[step_index]
    inside = sorted((e for e in events if e is not step and e.get("cat") == "cpu_op" and
                     e["tid"] == step["tid"] and step["ts"] <= e["ts"] and
                     e["ts"] + e["dur"] <= step["ts"] + step["dur"]),
                    key=lambda e: (e["ts"], -e["dur"]))
    end = -1.0
    print(f"{step['name']}: {step['dur']:.0f} us")
    for e in inside:
        if e["ts"] >= end:
            end = e["ts"] + e["dur"]
            print(f"{e['dur']:10.1f} us  {e['name']} {e['args'].get('Input Dims')}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out")
    parser.add_argument("--models", default=",".join(MODELS),
                        help=f"comma-separated, of {', '.join(MODELS)} (default: all)")
    parser.add_argument("--configs", default=CONFIGS,
                        help="the folder of Hugging Face configs (default: ../shared/models/hf)")
    parser.add_argument("--threads", type=int, default=1,
                        help="intra-op threads (default 1: steady on a shared machine)")
    parser.add_argument("--repeats", type=int, default=3,
                        help="unprofiled runs of each step (half before the profiled run, the "
                             "rest after); their median is kept")
    parser.add_argument("--quick", action="store_true", help="two tiny steps per trace")
    parser.add_argument("--describe", metavar="TRACE",
                        help="print one step's top-level operators of TRACE instead")
    parser.add_argument("--step", type=int, default=0, help="the step --describe prints")
    args = parser.parse_args()
    if args.describe:
        describe(args.describe, args.step)
        return
    if not args.out:
        parser.error("--out is required")
    if args.repeats < 1:
        parser.error(f"--repeats: expected 1 or more, found {args.repeats}")
    unknown = [m for m in args.models.split(",") if m not in MODELS]
    if unknown:
        parser.error(f"unknown model {unknown[0]}: expected one of {', '.join(MODELS)}")
    transformers.logging.set_verbosity_error()
    torch.set_num_threads(args.threads)
    os.makedirs(args.out, exist_ok=True)
    for name in args.models.split(","):
        write_traces(name, args)


if __name__ == "__main__":
    main()
