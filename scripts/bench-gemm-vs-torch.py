#!/usr/bin/env python3
"""The CPU backend's GEMMs against PyTorch's (oneDNN) on the same shapes, one run.

    hif8lab bench gemm --json [--preset P --set K=V ...] > gemm.json
    python scripts/bench-gemm-vs-torch.py gemm.json [--threads 2] [--reps 5]

Times torch.matmul in bf16 and in f32 on every shape of the JSON (the same m×n×k and layout:
NN, NT and TN as transposed views, as the lab reads them), best of --reps after one untimed
call, on --threads threads, and prints each beside the lab's figures: the lab's bf16 kernel on
fake-quantized operands against torch bf16 (`quantized / torch bf16`), and the step's shapes
together (FLOPs over the summed time of their calls). Needs a python with torch.
"""
import argparse
import json
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json", help="the output of `hif8lab bench gemm --json`")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    lab = json.load(open(args.json))

    def timed(m, n, k, layout, dtype):
        a = torch.randn(k, m) if layout == "TN" else torch.randn(m, k)
        b = torch.randn(n, k) if layout == "NT" else torch.randn(k, n)
        a, b = a.to(dtype), b.to(dtype)
        a = a.t() if layout == "TN" else a
        b = b.t() if layout == "NT" else b
        torch.matmul(a, b)
        best = float("inf")
        for _ in range(args.reps):
            t = time.perf_counter()
            torch.matmul(a, b)
            best = min(best, time.perf_counter() - t)
        return best

    rows = []
    for s in lab["shapes"]:
        m, n, k, layout = s["m"], s["n"], s["k"], s["layout"]
        flops = 2.0 * m * n * k
        tb = timed(m, n, k, layout, torch.bfloat16)
        tf = timed(m, n, k, layout, torch.float32)
        rows.append((s, flops, flops / tb / 1e9, flops / tf / 1e9))
    print(f"GEMMs of preset '{lab['preset']}' on '{lab['cpu']}', {args.threads} threads; the lab's bf16 kernel: "
          f"{lab['gemm_kernel']}; torch {torch.__version__} (GFLOP/s, best of {args.reps})")
    print(f"  {'m×n×k':<18} {'lay':<4} {'calls':>5} {'lab f32':>8} {'lab bf16 q':>10} {'torch f32':>9} "
          f"{'torch bf16':>10} {'q / torch bf16':>14}")
    for s, _, gb, gf in rows:
        q = s["gflops_bf16_quantized"]
        ratio = f"{q / gb:.2f}" if q is not None else "-"
        qs = f"{q:.1f}" if q is not None else "-"
        shape = f"{s['m']}×{s['n']}×{s['k']}"
        print(f"  {shape:<18} {s['layout']:<4} {s['calls_per_step']:>5} {s['gflops_f32']:>8.1f} "
              f"{qs:>10} {gf:>9.1f} {gb:>10.1f} {ratio:>14}")

    def together(pick):
        f = t = 0.0
        for s, flops, gb, gf in rows:
            if s["calls_per_step"] == 0:
                continue
            rate = pick(s, gb, gf)
            if rate is None:
                return None
            f += flops * s["calls_per_step"]
            t += flops * s["calls_per_step"] / (rate * 1e9)
        return f / t / 1e9 if t else None

    tb = together(lambda s, gb, gf: gb)
    tf = together(lambda s, gb, gf: gf)
    q = lab["step_gflops_bf16_quantized"]
    print(f"  the step's shapes together: torch bf16 {tb:.1f}, torch f32 {tf:.1f}, lab f32 "
          f"{lab['step_gflops_f32']:.1f}, lab bf16 quantized {q:.1f} GFLOP/s"
          + (f" ({q / tb:.2f} of torch bf16)" if q else ""))


if __name__ == "__main__":
    main()
