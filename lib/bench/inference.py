"""Inference figures of a trained model: at the end of a run (INFERENCE_BENCH)
and for a finished one (`make bench-inference`), into its metrics.json.

At batch 1, for each INFERENCE_BENCH_LENGTHS prompt of T tokens (clipped to
the block size): the prefill latency (start_generation on the prompt), decode
tokens/s (INFERENCE_BENCH_DECODE_TOKENS greedy continue_generation calls of
one token each, lib/model/interface.py) and the generation cache after T
tokens: generation_bytes(T), the family's own count in the weights' dtype,
and on CUDA the memory the state really holds (under bf16 autocast about half
the count for attention caches, whose keys and values are then bf16). Each
length is run once to warm up, then REPEATS times, synchronised on a GPU; the
medians are kept. The model runs as it trained, on the run's device under its
autocast (lib/speed/precision.py), in one autocast region per length, so
the bf16 copies of the weights are made once, as a server keeping bf16
weights would. Torch is imported inside the functions that measure: the
length check runs wherever a configuration is loaded.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from lib.config.run_config import RunConfig
    from lib.model.interface import LanguageModel
    from lib.speed.precision import Precision

SECTION = "inference"  # metrics.json's key
REPEATS = 5  # timed runs per length after the warm-up; medians are reported
MAX_LENGTH = 1 << 20
Log = Callable[[str], None]


class Interrupted(Exception):
    """A stop signal arrived while measuring: the run ends without the figures."""


def parse_lengths(text: str) -> list[int]:
    """INFERENCE_BENCH_LENGTHS ("128 512") -> its distinct lengths, ascending."""
    lengths = set()
    for word in text.replace(",", " ").split():
        if not word.isdigit() or not 1 <= int(word) <= MAX_LENGTH:
            raise ValueError(
                f'CONFIG_INFERENCE_BENCH_LENGTHS="{text}": "{word}" is not a '
                f"whole number of tokens from 1 to {MAX_LENGTH}"
            )
        lengths.add(int(word))
    if not lengths:
        raise ValueError(
            'CONFIG_INFERENCE_BENCH_LENGTHS is empty: give prompt lengths such as "128 512"'
        )
    return sorted(lengths)


def check_lengths(run: RunConfig) -> list[str]:
    """The problem with INFERENCE_BENCH_LENGTHS, if any (a rule checked on load)."""
    try:
        parse_lengths(run.INFERENCE_BENCH_LENGTHS)
    except ValueError as err:
        return [str(err)]
    return []


def plan_lengths(lengths: list[int], decode_tokens: int, block_size: int) -> tuple[list[int], int]:
    """(prompt lengths, decoded tokens) that fit the block: decoding takes at
    most half of it, and a prompt ends where the decoded tokens still fit."""
    if block_size < 2:
        raise ValueError(f"block size {block_size}: no room for a prompt and a decoded token")
    decode = min(decode_tokens, block_size // 2)
    return sorted({min(t, block_size - decode) for t in lengths}), decode


def _sync(device: torch.device) -> float:
    """perf_counter once the device has finished its queued work."""
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()
    return time.perf_counter()


def _decode(model: LanguageModel, logits: torch.Tensor, state: Any, tokens: int) -> None:
    """Greedy decoding: each step feeds the previous step's most likely token."""
    for _ in range(tokens):
        logits, state = model.continue_generation(logits[:, -1:, :].argmax(dim=-1), state)


def _times(
    model: LanguageModel, precision: Precision, prompt: torch.Tensor, decode: int
) -> tuple[float, float]:
    """Median (prefill seconds, decode seconds) over REPEATS after a warm-up."""
    device = prompt.device
    prefill: list[float] = []
    decoding: list[float] = []
    with precision.autocast():
        for i in range(REPEATS + 1):
            t0 = _sync(device)
            logits, state = model.start_generation(prompt)
            t1 = _sync(device)
            _decode(model, logits, state, decode)
            t2 = _sync(device)
            if i:  # the first is the warm-up
                prefill.append(t1 - t0)
                decoding.append(t2 - t1)
    return statistics.median(prefill), statistics.median(decoding)


