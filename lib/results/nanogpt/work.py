"""The work both sides do (nanoGPT's character-level Shakespeare at 4 x 4 x 128,
block 64, batch 12, 2,000 iterations, no compile), each side's command, the data
nanoGPT reads (our prepared token files, linked) and what its log says."""

from __future__ import annotations

import pickle
import re
import statistics
from pathlib import Path
from typing import Any

from lib.atomic import write_atomic
from lib.data.meta import SPLIT_FILES, dataset_dir_name, is_prepared, load_meta
from lib.data.sources import DataError

DEFCONFIG = "gpt2-shakespeare-char"
DATASET = dataset_dir_name("shakespeare", "char")  # the folder `make` looks for in DATA_DIR
ITERS = 2000
BATCH_SIZE, BLOCK_SIZE = 12, 64
TOKENS_PER_ITER = BATCH_SIZE * BLOCK_SIZE
EVAL_ITERS = 20  # nanoGPT's validation batches per evaluation; the defconfig's TRAIN_EVAL_ITERS
NANOGPT_DATA = Path("data/shakespeare_char")  # nanoGPT's dataset='shakespeare_char'
# Its config's out_dir; --always_save_checkpoint=True makes the file hold the last iteration.
NANOGPT_CKPT = Path("out-shakespeare-char/ckpt.pt")
NANOGPT_SEED = 1337  # torch.manual_seed(1337 + seed_offset) in its train.py, rank 0's
# A config file nanoGPT's configurator executes in train.py's namespace before
# train.py seeds torch: the only way in without editing its code.
SEED_CONFIG = Path("config/nanogpt_compare_seed.py")
SEED_CONFIG_TEXT = """# Written by kconfig-llm's scripts/nanogpt_compare.py (--seeds): train.py seeds
# torch with {fixed} (+ its DDP rank) in its code; this shifts that seed by {shift}.
import torch as _torch

_manual_seed = _torch.manual_seed


def _shifted_seed(seed):
    print(f"nanogpt_compare: torch.manual_seed({{seed}}) -> {{seed + {shift}}}", flush=True)
    return _manual_seed(seed + {shift})


_torch.manual_seed = _shifted_seed
"""
SEED_LINE = re.compile(r"^nanogpt_compare: torch\.manual_seed\((\d+)\) -> (-?\d+)$", re.M)

# nanoGPT's log lines (its train.py): one per iteration at --log_interval=1, and one per
# evaluation, printed at the start of the iteration whose time then includes it.
ITER_LINE = re.compile(r"^iter (\d+): loss \S+, time ([\d.]+)ms", re.M)
EVAL_LINE = re.compile(r"^step (\d+): train loss ([\d.]+), val loss ([\d.]+)", re.M)


class CompareError(ValueError):
    """Data nanoGPT cannot read or a run that failed (docs without their markers: BlockError)."""


def nanogpt_args(iters: int = ITERS, seeded: bool = False) -> list[str]:
    """nanoGPT README's CPU command for shakespeare_char, at our block and batch
    (seeded: with the config file that sets its seed)."""
    return [
        "config/train_shakespeare_char.py",
        *([str(SEED_CONFIG)] if seeded else []),
        "--device=cpu",
        "--compile=False",
        f"--eval_iters={EVAL_ITERS}",
        "--log_interval=1",
        f"--block_size={BLOCK_SIZE}",
        f"--batch_size={BATCH_SIZE}",
        "--n_layer=4",
        "--n_head=4",
        "--n_embd=128",
        f"--max_iters={iters}",
        f"--lr_decay_iters={iters}",
        "--dropout=0.0",
        "--always_save_checkpoint=True",
    ]


def ours_args(
    data: Path,
    run_name: str,
    iters: int = ITERS,
    seed: int | str | None = None,
    ours_set: str = "",
) -> list[str]:
    """`make` on the configured defconfig, reading the prepared folder data (`seed`: a
    TRAIN_SEED, or a placeholder for the record's command; `ours_set`: more SET=
    assignments, to measure one of ours' options against nanoGPT)."""
    extra = [] if iters == ITERS else [f"SCALE_ITERS={iters}"]
    settings = f"DATA_DIR={data.resolve().parent}" + ("" if seed is None else f" TRAIN_SEED={seed}")
    settings += f" {ours_set}" if ours_set else ""
    return [f"SET={settings}", f"RUN_NAME={run_name}", *extra]


