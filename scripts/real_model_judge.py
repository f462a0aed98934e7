"""The judge of scripts/test-real-model.sh: transformers (its GGUF loader) and PyTorch against
hif8lab on a real GGUF model. Each check prints one line and the script exits non-zero if any
fails.

    python scripts/real_model_judge.py HIF8LAB GGUF IMPORTED_DIR TEXT OUT_JSON
"""

import json
import os
import resource
import subprocess
import sys
import time

import numpy as np
import torch
from safetensors.numpy import load_file
from transformers import AutoModelForCausalLM, AutoTokenizer

hif8lab, gguf_path, imported, text_path, out_json = sys.argv[1:6]
torch.set_num_threads(2)
d, f = os.path.dirname(gguf_path), os.path.basename(gguf_path)
results = {"checks": {}}
failed = []


def check(name, ok, detail):
    results["checks"][name] = {"ok": bool(ok), "detail": detail}
    print(f"{'PASS' if ok else 'FAIL'} {name}: {detail}", flush=True)
    if not ok:
        failed.append(name)


def run(args):
    p = subprocess.run([hif8lab] + args, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"hif8lab {' '.join(args)} failed ({p.returncode}): {p.stderr}")
    return p.stdout


tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32)
model.eval()

# 1. Import: every tensor equal to transformers' dequantized weights.
ours = load_file(os.path.join(imported, "model.safetensors"))
worst, worst_name = 0.0, ""
theirs = model.state_dict()
for name, t in theirs.items():
    if name == "lm_head.weight" and model.config.tie_word_embeddings:
        continue
    a = ours[name].astype(np.float64)
    b = t.detach().double().numpy()
    rel = float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30))
    if rel > worst:
        worst, worst_name = rel, name
check("import_weights", worst <= 1e-6 and len(ours) >= len(theirs) - 1,
      f"{len(ours)} tensors, max relative difference {worst:.2e} ({worst_name or 'all equal'})")

# 2. Eval: the .gguf's loss on the same windows as transformers.
text = open(text_path, encoding="utf-8").read()
doc = json.loads(run(["eval", gguf_path, "--text", text_path, "--backend", "cpu", "--json"]))
ids = tok(text)["input_ids"]
c = doc["context"]
losses, n = 0.0, 0
t0 = time.time()
with torch.no_grad():
    for s in range(0, len(ids) - 1, c):
        w = ids[s:s + c + 1]
        x = torch.tensor([w[:-1]])
        logits = model(x).logits[0].double()
        lp = torch.log_softmax(logits, -1)
        tgt = torch.tensor(w[1:])
        losses += float(-lp[torch.arange(len(w) - 1), tgt].sum())
        n += len(w) - 1
torch_eval_s = time.time() - t0
ref_loss = losses / n
check("eval_loss", abs(doc["loss"] - ref_loss) <= 1e-4 and doc["tokens"] == n,
      f"hif8lab {doc['loss']:.6f} vs transformers {ref_loss:.6f} on {n} targets (context {c}, "
      f"add_special_tokens {doc['add_special_tokens']})")
results["eval"] = {"hif8lab": doc, "transformers_loss": ref_loss, "targets": n,
                   "transformers_tokens_per_s": n / torch_eval_s}

# 3. Greedy text on 5 prompts.
prompts = ["The capital of France is", "Water boils at a temperature of",
           "The largest planet in our solar system is", "def fibonacci(n):",
           "Once upon a time, in a small village,"]
same = 0
for p in prompts:
    enc = tok(p, return_tensors="pt")
    with torch.no_grad():
        g = model.generate(**enc, max_new_tokens=24, do_sample=False)
    want = tok.decode(g[0][enc["input_ids"].shape[1]:], skip_special_tokens=False)
    got = run(["sample", gguf_path, "--prompt", p, "--tokens", "24", "--temperature", "0",
               "--backend", "cpu"])
    got = got[len(p):]
    got = got[:-1] if got.endswith("\n") else got  # the newline `sample` ends with
    ok = got == want
    same += ok
    print(f"  {'=' if ok else '≠'} {p!r}: hif8lab {got!r} / transformers {want!r}")
check("greedy_text", same == len(prompts), f"{same} of {len(prompts)} prompts identical")

