"""Stops by real signals at random and at chosen moments, then resumes: every
resumed run must equal the uninterrupted one bit for bit.

For tests/lib/run/test_signals.py. This process imports torch once, installs the
stop handlers as scripts/train.py does first thing, and forks every training
process from there (a real process running scripts/train.py's main on a run
folder, as the matrix starts runs; a fork saves the 3 s torch import each).
The parent does no torch work, so the forks are safe. A trial signals its
process with kill(2): after a random delay from the parent, or from inside the
child at a chosen point (while drawing a training batch, inside the optimizer
step, during an evaluation, while writing a checkpoint, while the run is being
set up), or twice (at once: one stop; 2 s apart: stop at once, nothing saved).
It then resumes the run in a new process and compares metrics.json.

Usage: python tests/lib/run/signal_driver.py <work dir> <random trials> <seed>
Prints one JSON line per trial, then {"done": ...}.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from lib.run import signals  # noqa: E402

signals.STOP.install()  # as train.py does: every fork inherits the handlers

import torch._dynamo  # noqa: E402,F401 (the optimizer imports it lazily: 1 s in every fork)

import lib.run.checkpointer as checkpointer_module  # noqa: E402
import lib.train.build as build_module  # noqa: E402
import scripts.train as train  # noqa: E402
from lib.config.kconfig import open_tree  # noqa: E402
from lib.config.run_config import load_run_config, write_outputs  # noqa: E402
from lib.data.loader import BatchLoader  # noqa: E402
from tests.lib.conftest import synthetic_corpus  # noqa: E402

SETTINGS = {
    "GPT2_N_LAYER": "2",
    "GPT2_N_HEAD": "2",
    "GPT2_N_EMBD": "32",
    "GPT2_BLOCK_SIZE": "32",
    "BATCH_SIZE": "8",
    "GPT2_MAX_ITERS": "12",
    "GPT2_EVAL_INTERVAL": "4",
    "TRAIN_EVAL_ITERS": "4",
    "TRAIN_LOG_INTERVAL": "1",
    "GPT2_WARMUP_STEPS": "3",
    "LEARNING_RATE": "3e-3",
    "GPT2_MIN_LR": "3e-4",
    "GPT2_DROPOUT": "0.1",
    "GPT2_GRADIENT_ACCUMULATION": "2",
    "DEVICE_CPU": "y",
    "GPT2_DATASET_CUSTOM": "y",
    "DATA_TOKENIZER_CHAR": "y",
}
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)


def run_config(work: Path):
    corpus = synthetic_corpus(work / "corpus.txt", lines=600)
    config = work / ".config"
    write_outputs(open_tree(), config, work / "config.py")
    settings = {
        **SETTINGS,
        "DATA_CUSTOM_PATH": str(corpus),
        "DATA_DIR": str(work / "data"),
        "RESULTS_DIR": str(work / "results"),
    }
    return load_run_config([f"SET={' '.join(f'{k}={v}' for k, v in settings.items())}"], config)


def new_run(work: Path, run, name: str) -> Path:
    path = work / "results" / name
    path.mkdir(parents=True)
    (path / "config.txt").write_text(run.config_text)
    return path


# -- inside a child: signals sent at chosen points --------------------------------


def _signal_self(sig: int, after: float = 0.0) -> None:
    time.sleep(after)
    os.kill(os.getpid(), sig)  # the handler runs here, before the next line


def _at(point: str, nth: int, sig: int, again: str | None) -> None:
    """Signal this process at the nth passage through point; again: "double"
    signals twice at once (one stop delivered twice), "same" a second time
    there after the repeat window, "checkpoint_write" at the next checkpoint
    write after the repeat window (both: stop at once)."""
    seen: dict[str, int] = {}
    fired = False

    def passing(where: str) -> None:
        nonlocal fired
        seen[where] = seen.get(where, 0) + 1
        if not fired and where == point and seen[where] == nth:
            fired = True
            _signal_self(sig)
            if again == "double":
                _signal_self(sig)
            if again == "same":
                _signal_self(sig, after=signals.REPEAT_WINDOW_S + 0.02)
        elif fired and again == where:
            _signal_self(sig, after=signals.REPEAT_WINDOW_S + 0.02)

    real_next = BatchLoader.next_batch

    def next_batch(self, *args, **kwargs):
        passing(f"{self.split}_batch")
        return real_next(self, *args, **kwargs)

    BatchLoader.next_batch = next_batch

    real_build = build_module.build_optimizer

    def build_optimizer(*args, **kwargs):
        passing("setup")
        optimizer = real_build(*args, **kwargs)
        optimizer.register_step_pre_hook(lambda *_: passing("optimizer_step"))
        return optimizer

    build_module.build_optimizer = build_optimizer

    real_save = checkpointer_module.save_checkpoint

    def save_checkpoint(*args, **kwargs):
        passing("checkpoint_write")
        return real_save(*args, **kwargs)

    checkpointer_module.save_checkpoint = save_checkpoint


def fork_run(run_dir: Path, hook: dict | None = None) -> int:
    pid = os.fork()
    if pid:
        return pid
    code = 98
    try:
        fd = os.open(run_dir / "child.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        signals.REPEAT_WINDOW_S = 0.2  # the same rule, sooner: a test need not wait 2 s
        if hook:
            _at(**hook)
        code = train.main([f"RUN_DIR={run_dir}"])
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    except BaseException:
        traceback.print_exc()
        code = 99
    finally:
        os._exit(code)


def wait(pid: int) -> int:
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def metrics(run_dir: Path) -> dict:
    return json.loads((run_dir / "metrics.json").read_text())


def trial(
    work: Path,
    run,
    ref: dict,
    name: str,
    sig: int,
    delay: float | None = None,
    hook: dict | None = None,
) -> dict:
    run_dir = new_run(work, run, name)
    started = time.monotonic()
    pid = fork_run(run_dir, hook)
    if delay is not None:
        time.sleep(delay)
        os.kill(pid, sig)
    first = wait(pid)
    out = {
        "trial": name,
        "signal": signal.Signals(sig).name,
        "delay_s": delay,
        "hook": hook and {k: v for k, v in hook.items() if k != "sig"},
        "first_exit": first,
        "first_s": round(time.monotonic() - started, 3),
    }
    if (run_dir / "metrics.json").exists():
        stopped = metrics(run_dir)
        out.update(
            stopped_status=stopped.get("status"),
            stopped_at=stopped.get("iterations"),
            stop_signal=stopped.get("stop_signal"),
            reason=stopped.get("reason"),
        )
    out["resume_exit"] = wait(fork_run(run_dir)) if first != 0 else None
    final = metrics(run_dir)
    out.update(
        final_status=final["status"],
        iterations=final["iterations"],
        final_val_loss=final["final_val_loss"],
        same_train_losses=final["train_loss"] == ref["train_loss"],
        same_val_losses=final["val_loss"] == ref["val_loss"],
        resumed_from=[e["step"] for e in final["events"] if e["event"] == "resumed"],
    )
    return out


def main(work: Path, trials: int, seed: int) -> None:
    run = run_config(work)
    # The reference twice: the first also prepares the data; the second is timed.
    for name in ("ref0", "ref"):
        started = time.monotonic()
        code = wait(fork_run(new_run(work, run, name)))
        assert code == 0, (name, code, (work / "results" / name / "child.log").read_text()[-3000:])
    duration = time.monotonic() - started
    ref = metrics(work / "results" / "ref")
    print(
        json.dumps(
            {
                "reference_s": round(duration, 3),
                "final_val_loss": ref["final_val_loss"],
                "same_as_first_reference": ref["train_loss"]
                == metrics(work / "results" / "ref0")["train_loss"],
            }
        ),
        flush=True,
    )
    rng = random.Random(seed)
    for i in range(trials):
        sig = SIGNALS[i % len(SIGNALS)]
        delay = round(rng.uniform(0.0, 0.95 * duration), 3)
        print(json.dumps(trial(work, run, ref, f"random{i}", sig, delay=delay)), flush=True)
    # Batches: 2 per training step (accumulation), 4 per evaluation (steps 4, 8, 12).
    points = [
        ("setup", 1, None),
        ("train_batch", rng.randint(1, 16), None),
        ("optimizer_step", rng.randint(1, 8), None),
        ("val_batch", rng.randint(1, 8), None),
        ("checkpoint_write", 1, None),
        ("train_batch", rng.randint(1, 16), "double"),
        ("optimizer_step", 2, "same"),
        ("optimizer_step", rng.randint(5, 7), "same"),
        ("val_batch", 6, "checkpoint_write"),
    ]
    for i, (point, nth, again) in enumerate(points):
        sig = SIGNALS[i % len(SIGNALS)]
        hook = {"point": point, "nth": nth, "sig": sig, "again": again}
        print(json.dumps(trial(work, run, ref, f"at{i}_{point}", sig, hook=hook)), flush=True)
    print(json.dumps({"done": True}), flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))
