"""The shipped general-knowledge probe set as an lm-evaluation-harness task, and the judge
that compares lm-eval's per-item results with `hif8lab probe`'s.

    python scripts/lm_eval_probe_task.py task DIR       # writes DIR/probes.jsonl + the YAML
    python scripts/lm_eval_probe_task.py judge SAMPLES.jsonl PROBE.json

The task scores each choice as " " + choice after the context (lm-eval's default
target_delimiter, the same continuation `hif8lab probe` scores), 0-shot, acc and acc_norm.
"""

import json
import sys
from pathlib import Path

TSV = Path(__file__).resolve().parent.parent / "assets" / "probes" / "general-knowledge.tsv"

YAML = """task: hif8lab_general_knowledge
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{context}}}}"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: "{{{{answer}}}}"
target_delimiter: " "
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
  - metric: acc_norm
    aggregation: mean
    higher_is_better: true
metadata:
  version: 1.0
"""


def items():
    rows = []
    for line in TSV.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        f = line.split("\t")
        rows.append({"cluster": f[0], "context": f[1], "choices": f[2:], "answer": 0})
    return rows


def write_task(out: Path):
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "probes.jsonl", "w", encoding="utf-8") as f:
        for i, r in enumerate(items()):
            f.write(json.dumps({"id": i, **r}, ensure_ascii=False) + "\n")
    (out / "hif8lab_general_knowledge.yaml").write_text(YAML.format(data=out / "probes.jsonl"))


def unpack(text, n):
    bits = []
    for ch in text:
        v = int(ch, 16)
        bits.extend(bool(v >> (3 - i) & 1) for i in range(4))
    return bits[:n]


def norm_best(lls, lengths):
    scores = [l / n for l, n in zip(lls, lengths)]
    return scores.index(max(scores))


def judge(samples: Path, probe: Path):
    """Item by item: lm-eval's acc and acc_norm against hif8lab probe's marks.

    acc must agree on every item. acc_norm divides each choice's log-likelihood by a length,
    and the two tools count it differently: lm-eval by the choice's characters (Python's len
    of "Tirana"), hif8lab by the UTF-8 bytes of the continuation it scores, delimiter
    included (" Tirana"). The judge recomputes both conventions from lm-eval's own
    log-likelihoods: lm-eval's must reproduce lm-eval's marks and hif8lab's must reproduce
    hif8lab's, on every item; the items where the two conventions pick differently are
    counted."""
    rows = sorted((json.loads(l) for l in open(samples, encoding="utf-8")), key=lambda r: r["doc_id"])
    doc = json.loads(probe.read_text())
    n = doc["items"]
    if len(rows) != n:
        sys.exit(f"judge: {samples} has {len(rows)} items, {probe} {n}")
    acc = unpack(doc["marks"]["acc"], n)
    acc_norm = unpack(doc["marks"]["acc_norm"], n)
    acc_diff, lm_conv_fails, hif_conv_fails, conventions_differ = [], [], [], []
    for r, a, an in zip(rows, acc, acc_norm):
        lls = [float(x[0]) for x in r["filtered_resps"]]
        choices, target = r["doc"]["choices"], int(r["target"])
        if bool(r["acc"]) != a:
            acc_diff.append(r["doc_id"])
        lm = norm_best(lls, [len(c) for c in choices]) == target
        hif = norm_best(lls, [len((" " + c).encode("utf-8")) for c in choices]) == target
        if lm != bool(r["acc_norm"]):
            lm_conv_fails.append(r["doc_id"])
        if hif != an:
            hif_conv_fails.append(r["doc_id"])
        if lm != hif:
            conventions_differ.append(r["doc_id"])
    report = {
        "items": n,
        "acc_differs": acc_diff,
        "acc_norm_lm_eval_convention_fails": lm_conv_fails,
        "acc_norm_hif8lab_convention_fails": hif_conv_fails,
        "acc_norm_conventions_differ": conventions_differ,
        "lm_eval_acc": sum(r["acc"] for r in rows) / n,
        "hif8lab_acc": sum(acc) / n,
        "lm_eval_acc_norm": sum(r["acc_norm"] for r in rows) / n,
        "hif8lab_acc_norm": sum(acc_norm) / n,
    }
    print(json.dumps(report, indent=1))
    if acc_diff or lm_conv_fails or hif_conv_fails:
        sys.exit("judge: lm-eval and hif8lab probe disagree beyond the length convention")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "task":
        write_task(Path(sys.argv[2]).resolve())
    elif len(sys.argv) == 4 and sys.argv[1] == "judge":
        judge(Path(sys.argv[2]), Path(sys.argv[3]))
    else:
        sys.exit(__doc__)