def _held_bytes(model: LanguageModel, precision: Precision, prompt: torch.Tensor) -> int | None:
    """CUDA memory the generation state holds after the prompt; None elsewhere.

    The last prompt token goes through continue_generation: a prefill cache may
    still hold views of its projection's output (GPT-2 keeps q's third of it
    alive), the first decoded token replaces them by the cache proper. Leaving
    the autocast region frees its bf16 weight copies before the count."""
    import torch

    device = prompt.device
    if device.type != "cuda":
        return None
    _sync(device)
    before = torch.cuda.memory_allocated(device)
    with precision.autocast():
        logits, state = model.start_generation(prompt[:, :-1] if prompt.size(1) > 1 else prompt)
        if prompt.size(1) > 1:
            logits, state = model.continue_generation(prompt[:, -1:], state)
    _sync(device)
    held = torch.cuda.memory_allocated(device) - before - logits.untyped_storage().nbytes()
    del state
    return held


def measure(
    model: LanguageModel,
    precision: Precision,
    lengths: list[int],
    decode_tokens: int,
    log: Log = print,
) -> dict[str, Any]:
    """The inference section: one entry per prompt length (module docstring)."""
    import torch

    from lib.run.signals import STOP

    device = next(model.parameters()).device
    prompts, decode = plan_lengths(lengths, decode_tokens, model.config.block_size)
    if prompts != lengths or decode != decode_tokens:
        log(
            f"inference: block size {model.config.block_size}: prompt lengths {lengths} -> "
            f"{prompts}, decoded tokens {decode_tokens} -> {decode}"
        )
    was_training = model.training
    model.eval()
    rows = []
    try:
        with torch.no_grad():
            for length in prompts:
                if STOP.signal:
                    raise Interrupted(f"{STOP.signal} received: measurement stopped")
                gen = torch.Generator().manual_seed(length)
                prompt = torch.randint(model.config.vocab_size, (1, length), generator=gen)
                prompt = prompt.to(device)
                prefill, decoding = _times(model, precision, prompt, decode)
                rows.append(
                    {
                        "prompt_tokens": length,
                        "prefill_ms": 1000 * prefill,
                        "prefill_tokens_per_sec": length / prefill,
                        "decode_tokens_per_sec": decode / decoding,
                        "decode_ms_per_token": 1000 * decoding / decode,
                        "cache_bytes": model.generation_bytes(length),
                        "cache_bytes_measured": _held_bytes(model, precision, prompt),
                    }
                )
    finally:
        model.train(was_training)
    return {
        "device": str(device),
        "dtype": precision.dtype,
        "batch": 1,
        "decode_tokens": decode,
        "repeats": REPEATS,
        "lengths_requested": lengths,
        "lengths": rows,
    }


def load_model(run_dir: Path, checkpoint: str, device: torch.device) -> tuple[LanguageModel, int]:
    """A run's ckpt_<checkpoint>.pt as its family's model on device, and its step."""
    from lib.model import registry
    from lib.run.checkpoint import load_checkpoint

    state = load_checkpoint(run_dir / f"ckpt_{checkpoint}.pt", device)
    return registry.model_from_state(state).to(device), state["step"]


def record(run_dir: Path, section: dict[str, Any]) -> Path:
    """Put the section into the run's metrics.json (rewritten atomically)."""
    from lib.atomic import write_json_atomic

    path = Path(run_dir) / "metrics.json"
    try:
        metrics = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise ValueError(f"{path}: cannot add the inference figures ({err})") from None
    if not isinstance(metrics, dict):
        raise ValueError(f"{path}: not a JSON object; the inference figures are not added")
    metrics[SECTION] = section
    write_json_atomic(path, metrics)
    return path


