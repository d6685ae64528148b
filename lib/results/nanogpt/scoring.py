"""Both final models scored by one estimator: ours' last checkpoint and nanoGPT's
(loaded into our GPT-2, weights only), each on every token of the validation split
in disjoint windows of the block, where each trainer's own figure averages a few
random batches."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

from lib.data.meta import SPLIT_FILES, load_meta
from lib.results.nanogpt.work import CompareError

SCORE_BATCH = 64  # windows per forward when scoring the validation split


def whole_split_loss(model: Any, tokens: Any, block: int) -> float:
    """Mean cross-entropy (nats per token) of model over every token of a 1-D token
    tensor, in disjoint windows of `block` (each token scored once, with 0 to block-1
    tokens of context, as the random windows of both trainers' validation see them)."""
    from lib.eval.perplexity import sliding_window_nll

    model.eval()
    return sliding_window_nll(model, tokens, block, block, batch_size=SCORE_BATCH).loss


def ours_final_model(run_dir: Path, iters: int) -> Any:
    """The model of ours' last step (its ckpt_latest.pt)."""
    from lib.model.registry import model_from_state
    from lib.run.checkpoint import CheckpointError, load_checkpoint

    try:
        state = load_checkpoint(run_dir / "ckpt_latest.pt")
    except CheckpointError as err:
        raise CompareError(str(err)) from None
    if state["step"] != iters:
        raise CompareError(f"{run_dir}/ckpt_latest.pt is step {state['step']}, not {iters}")
    return model_from_state(state)


def nanogpt_final_model(path: Path, like: Any, iters: int) -> Any:
    """nanoGPT's checkpoint of its last iteration, in our GPT-2 (the same layers under the
    same names: a strict load proves it), after checking it is the configuration `like`
    was built with. Read weights-only: nothing in it is unpickled as code."""
    from gpt2.model import GPT2
    from lib.run.safeload import UnsafeCheckpoint, safe_load

    if not path.is_file():
        raise CompareError(f"nanoGPT saved no checkpoint at {path}")
    try:
        state = safe_load(path)
        args, step, weights = state["model_args"], state["iter_num"], state["model"]
    except (UnsafeCheckpoint, pickle.UnpicklingError, KeyError, TypeError) as err:
        raise CompareError(f"{path} is not a nanoGPT checkpoint this script reads: {err}") from None
    if step != iters:
        raise CompareError(f"{path} holds iteration {step}, not {iters}")
    config = like.config
    differ = {
        k: (v, getattr(config, k, None))
        for k, v in args.items()
        if k != "dropout" and getattr(config, k, None) != v
    }
    if differ or getattr(config, "attention", "vanilla") != "vanilla":
        raise CompareError(f"{path}: nanoGPT's model differs from ours (theirs, ours): {differ}")
    model = GPT2(config)
    try:
        model.load_state_dict(weights, strict=True)
    except RuntimeError as err:
        raise CompareError(f"{path}: its weights do not fit our GPT-2: {err}") from None
    return model


def score_finals(run_dir: Path, ckpt: Path, data: Path, iters: int) -> dict[str, Any]:
    """Both final models' loss on every validation token, by the same code."""
    import numpy as np
    import torch

    ours = ours_final_model(run_dir, iters)
    theirs = nanogpt_final_model(ckpt, ours, iters)
    meta = load_meta(data)
    val = np.fromfile(data / SPLIT_FILES["val"], dtype=meta["dtype"]).astype(np.int64)
    tokens, block = torch.from_numpy(val), ours.config.block_size
    return {
        "ours": whole_split_loss(ours, tokens, block),
        "nanogpt": whole_split_loss(theirs, tokens, block),
    }