def check_ours_set(value: str) -> str:
    """--ours-set's assignments, refused unless each is SYMBOL=value."""
    bad = [a for a in value.split() if not re.fullmatch(r"[A-Z][A-Z0-9_]*=\S+", a)]
    if bad:
        raise CompareError(
            f"--ours-set {value!r}: {', '.join(bad)} is not SYMBOL=value (as `make SET=` "
            f"takes them, without CONFIG_, e.g. CPU_MALLOC_KEEP=n)"
        )
    return " ".join(value.split())


def char_vocabulary(data: Path) -> list[str]:
    """The characters of our prepared character data, in token order, after checking
    that nanoGPT can read its token files as they are (uint16, the folder complete)."""
    try:
        meta = load_meta(data)
    except DataError as err:
        raise CompareError(str(err)) from None
    if data.name != DATASET:
        raise CompareError(f"{data}: `make` reads DATA_DIR/{DATASET}; give that folder")
    if not is_prepared(data):
        raise CompareError(f"{data}: its token files do not match its meta.json")
    if meta["dtype"] != "uint16":
        raise CompareError(f"{data} holds {meta['dtype']} tokens; nanoGPT reads uint16")
    tokenizer = meta["tokenizer"]
    chars = tokenizer.get("chars") if isinstance(tokenizer, dict) else None
    if not isinstance(chars, list) or len(chars) != meta["vocab_size"]:
        raise CompareError(f"{data} is not character data with its characters listed")
    return chars


def prepare_nanogpt_data(nanogpt: Path, data: Path) -> dict[str, Any]:
    """nanoGPT's shakespeare_char folder: our token files linked, meta.pkl written."""
    chars = char_vocabulary(data)
    folder = nanogpt / NANOGPT_DATA
    folder.mkdir(parents=True, exist_ok=True)
    for name in SPLIT_FILES.values():
        link = folder / name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to((data / name).resolve())
    meta = {"vocab_size": len(chars), "itos": dict(enumerate(chars))}
    meta["stoi"] = {c: i for i, c in enumerate(chars)}
    write_atomic(folder / "meta.pkl", lambda f: f.write(pickle.dumps(meta)))
    found = load_meta(data)
    return {
        "folder": str(data.resolve()),
        "vocab_size": len(chars),
        "train_tokens": found["train_tokens"],
        "val_tokens": found["val_tokens"],
        "checksums": found.get("checksums"),
    }


def parse_nanogpt_log(text: str) -> dict[str, Any]:
    """ms/iter over the iterations without an evaluation (nor iteration 0, which also
    builds the model's first graph), and the last validation loss."""
    times = {int(m[1]): float(m[2]) for m in ITER_LINE.finditer(text)}
    evals = [(int(m[1]), float(m[3])) for m in EVAL_LINE.finditer(text)]
    if not times or not evals:
        raise CompareError("nanoGPT's log holds no `iter N: ... time Xms` or `step N:` lines")
    excluded = sorted({0} | {step for step, _ in evals})
    timed = [ms for it, ms in times.items() if it not in excluded]
    if not timed:
        raise CompareError("nanoGPT's log holds no iteration without an evaluation")
    ms = statistics.fmean(timed)
    return {
        "steps": len(times),
        "timed_iters": len(timed),
        "excluded_iters": [it for it in excluded if it in times],
        "ms_per_iter": ms,
        "tokens_per_sec": TOKENS_PER_ITER * 1000 / ms,
        "final_val_loss": evals[-1][1],
        "val_loss": {"iters": [s for s, _ in evals], "values": [v for _, v in evals]},
    }


def nanogpt_seed(text: str, seed: int | None) -> int:
    """The seed nanoGPT's log shows it ran at: its fixed one, or the one the seed config
    shifted it to (checked: exactly one shift, to `seed`)."""
    shifts = [(int(m[1]), int(m[2])) for m in SEED_LINE.finditer(text)]
    if seed is None:
        if shifts:
            raise CompareError("nanoGPT's log shows a seed shift that was not asked for")
        return NANOGPT_SEED
    if [to for _, to in shifts] != [seed]:
        raise CompareError(
            f"nanoGPT was to run at seed {seed}, but its log shows the seed shifts "
            f"{shifts or 'none'}: does its train.py still call torch.manual_seed once, "
            f"after reading its config files ({SEED_CONFIG})?"
        )
    return seed