def bench_run(run_dir: Path, checkpoint: str, run: RunConfig, log: Log = print) -> dict[str, Any]:
    """`make bench-inference`: a run's checkpoint measured and recorded."""
    from lib.speed.precision import resolve_device, resolve_precision

    lengths = parse_lengths(run.INFERENCE_BENCH_LENGTHS)
    device = resolve_device(run.DEVICE)
    model, step = load_model(run_dir, checkpoint, device)
    section = measure(
        model, resolve_precision(run.speed, device), lengths, run.INFERENCE_BENCH_DECODE_TOKENS, log
    )
    section["source"] = f"ckpt_{checkpoint}.pt (step {step})"
    record(run_dir, section)
    return section


def _finished_normally(run_dir: Path) -> bool:
    """Completed, or stopped by TRAIN_MAX_TIME: not diverged, not stopped by a
    signal (a job being requeued must leave now), per the metrics.json just written."""
    try:
        metrics = json.loads((run_dir / "metrics.json").read_text())
    except (OSError, ValueError):
        return False
    return isinstance(metrics, dict) and (
        metrics.get("status") == "completed"
        or (metrics.get("status") == "stopped" and not metrics.get("stop_signal"))
    )


def _is_sharded(model: LanguageModel) -> bool:
    """FSDP's parameters are DTensors: rank 0 alone cannot run the model."""
    return any(type(p).__name__ == "DTensor" for p in model.parameters())


def inference_at_end(
    run: RunConfig, model: LanguageModel, run_dir: Path, log: Log
) -> dict[str, Any] | None:
    """At the end of training: measure the trained model, as INFERENCE_BENCH
    says, and record it in metrics.json; the section, or None when not measured.

    Call it once metrics.json holds the final status. Only rank 0 measures. A
    failure never fails the run: it is logged and recorded as the section's
    "error", and `make bench-inference` can measure again."""
    import torch.distributed as dist

    from lib.run.signals import Abandoned

    if dist.is_available() and dist.is_initialized() and dist.get_rank() != 0:
        return None
    run_dir = Path(run_dir)
    device = next(model.parameters()).device
    if (
        run.INFERENCE_BENCH == "n"
        or (run.INFERENCE_BENCH == "auto" and device.type == "cpu")
        or not _finished_normally(run_dir)
    ):
        return None
    section: dict[str, Any]
    try:
        lengths = parse_lengths(run.INFERENCE_BENCH_LENGTHS)
        source = "final weights"
        if _is_sharded(model):
            model, step = load_model(run_dir, "best", device)
            source = f"ckpt_best.pt (step {step})"
        from lib.speed.precision import resolve_precision

        section = measure(
            model,
            resolve_precision(run.speed, device),
            lengths,
            run.INFERENCE_BENCH_DECODE_TOKENS,
            log,
        )
        section["source"] = source
    except (Exception, Abandoned) as err:  # Abandoned: a repeated stop signal
        section = {"error": f"{type(err).__name__}: {err}"}
        log(
            f"inference figures not measured: {section['error']}; `make bench-inference "
            f"RUN={run_dir}` measures the finished run"
        )
    try:
        record(run_dir, section)
    except (OSError, ValueError) as err:
        log(f"inference figures not recorded: {err}")
    if "lengths" in section:
        log(describe(section))
    return section


def describe(section: dict[str, Any]) -> str:
    """The section as a small table for the log and the terminal."""
    head = (
        f"inference on {section['device']} ({section['dtype']}), batch 1, "
        f"{section['decode_tokens']} decoded tokens, median of {section['repeats']}"
        f" [{section.get('source', 'model')}]"
    )
    lines = [
        head,
        f"{'prompt':>8}{'prefill ms':>12}{'prefill tok/s':>15}{'decode tok/s':>14}"
        f"{'cache KiB':>12}{'measured KiB':>14}",
    ]
    for r in section["lengths"]:
        held = r["cache_bytes_measured"]
        lines.append(
            f"{r['prompt_tokens']:>8}{r['prefill_ms']:>12.2f}"
            f"{r['prefill_tokens_per_sec']:>15,.0f}{r['decode_tokens_per_sec']:>14,.1f}"
            f"{r['cache_bytes'] / 1024:>12,.1f}"
            f"{'-' if held is None else f'{held / 1024:,.1f}':>14}"
        )
    return "\n".join(lines)
