"""python -m hif8lab.torch.train refuses what would train wrong, lose data or run code from a
checkpoint: exit 2 naming the flag or the file, nothing deleted, no traceback."""

import pickle

import pytest
import torch

from conftest import train


@pytest.mark.parametrize("flag,value,says", [
    ("--global-batch", "-2", "--global-batch must be at least 0"),
    ("--grad-clip", "-1", "--grad-clip must be a finite number > 0"),
    ("--lr", "nan", "--lr must be a finite number > 0"),
    ("--target", "-1", "--target must be a finite number > 0"),
    ("--roles", "A,X", "--roles 'A,X': expected some of A, W, G"),
    ("--micro-batch", "0", "--micro-batch must be at least 1"),
    ("--skip-first", "-1", "--skip-first must be at least 0"),
    ("--lr-warmup-frac", "1.5", "--lr-warmup-frac must be in [0, 1)"),
    ("--skip-first", "10", "nothing to quantize"),
])
def test_numeric_flags_are_refused_by_name(tmp_path, corpus, flag, value, says):
    r = train(tmp_path / "o", corpus, "--steps", "2", flag, value, check=False)
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert says in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]


def test_out_hf_never_deletes_a_folder_it_did_not_write(tmp_path, corpus):
    out = tmp_path / "run"
    # The run folder itself (or one around it) is refused before anything trains.
    r = train(out, corpus, "--steps", "2", "--out-hf", str(out), check=False)
    assert r.returncode == 2 and "the run folder" in r.stderr, r.stderr
    r = train(out, corpus, "--steps", "2", "--out-hf", str(tmp_path), check=False)
    assert r.returncode == 2 and "the run folder" in r.stderr, r.stderr
    # A folder of the user's is never replaced.
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    r = train(out, corpus, "--steps", "2", "--out-hf", str(mine), check=False)
    assert r.returncode == 2 and "did not write" in r.stderr, r.stderr
    assert (mine / "notes.txt").read_text() == "keep me"
    # Its own folder is replaced by a later run.
    hf = tmp_path / "hf"
    train(tmp_path / "run2", corpus, "--steps", "2", "--out-hf", str(hf))
    assert (hf / "config.json").exists() and (hf / ".hif8lab-out-hf").exists()
    train(tmp_path / "run3", corpus, "--steps", "2", "--out-hf", str(hf))
    assert (hf / "config.json").exists()


class _Boom:
    def __reduce__(self):
        return (print, ("ran code from a checkpoint",))


def test_resume_reads_checkpoints_as_data_and_refuses_changed_settings(tmp_path, corpus):
    out = tmp_path / "run"
    train(out, corpus, "--steps", "4", "--checkpoint-every", "2")
    # A changed run-defining flag is refused, naming it.
    r = train(out, corpus, "--steps", "6", "--resume", "--estimator", "most_recent", check=False)
    assert r.returncode == 2 and "--estimator" in r.stderr and "most_recent" in r.stderr, r.stderr
    r = train(out, corpus, "--steps", "6", "--resume", "--seed", "3", check=False)
    assert r.returncode == 2 and "--seed" in r.stderr, r.stderr
    # A tampered optimizer file holding a pickled callable is not executed: the newest
    # checkpoint is refused by name and the previous one resumes.
    newest = out / "checkpoints" / "step_4"
    with open(newest / "optimizer.pt", "wb") as f:
        pickle.dump(_Boom(), f)
    r = train(out, corpus, "--steps", "6", "--resume", check=False)
    assert "ran code from a checkpoint" not in r.stdout + r.stderr
    assert r.returncode == 0, r.stderr[-2000:]
    assert "optimizer.pt" in r.stderr and "earlier checkpoint" in r.stderr, r.stderr
    # A truncated model file beside its done.json: the same.
    step6 = out / "checkpoints" / "step_6"
    data = (step6 / "model.pt").read_bytes()
    (step6 / "model.pt").write_bytes(data[: len(data) // 3])
    r = train(out, corpus, "--steps", "8", "--resume", check=False)
    assert r.returncode == 0 and "model.pt" in r.stderr, r.stderr[-2000:]
    assert torch.load(out / "checkpoints" / "step_8" / "model.pt", weights_only=True)


def test_fuzz_the_trainers_numeric_flags():
    """Random values of every numeric flag: accepted, or refused by the up-front check naming
    the flag (InputError) — never another exception. No training runs."""
    import random

    from hif8lab.torch.train import InputError, check_numbers, parser

    rng = random.Random(7)
    flags = {"--steps": int, "--context": int, "--micro-batch": int, "--window": int,
             "--checkpoint-every": int, "--flush-every": int, "--trace-every": int,
             "--global-batch": int, "--skip-first": int, "--skip-last": int, "--warmup-steps": int,
             "--lr": float, "--target": float, "--grad-clip": float, "--weight-decay": float,
             "--lr-warmup-frac": float}
    specials = ["0", "-1", "1", "nan", "inf", "-inf", "1e308", "-0.0", "2", "1e-30"]
    refused = accepted = 0
    for _ in range(3000):
        argv = ["--model", "tiny:1,8,8,1,1,256", "--data", "x", "--out", "y"]
        for flag, kind in flags.items():
            if rng.random() < 0.3:
                v = rng.choice(specials) if rng.random() < 0.5 else (
                    str(rng.randint(-5, 5)) if kind is int else repr(rng.uniform(-2, 2)))
                if kind is int and not v.lstrip("-").isdigit():
                    continue
                argv.append(f"{flag}={v}")
        if rng.random() < 0.2:
            argv.append("--roles=" + rng.choice(["", "A", "A,X", "W,G", ",", "a"]))
        args = parser().parse_args(argv)
        try:
            check_numbers(args)
            accepted += 1
        except InputError as e:
            assert str(e).startswith("--"), e
            refused += 1
    assert accepted > 100 and refused > 100, (accepted, refused)


def test_one_writer_per_run_folder(tmp_path, corpus):
    """A second writer (another resume, or a run into the folder) is refused while the first
    holds the folder's lock — the flock on .lock that `hif8lab train` takes too."""
    import fcntl

    out = tmp_path / "run"
    train(out, corpus, "--steps", "2")
    with open(out / ".lock", "a+") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        f.write("12345\n")
        f.flush()
        r = train(out, corpus, "--steps", "4", "--resume", check=False)
        assert r.returncode == 2 and "being written by another process" in r.stderr, r.stderr
    # Released: the resume runs, and a fresh folder holding only a stale .lock is empty.
    train(out, corpus, "--steps", "4", "--resume")
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (fresh / ".lock").write_text("")
    train(fresh, corpus, "--steps", "2")
