#!/usr/bin/env python3
"""Writes gpu_plain.kineto.json.gz: a hand-made torch.profiler (Kineto) trace of a GPU run, in the
schema torch.profiler's export_chrome_trace writes for CUDA activity (PyTorch 2.x): operators
("cat": "cpu_op", with "Input Dims"), the runtime calls they make ("cuda_runtime",
cudaLaunchKernel, with a "correlation" id), the kernels on the device ("kernel", same
"correlation"), flow events ("ac2g") and "ProfilerStep#N" ranges. A one-layer Llama-shaped model
(d 64, 4 heads of 16, 2 K/V heads, FFN 128, vocab 100) decodes batches of 1 to 32 over 10
tokens of context. Every kernel's duration is a known line in the batch (below), the operators'
CPU times are a constant 10 us, so a test can tell which time the import used. The last step also
replays a CUDA graph of 3 kernels (cudaGraphLaunch), which no operator can claim.

Run once by hand (the test reads the committed output; tests never run Python):
  python3 tests/analysis/data/kineto/make_gpu_fixture.py
"""
import gzip
import json
import os

D, HEADS, KV, HD, FFN, VOCAB = 64, 4, 2, 16, 128, 100
CONTEXT = 10
CPU_US = 10.0

# Kernel microseconds per op: a + b * batch.
KERNEL = {"norm": (1.0, 0.02), "gemm": (3.0, 0.10), "rotary": (1.0, 0.01),
          "cat": (1.5, 0.05), "attention": (4.0, 0.20), "act": (1.0, 0.03),
          "embedding": (1.0, 0.01), "lm_head": (5.0, 0.30), "argmax": (2.0, 0.01)}


def main():
    events, correlation, t = [], [1000], [0.0]
    pid, tid = 4242, 4242

    def op(name, dims, kernel=None, batch=1):
        start = t[0]
        event = {"ph": "X", "cat": "cpu_op", "name": name, "pid": pid, "tid": tid,
                 "ts": start, "dur": CPU_US,
                 "args": {"External id": len(events), "Input Dims": dims}}
        events.append(event)
        if kernel:
            correlation[0] += 1
            c = correlation[0]
            events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel",
                           "pid": pid, "tid": tid, "ts": start + 2, "dur": 5,
                           "args": {"External id": event["args"]["External id"],
                                    "correlation": c}})
            a, b = KERNEL[kernel]
            events.append({"ph": "X", "cat": "kernel", "name": f"{kernel}_kernel",
                           "pid": 0, "tid": 7, "ts": start + 3, "dur": round(a + b * batch, 6),
                           "args": {"External id": event["args"]["External id"],
                                    "device": 0, "stream": 7, "correlation": c}})
            events.append({"ph": "s", "id": c, "pid": pid, "tid": tid, "ts": start + 2,
                           "cat": "ac2g", "name": "ac2g"})
        t[0] += CPU_US + 1

    for n, batch in enumerate([1, 2, 4, 8, 16, 32, 3, 6, 12, 24, 5, 20]):
        step_start = t[0]
        t[0] += 1
        x = [batch, 1, D]
        op("aten::embedding", [[VOCAB, D], [batch, 1], [], [], []], "embedding", batch)
        op("aten::pow", [x, []], "norm", batch)
        op("aten::mean", [x, [], [], []], "norm", batch)
        op("aten::linear", [x, [HEADS * HD, D], []], "gemm", batch)
        op("aten::linear", [x, [KV * HD, D], []], "gemm", batch)
        op("aten::linear", [x, [KV * HD, D], []], "gemm", batch)
        op("aten::mul", [[batch, HEADS, 1, HD], [1, 1, 1, HD]], "rotary", batch)
        op("aten::cat", [[], []], "cat", batch)
        op("aten::cat", [[], []], "cat", batch)
        op("aten::expand", [[batch, KV, 1, CONTEXT + 1, HD], []])
        op("aten::scaled_dot_product_attention",
           [[batch, HEADS, 1, HD], [batch, HEADS, CONTEXT + 1, HD],
            [batch, HEADS, CONTEXT + 1, HD], [], [], []], "attention", batch)
        op("aten::transpose", [[batch, HEADS, 1, HD], [], []])
        op("aten::linear", [x, [D, HEADS * HD], []], "gemm", batch)
        op("aten::add", [x, x, []], "norm", batch)
        op("aten::pow", [x, []], "norm", batch)
        op("aten::linear", [x, [FFN, D], []], "gemm", batch)
        op("aten::silu", [[batch, 1, FFN]], "act", batch)
        op("aten::linear", [x, [FFN, D], []], "gemm", batch)
        op("aten::mul", [[batch, 1, FFN], [batch, 1, FFN]], "act", batch)
        op("aten::linear", [[batch, 1, FFN], [D, FFN], []], "gemm", batch)
        op("aten::add", [x, x, []], "norm", batch)
        op("aten::pow", [x, []], "norm", batch)
        op("aten::linear", [x, [VOCAB, D], []], "lm_head", batch)
        op("aten::argmax", [[batch, 1, VOCAB], [], []], "argmax", batch)
        if n == 11:  # a CUDA graph replay: its kernels carry the launch's correlation id
            correlation[0] += 1
            c = correlation[0]
            events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch",
                           "pid": pid, "tid": tid, "ts": t[0], "dur": 4,
                           "args": {"correlation": c}})
            for k in range(3):
                events.append({"ph": "X", "cat": "kernel", "name": f"graph_kernel_{k}",
                               "pid": 0, "tid": 7, "ts": t[0] + 5 + k, "dur": 7.0,
                               "args": {"device": 0, "stream": 7, "correlation": c}})
            t[0] += 30
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}",
                       "pid": pid, "tid": tid, "ts": step_start, "dur": t[0] - step_start + 5,
                       "args": {"External id": len(events)}})
        t[0] += 20
    document = {"schemaVersion": 1,
                "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3",
                                      "totalGlobalMem": 85031714816, "computeMajor": 9,
                                      "computeMinor": 0}],
                "cuda_runtime_version": 12040,
                "traceEvents": events, "traceName": "gpu_plain", "displayTimeUnit": "ms"}
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu_plain.kineto.json.gz")
    text = json.dumps(document, indent=None, separators=(",", ":")) + "\n"
    with open(path, "wb") as out, gzip.GzipFile(fileobj=out, mode="wb", mtime=0) as f:
        f.write(text.encode())


if __name__ == "__main__":
    main()
