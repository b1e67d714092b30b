#!/usr/bin/python3
"""Train the tiny recursive early-exit byte-level model exitsim ships (issue 6).

Architecture (the engine's, docs/engine.md): byte embeddings (vocab 256, tied LM head), one
prelude layer, a one-layer shared block applied N_r = 4 times, one coda layer, RMSNorm, rotary
positions (Hugging Face convention), grouped-query attention, SwiGLU. Every recursion is an exit:
exit r runs the coda and the shared final norm + head on the hidden state after recursion r, and
the loss is a weighted mean over exits (deep supervision, final exit weighted most).

Routers: one linear d -> 1 (sigmoid) per recursion on the hidden state entering it, used by the
engine as Mixture-of-Recursions expert choice (hierarchical: a token runs recursion r while its
router selects it, by threshold or per-batch top-k). Unlike MoR, whose router gates the block
output and learns end to end with an auxiliary BCE loss on top-k membership, these routers are
trained detached from the language model (the LM is trained at every depth by deep supervision
instead) with BCE on an oracle target: router r (r >= 1) learns whether exit r - 1's top-1
differs from the final exit's, i.e. whether recursion r + 1 is still needed; router 0 learns 1
(recursion 1 always runs). No balancing loss: capacity is the engine's threshold or top-k.

Corpus: the King James Bible from Debian's bible-kjv (public domain),
`bible -l100000 "gen1:1-rev22:21"`; every 20th chapter is held out for evaluation.

Seeded and deterministic on CPU for a given --threads.

Usage: /usr/bin/python3 training/train_tiny.py --out models/tiny-recursive [--steps 3000]
       [--threads 1]
       /usr/bin/python3 training/train_tiny.py --smoke   (three steps, no export: for CI)
       /usr/bin/python3 training/train_tiny.py --write-held-out FILE   (the evaluation text)
"""
import argparse
import json
import math
import os
import re
import struct
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

D, HEADS, KV_HEADS, HEAD_DIM, FFN, VOCAB = 192, 6, 2, 32, 512, 256
PRELUDE, BLOCK, RECURSIONS, CODA = 1, 1, 4, 1
EPS, THETA = 1e-5, 10000.0
HOLD_OUT_EVERY = 20
# Sequences of 256 bytes: rotary positions beyond the training length extrapolate badly (a
# 128-byte-trained trial lost 0.2 bits/byte on 256-byte windows), and engine prompts run to
# a few hundred bytes.
BATCH, SEQ_LEN = 8, 256
# Deep supervision weights per exit: the final exit dominates, as in Relaxed Recursive
# Transformers' "aggressive" early-exit training; equal weights leave every exit equally good,
# which leaves early exit nothing to trade.
EXIT_WEIGHTS = [0.25, 0.25, 0.25, 1.0]


def corpus():
    """(training bytes, held-out bytes): every 20th chapter (Genesis 20, Genesis 40, ...; 59 of
    1,189 chapters, 4.9% of the bytes) is held out, so evaluation covers every part of the book
    rather than one tail (Revelation alone is a distribution shift)."""
    text = subprocess.run(["bible", "-l100000", "gen1:1-rev22:21"], check=True,
                          capture_output=True).stdout
    chapters = re.split(rb"\n(?=[1-9A-Z][^\n]* \d+\n)", text)[1:]
    train = b"\n".join(c for i, c in enumerate(chapters, 1) if i % HOLD_OUT_EVERY != 0)
    held = b"\n".join(c for i, c in enumerate(chapters, 1) if i % HOLD_OUT_EVERY == 0)
    as_ids = lambda b: torch.frombuffer(bytearray(b), dtype=torch.uint8).long()
    return as_ids(train), as_ids(held)