# 4. Speed beside transformers (2 threads): generation and eval.
bench = json.loads(run(["--threads", "2", "bench", "sample", gguf_path, "--prompt-tokens", "64",
                        "--tokens", "64", "--json"]))
prompt_ids = torch.tensor([tok("The history of science is the study of how people came to understand the natural world. " * 8)["input_ids"][:64]])
with torch.no_grad():
    model.generate(prompt_ids, max_new_tokens=2, do_sample=False)
    t0 = time.time()
    model(prompt_ids)
    prompt_s = time.time() - t0
    t0 = time.time()
    g = model.generate(prompt_ids, max_new_tokens=64, min_new_tokens=64, do_sample=False)
    gen_s = time.time() - t0
torch_gen = (g.shape[1] - 64) / max(gen_s - prompt_s, 1e-9)
results["sample"] = {"hif8lab": bench, "transformers_prompt_tokens_per_s": 64 / prompt_s,
                     "transformers_generate_tokens_per_s": torch_gen}
ratio = bench["generate_tokens_per_s"] / torch_gen
print(f"  generation: hif8lab {bench['generate_tokens_per_s']:.1f} tokens/s, transformers {torch_gen:.1f} "
      f"({ratio:.2f}x); prompt: hif8lab {bench['prompt_tokens_per_s']:.0f}, transformers {64 / prompt_s:.0f} tokens/s; "
      f"hif8lab peak resident {bench['peak_rss_bytes'] / 2**30:.2f} GiB")
ev_ratio = doc["tokens_per_s"] / results["eval"]["transformers_tokens_per_s"]
print(f"  eval: hif8lab {doc['tokens_per_s']:.0f} tokens/s, transformers {results['eval']['transformers_tokens_per_s']:.0f} "
      f"({ev_ratio:.2f}x)")
results["ratios"] = {"generate": ratio, "eval": ev_ratio}
# 5. Knowledge probes: `hif8lab probe` on the shipped general-knowledge set against the same
#    scoring in transformers (lm-eval-harness style: the context as tokenizer(context) encodes
#    it, the choice as the tokens that context + " " + choice adds; sum of log-probabilities).
probe = json.loads(run(["probe", gguf_path, "--backend", "cpu", "--json"]))
tsv = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "assets", "probes",
                   "general-knowledge.tsv")
rows = [l.rstrip("\n").split("\t") for l in open(tsv, encoding="utf-8") if l.strip() and not l.startswith("#")]
t0 = time.time()
right = []
with torch.no_grad():
    for _, context, *choices in rows:
        ctx = tok(context)["input_ids"]
        scores = []
        for choice in choices:
            whole = tok(context + " " + choice)["input_ids"]
            cont = whole[len(ctx):] if whole[:len(ctx)] == ctx and len(whole) > len(ctx) \
                else tok(" " + choice, add_special_tokens=False)["input_ids"]
            seq = ctx + cont
            lp = torch.log_softmax(model(torch.tensor([seq[:-1]])).logits[0].double(), -1)
            tgt = torch.tensor(seq[len(ctx):])
            scores.append(float(lp[torch.arange(len(ctx) - 1, len(seq) - 1), tgt].sum()))
        right.append(all(scores[0] > s for s in scores[1:]))
probe_s = time.time() - t0
marks = probe["marks"]["acc"]
ours = [(int(marks[i // 4], 16) >> (3 - i % 4)) & 1 == 1 for i in range(len(rows))]
differ = sum(a != b for a, b in zip(ours, right))
ref_acc = sum(right) / len(right)
check("probe_accuracy", differ <= 3 and abs(probe["acc"] - ref_acc) <= 0.005,
      f"general knowledge acc: hif8lab {probe['acc']:.4f} [{probe['acc_interval'][0]:.3f}, "
      f"{probe['acc_interval'][1]:.3f}] vs transformers {ref_acc:.4f} on {len(rows)} items; "
      f"{differ} items differ; hif8lab {probe['tokens_per_s']:.0f} tokens/s, transformers "
      f"{probe_s:.0f} s")
results["probe"] = {"hif8lab": probe, "transformers_acc": ref_acc, "items_differ": differ,
                    "transformers_s": probe_s}

results["transformers_peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
with open(out_json, "w") as fh:
    json.dump(results, fh, indent=1)
sys.exit(1 if failed else 0)