def rms_norm(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * w


def rotary(x, positions):
    half = HEAD_DIM // 2
    inv = THETA ** (-2.0 * torch.arange(half, dtype=torch.float64) / HEAD_DIM)
    angle = positions[:, None].double() * inv[None, :]
    cos, sin = angle.cos().float(), angle.sin().float()
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


class Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        init = lambda o, i: torch.nn.Parameter(torch.randn(o, i) * 0.02)
        self.attn_norm = torch.nn.Parameter(torch.ones(D))
        self.mlp_norm = torch.nn.Parameter(torch.ones(D))
        self.wq, self.wk = init(HEADS * HEAD_DIM, D), init(KV_HEADS * HEAD_DIM, D)
        self.wv, self.wo = init(KV_HEADS * HEAD_DIM, D), init(D, HEADS * HEAD_DIM)
        self.w_gate, self.w_up, self.w_down = init(FFN, D), init(FFN, D), init(D, FFN)

    def forward(self, x):
        b, t, _ = x.shape
        h = rms_norm(x, self.attn_norm)
        positions = torch.arange(t)
        q = rotary((h @ self.wq.T).view(b, t, HEADS, HEAD_DIM).transpose(1, 2), positions)
        k = rotary((h @ self.wk.T).view(b, t, KV_HEADS, HEAD_DIM).transpose(1, 2), positions)
        v = (h @ self.wv.T).view(b, t, KV_HEADS, HEAD_DIM).transpose(1, 2)
        k = k.repeat_interleave(HEADS // KV_HEADS, dim=1)
        v = v.repeat_interleave(HEADS // KV_HEADS, dim=1)
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(HEAD_DIM)
        mask = torch.ones(t, t, dtype=torch.bool).triu(1)
        attn = scores.masked_fill(mask, float("-inf")).softmax(-1) @ v
        x = x + attn.transpose(1, 2).reshape(b, t, -1) @ self.wo.T
        h = rms_norm(x, self.mlp_norm)
        return x + (F.silu(h @ self.w_gate.T) * (h @ self.w_up.T)) @ self.w_down.T


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = torch.nn.Parameter(torch.randn(VOCAB, D) * 0.02)
        self.layers = torch.nn.ModuleList([Layer() for _ in range(PRELUDE + BLOCK + CODA)])
        self.final_norm = torch.nn.Parameter(torch.ones(D))
        self.router_w = torch.nn.Parameter(torch.zeros(RECURSIONS, D))
        self.router_b = torch.nn.Parameter(torch.zeros(RECURSIONS))

    def exits(self, tokens):
        """Logits at every exit and router logits per recursion (router inputs detached)."""
        x = self.embedding[tokens]
        for i in range(PRELUDE):
            x = self.layers[i](x)
        logits, routers = [], []
        for r in range(RECURSIONS):
            routers.append(x.detach() @ self.router_w[r] + self.router_b[r])
            for j in range(BLOCK):
                x = self.layers[PRELUDE + j](x)
            y = x
            for c in range(CODA):
                y = self.layers[PRELUDE + BLOCK + c](y)
            logits.append(rms_norm(y, self.final_norm) @ self.embedding.T)
        return logits, routers


def losses(model, batch):
    inputs, targets = batch[:, :-1], batch[:, 1:]
    logits, routers = model.exits(inputs)
    lm = [F.cross_entropy(l.reshape(-1, VOCAB), targets.reshape(-1)) for l in logits]
    final = logits[-1].argmax(-1)
    # Router 0 guards recursion 1, which always runs (no exit point lies before it): target 1,
    # so that a threshold never stops a token before its first exit.
    router_loss = F.binary_cross_entropy_with_logits(routers[0], torch.ones_like(routers[0]))
    for r in range(1, RECURSIONS):
        # Router r: is recursion r + 1 (1-based) still needed, i.e. does exit r - 1 disagree?
        needed = (logits[r - 1].argmax(-1) != final).float().detach()
        router_loss = router_loss + F.binary_cross_entropy_with_logits(routers[r], needed)
    return lm, router_loss


def sample_batch(data, limit, batch, length, generator):
    starts = torch.randint(0, limit - length - 1, (batch,), generator=generator)
    return torch.stack([data[s:s + length + 1] for s in starts.tolist()])


def export(model, out_dir):
    """exitsim.json + model.safetensors (fp16) in the engine's tensor names."""
    os.makedirs(out_dir, exist_ok=True)
    tensors = {"model.embed_tokens.weight": model.embedding, "model.norm.weight": model.final_norm}
    names = {"attn_norm": "input_layernorm", "mlp_norm": "post_attention_layernorm",
             "wq": "self_attn.q_proj", "wk": "self_attn.k_proj", "wv": "self_attn.v_proj",
             "wo": "self_attn.o_proj", "w_gate": "mlp.gate_proj", "w_up": "mlp.up_proj",
             "w_down": "mlp.down_proj"}
    for i, layer in enumerate(model.layers):
        for attr, name in names.items():
            suffix = ".weight"
            tensors[f"model.layers.{i}.{name}{suffix}"] = getattr(layer, attr)
    for r in range(RECURSIONS):
        tensors[f"model.routers.{r}.weight"] = model.router_w[r].view(1, D)
        tensors[f"model.routers.{r}.bias"] = model.router_b[r].view(1)
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        data = tensors[name].detach().to(torch.float16).contiguous().numpy().tobytes()
        header[name] = {"dtype": "F16", "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header_bytes = json.dumps(header, separators=(",", ":")).encode()
    header_bytes += b" " * (-len(header_bytes) % 8)
    with open(os.path.join(out_dir, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(header_bytes)) + header_bytes + b"".join(blobs))
    config = {"format": "exitsim-model v1", "name": "tiny-recursive", "d_model": D,
              "n_heads": HEADS, "n_kv_heads": KV_HEADS, "head_dim": HEAD_DIM, "ffn_dim": FFN,
              "vocab": VOCAB, "rms_eps": EPS, "rope_theta": THETA, "max_positions": 4096,
              "tied_embeddings": True,
              "depth": {"prelude": PRELUDE, "block": BLOCK, "recursions": RECURSIONS,
                        "coda": CODA, "lora_rank": [], "exit_points": []},
              "routers": True, "tokenizer": "bytes", "weights": "model.safetensors"}
    with open(os.path.join(out_dir, "exitsim.json"), "w") as f:
        json.dump(config, f, indent=2)


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (length,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + length])
    base = 8 + length
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        dtype = {"F16": torch.float16, "F32": torch.float32}[info["dtype"]]
        out[name] = torch.frombuffer(bytearray(raw[base + begin:base + end]),
                                     dtype=dtype).float().view(info["shape"])
    return out


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        data = tensors[name].detach().float().contiguous().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header_bytes = json.dumps(header, separators=(",", ":")).encode()
    header_bytes += b" " * (-len(header_bytes) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header_bytes)) + header_bytes + b"".join(blobs))


def load_exported(model_dir):
    """A Model holding the exported (fp16-rounded) weights, as the engine sees them."""
    t = read_safetensors(os.path.join(model_dir, "model.safetensors"))
    model = Model()
    names = {"attn_norm": "input_layernorm", "mlp_norm": "post_attention_layernorm",
             "wq": "self_attn.q_proj", "wk": "self_attn.k_proj", "wv": "self_attn.v_proj",
             "wo": "self_attn.o_proj", "w_gate": "mlp.gate_proj", "w_up": "mlp.up_proj",
             "w_down": "mlp.down_proj"}
    with torch.no_grad():
        model.embedding.copy_(t["model.embed_tokens.weight"])
        model.final_norm.copy_(t["model.norm.weight"])
        for i, layer in enumerate(model.layers):
            for attr, name in names.items():
                getattr(layer, attr).copy_(t[f"model.layers.{i}.{name}.weight"])
        for r in range(RECURSIONS):
            model.router_w[r].copy_(t[f"model.routers.{r}.weight"].view(D))
            model.router_b[r].copy_(t[f"model.routers.{r}.bias"].view(()))
    return model


def write_parity_fixture(model_dir, held, tokens=48):
    """parity.safetensors: held-out token ids, the logits at every exit and the router scores
    (sigmoid of each recursion's router on the hidden state entering it), computed in fp32 from
    the exported weights; the C++ engine must reproduce them (tests/engine)."""
    model = load_exported(model_dir)
    ids = held[:tokens]
    with torch.no_grad():
        logits, routers = model.exits(ids.view(1, -1))
    write_safetensors(os.path.join(model_dir, "parity.safetensors"), {
        "tokens": ids.float(),
        "logits": torch.stack([l[0] for l in logits]),
        "router_scores": torch.stack([torch.sigmoid(r[0]) for r in routers]),
    })


def evaluate(model, held, length=SEQ_LEN, windows=64):
    model.eval()
    with torch.no_grad():
        starts = torch.linspace(0, len(held) - length - 2, windows).long().tolist()
        batch = torch.stack([held[s:s + length + 1] for s in starts])
        lm, _ = losses(model, batch)
    model.train()
    return [round(l.item() / math.log(2), 3) for l in lm]  # bits per byte at each exit


def auc(scores, labels):
    """Area under the ROC curve of `scores` predicting `labels` (ties count half)."""
    order = torch.argsort(scores)
    ranks = torch.empty_like(scores)
    ranks[order] = torch.arange(1, len(scores) + 1, dtype=scores.dtype)
    # Average the ranks of tied scores.
    unique, inverse = torch.unique(scores, return_inverse=True)
    sums = torch.zeros(len(unique), dtype=scores.dtype).index_add_(0, inverse, ranks)
    counts = torch.zeros(len(unique), dtype=scores.dtype).index_add_(0, inverse, torch.ones_like(ranks))
    ranks = (sums / counts)[inverse]
    positives = labels.sum().item()
    negatives = len(labels) - positives
    if positives == 0 or negatives == 0:
        return float("nan")
    return (ranks[labels].sum().item() - positives * (positives + 1) / 2) / (positives * negatives)


def exit_report(model_dir, held, length=SEQ_LEN, windows=256):
    """How well recursion 1's confidence and the recursion-2 router predict that exiting after
    recursion 1 gives the final exit's top-1 (on held-out windows of the exported model)."""
    model = load_exported(model_dir)
    starts = torch.linspace(0, len(held) - length - 2, windows).long().tolist()
    batch = torch.stack([held[s:s + length] for s in starts])
    with torch.no_grad():
        logits, routers = model.exits(batch)
    first = logits[0].softmax(-1)
    agree = (logits[0].argmax(-1) == logits[-1].argmax(-1)).reshape(-1)
    confidence = first.max(-1).values.reshape(-1)
    router_continue = torch.sigmoid(routers[1]).reshape(-1)  # high: recursion 2 is needed
    print(f"tokens {len(agree)}; exit 1 agrees with the final exit on {agree.float().mean():.4f}")
    for t in (0.5, 0.7, 0.9):
        chosen = confidence >= t
        print(f"  max-probability >= {t}: {chosen.float().mean():.3f} of tokens, agreement "
              f"{agree[chosen].float().mean():.4f}")
    print(f"AUC predicting agreement: max-probability {auc(confidence, agree):.3f}, "
          f"router (1 - score) {auc(1 - router_continue, agree):.3f}")


def learning_rate(step, steps, peak=3e-3, warmup=100):
    """Linear warm-up, then cosine decay to a tenth of the peak over the step budget."""
    progress = min(1.0, step / max(steps, 1))
    return peak * min(1.0, (step + 1) / warmup) * (0.1 + 0.45 * (1 + math.cos(math.pi * progress)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="models/tiny-recursive")
    parser.add_argument("--steps", type=int, default=3000,
                        help="optimizer steps of 8 x 256 bytes (the shipped model: 3000)")
    parser.add_argument("--smoke", action="store_true", help="3 steps, no export (for CI)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads; results are deterministic for a given seed and "
                             "thread count. 2 is ~1.5x faster on an idle 2-core machine, slower "
                             "when the other core is busy")
    parser.add_argument("--checkpoint-every", type=int, default=500,
                        help="export the model (and fixture) every N steps as well as at the end")
    parser.add_argument("--fixture-only", action="store_true",
                        help="only (re)write parity.safetensors for the model in --out")
    parser.add_argument("--exit-report", action="store_true",
                        help="only report how well confidence and router predict exit agreement "
                             "for the model in --out")
    parser.add_argument("--write-held-out", metavar="FILE",
                        help="only write the held-out text (what `exitsim engine eval` reads)")
    args = parser.parse_args()
    train, held = corpus()
    if args.write_held_out:
        with open(args.write_held_out, "wb") as f:
            f.write(bytes(held.to(torch.uint8).tolist()))
        print(f"wrote {args.write_held_out} ({len(held)} bytes held out)")
        return 0
    if args.exit_report:
        exit_report(args.out, held)
        return 0
    if args.fixture_only:
        write_parity_fixture(args.out, held)
        print(f"wrote {args.out}/parity.safetensors")
        return 0
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    model = Model()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    generator = torch.Generator().manual_seed(args.seed)
    steps = 3 if args.smoke else args.steps
    start = time.time()
    for step in range(steps):
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, steps)
        lm, router_loss = losses(model, sample_batch(train, len(train), BATCH, SEQ_LEN, generator))
        loss = sum(w * l for w, l in zip(EXIT_WEIGHTS, lm)) / sum(EXIT_WEIGHTS) + router_loss
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        done = step + 1
        if done % 100 == 0:
            print(f"step {done} loss {loss.item():.4f} {time.time() - start:.0f} s held-out "
                  f"bits/byte per exit {evaluate(model, held)}", flush=True)
        if not args.smoke and done % args.checkpoint_every == 0 and done < steps:
            export(model, args.out)
            write_parity_fixture(args.out, held)
    print(f"trained {steps} steps in {time.time() - start:.0f} s; held-out bits/byte per exit "
          f"{evaluate(model, held)}")
    if not args.smoke:
        export(model, args.out)
        write_parity_fixture(args.out, held)
        print(f"wrote {args.out} (model and parity fixture)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
