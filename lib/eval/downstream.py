"""`make lm-eval` and LM_EVAL_AT_END: lm-evaluation-harness tasks on a run,
their scores into the run's eval.json (lib/run/eval_record.py, "lm_eval").

Tasks are resolved and their data loaded before the model is: an unknown
name, or a hub task that cannot be had, stops at once with what to do. One
short metadata request per hub dataset (HUB_TIMEOUT_S) says whether the hub
answers, as for the other evaluation sets (lib/eval/sets.py); the datasets
package would otherwise retry for minutes. With HF_HUB_OFFLINE (or
HF_DATASETS_OFFLINE) set, nothing is asked: the datasets cache serves what it
holds, and a task it lacks fails at once.
"""

from __future__ import annotations

import difflib
import functools
import math
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lib.data.sources import HUB_TIMEOUT_S, DataError, hub_offline, offline_reason, unset_advice
from lib.paths import from_root
from lib.run.eval_record import now_iso, write_lm_eval

if TYPE_CHECKING:
    from lm_eval.tasks import TaskManager

    from lib.eval.harness import KconfigLM

Log = Callable[[str], None]
# dataset_path values that name a datasets builder for local files, not a hub dataset
LOCAL_BUILDERS = {"json", "csv", "text", "parquet", "arrow", "pandas"}
BOOTSTRAP_ITERS = 100_000  # lm-eval's default, for metrics without a closed-form stderr


def task_names(text: str) -> list[str]:
    """ "hellaswag, arc_easy" -> ["hellaswag", "arc_easy"]: commas or spaces."""
    return list(dict.fromkeys(n for n in re.split(r"[,\s]+", text) if n))


def task_manager(include_path: str = "", defaults: bool = True) -> TaskManager:
    """lm-eval's task index: its own tasks (defaults) and a folder of YAML files.
    Kept for the process: indexing lm-eval's own tasks takes seconds."""
    folder = None
    if include_path:
        folder = from_root(Path(include_path).expanduser())
        if not folder.is_dir():
            raise DataError(
                f'CONFIG_LM_EVAL_INCLUDE_PATH="{include_path}": {folder} is not a '
                f'folder of lm-eval task YAML files; fix it, or set it to ""'
            )
    return _index(str(folder) if folder else "", defaults)


@functools.lru_cache(maxsize=8)
def _index(folder: str, defaults: bool) -> TaskManager:
    from lm_eval.tasks import TaskManager

    return TaskManager(include_path=[folder] if folder else None, include_defaults=defaults)


def _expand(manager: TaskManager, names: list[str]) -> list[str]:
    """Names the index knows (glob patterns expanded); ValueError for the others."""
    out, unknown = [], []
    for name in names:
        if name in manager.task_index:
            out.append(name)
        elif any(c in name for c in "*?[") and (matches := manager.match_tasks([name])):
            out += matches
        else:
            unknown.append(name)
    if unknown:
        hints = {n: difflib.get_close_matches(n, manager.all_tasks, 3) for n in unknown}
        raise ValueError(
            "unknown lm-eval task(s): "
            + "; ".join(
                n + (f" (did you mean {', '.join(h)}?)" if h else "") for n, h in hints.items()
            )
            + ". `.venv/bin/lm-eval ls tasks` lists them; tasks of your own go in "
            "CONFIG_LM_EVAL_INCLUDE_PATH"
        )
    return list(dict.fromkeys(out))


def hub_sources(manager: TaskManager, names: list[str]) -> dict[str, str]:
    """{task: hub dataset} for every task the names stand for, groups and tags
    expanded; tasks over local files (json, csv... builders, a folder) are left out."""
    from lm_eval.tasks._index import Kind

    index, found, seen = manager.task_index, {}, set()

    def visit(name: str, override: dict[str, Any] | None = None) -> None:
        if name in seen:
            return
        seen.add(name)
        entry = index.get(name)
        if entry is not None and entry.kind == Kind.TAG:
            for other in list(index.values()):
                if name in other.tags:
                    visit(other.name)
            return
        cfg = {**((entry.cfg if entry else None) or {}), **(override or {})}
        if entry is not None and entry.kind == Kind.GROUP:
            for child in cfg.get("task", []):
                if isinstance(child, dict) and isinstance(child.get("task"), str):
                    visit(child["task"], child)
                elif isinstance(child, str):
                    visit(child)
            return
        path = cfg.get("dataset_path")
        if (
            isinstance(path, str)
            and path not in LOCAL_BUILDERS
            and not Path(path).expanduser().exists()
        ):
            found[name] = path

    for name in names:
        visit(name)
    return found


def _unreachable(sources: dict[str, str], why: str) -> DataError:
    tasks, paths = ", ".join(sources), ", ".join(sorted(set(sources.values())))
    return DataError(
        f"lm-eval task(s) {tasks} read {paths} from the Hugging Face hub, which "
        f"cannot be used here: {why}. Connect to the network{unset_advice()}: "
        f"once fetched, the datasets cache serves them offline. Or evaluate a "
        f"local task: a YAML file over a local JSONL file in "
        f"CONFIG_LM_EVAL_INCLUDE_PATH (tests/assets/lm_eval_task holds two)."
    )


def check_hub(sources: dict[str, str]) -> None:
    """DataError at once when the hub does not answer for a dataset the tasks need."""
    if not sources or hub_offline():
        return
    from huggingface_hub import HfApi

    for path in sorted(set(sources.values())):
        try:
            HfApi().dataset_info(path, timeout=HUB_TIMEOUT_S)
        except Exception as exc:  # DNS, timeout, 404, gated: all fatal here
            needing = {t: p for t, p in sources.items() if p == path}
            raise _unreachable(needing, f"{type(exc).__name__}: {exc}") from exc


def load_tasks(
    names: list[str], include_path: str = "", defaults: bool = True
) -> tuple[TaskManager, dict[str, Any]]:
    """The task index and lm-eval's loaded tasks ({"tasks", "groups", "group_map"}),
    data included. Only the include folder is indexed when it has every name
    (lm-eval's own thousands of YAML files take seconds to index)."""
    manager = None
    if include_path:
        local = task_manager(include_path, defaults=False)
        if all(n in local.task_index for n in names):
            manager = local
    manager = manager or task_manager(include_path, defaults)
    names = _expand(manager, names)
    sources = hub_sources(manager, names)
    check_hub(sources)
    try:
        return manager, manager.load(names)
    except Exception as exc:  # the datasets package's errors have no common type
        why = f"{type(exc).__name__}: {exc}"
        if sources and hub_offline():
            raise _unreachable(
                sources, f"{offline_reason()} and the datasets cache does not hold them ({why})"
            ) from exc
        raise DataError(f"cannot load lm-eval task(s) {', '.join(names)}: {why}") from exc


def _number(x: Any) -> float | None:
    ok = isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
    return float(x) if ok else None


def scores(results: dict[str, Any]) -> dict[str, Any]:
    """simple_evaluate's results as eval.json's lm_eval entries: tasks {task:
    {metric: {value, stderr}}} (a metric under a filter other than lm-eval's
    "none" is "metric,filter"), groups {group: its tasks}, samples, versions, n_shot."""
    tasks: dict[str, dict[str, dict[str, float | None]]] = {}
    for task, res in results["results"].items():
        metrics = {}
        for key, value in res.items():
            metric, comma, filt = key.partition(",")
            if comma and not metric.endswith("_stderr"):
                name = metric if filt == "none" else key
                metrics[name] = {
                    "value": _number(value),
                    "stderr": _number(res.get(f"{metric}_stderr,{filt}")),
                }
        tasks[task] = metrics
    samples = {t: n.get("effective") for t, n in results.get("n-samples", {}).items()}
    return {
        "tasks": tasks,
        "groups": dict(results.get("group_subtasks", {})),
        "samples": samples,
        "versions": dict(results.get("versions", {})),
        "n_shot": dict(results.get("n-shot", {})),
    }


def evaluate(
    lm: KconfigLM,
    manager: TaskManager,
    loaded: dict[str, Any],
    limit: int = 0,
    bootstrap_iters: int = BOOTSTRAP_ITERS,
) -> dict[str, Any]:
    """lm_eval.simple_evaluate on loaded tasks; the eval.json section less its model."""
    import lm_eval

    children = {c for kids in loaded["group_map"].values() for c in kids}
    top = [g for n, g in loaded["groups"].items() if n not in children]
    top += [t for n, t in loaded["tasks"].items() if n not in children]
    started = time.perf_counter()
    results = lm_eval.simple_evaluate(
        model=lm,
        tasks=top,
        task_manager=manager,
        limit=limit or None,
        log_samples=False,
        bootstrap_iters=bootstrap_iters,
    )
    assert results is not None, "a single process is always rank 0"
    return {
        "created": now_iso(),
        "harness": f"lm-eval {lm_eval.__version__}",
        "settings": {
            "limit": limit,
            "batch_size": lm.batch_size,
            "bootstrap_iters": bootstrap_iters,
        },
        "seconds": round(time.perf_counter() - started, 3),
        **scores(results),
    }


def evaluate_run_tasks(
    run_dir: Path, checkpoint: str, cfg: Any, tasks: str | None = None, log: Log = print
) -> dict[str, Any]:
    """`make lm-eval`: the run's checkpoint on tasks (default CONFIG_LM_EVAL_TASKS),
    with cfg's LM_EVAL_*, EVAL_BATCH_SIZE, device and precision; writes eval.json."""
    from lib.eval.harness import KconfigLM, load_run_model
    from lib.speed.precision import resolve_device, resolve_precision

    names = task_names(cfg.LM_EVAL_TASKS if tasks is None else tasks)
    if not names:
        raise ValueError(
            "no lm-eval tasks to run: name them with TASKS=hellaswag,arc_easy "
            "or in CONFIG_LM_EVAL_TASKS"
        )
    manager, loaded = load_tasks(names, cfg.LM_EVAL_INCLUDE_PATH)
    log(f"lm-eval: {len(loaded['tasks'])} task(s) ready: {', '.join(loaded['tasks'])}")
    model, tokenizer, info = load_run_model(run_dir, checkpoint)
    device = resolve_device(cfg.DEVICE)
    precision = resolve_precision(cfg.speed, device)
    lm = KconfigLM(
        model=model,
        tokenizer=tokenizer,
        batch_size=cfg.EVAL_BATCH_SIZE,
        device=str(device),
        autocast=precision.autocast,
    )
    section = {
        "model": info,
        "device": device.type,
        "dtype": precision.dtype,
        **evaluate(lm, manager, loaded, cfg.LM_EVAL_LIMIT),
    }
    section["settings"]["tasks"] = names
    for task, metrics in section["tasks"].items():
        shown = ", ".join(
            f"{m} {v['value']:.4f}" + (f" ± {v['stderr']:.4f}" if v["stderr"] is not None else "")
            for m, v in metrics.items()
            if v["value"] is not None
        )
        log(f"lm-eval {task}: {shown}")
    log(f"wrote {write_lm_eval(run_dir, section)}")
    return section


def evaluate_baseline_tasks(
    folder: Path, cfg: Any, tasks: str | None = None, log: Log = print
) -> dict[str, Any]:
    """`make lm-eval BASELINE_MODEL=<folder>`: a Hugging Face causal LM folder on
    the tasks through lm-eval's own Hugging Face model (HFLM), which published
    figures come from; read as `make eval-baseline` reads it (safetensors only,
    CONFIG_EVAL_TRUST_REMOTE_CODE), scores into <results>/baseline-<name>/eval.json."""
    from lib.config.run_config import value_or
    from lib.eval.baseline import baseline_dir, load_baseline
    from lib.speed.precision import DTYPES, resolve_device, resolve_precision

    names = task_names(cfg.LM_EVAL_TASKS if tasks is None else tasks)
    if not names:
        raise ValueError(
            "no lm-eval tasks to run: name them with TASKS= or in CONFIG_LM_EVAL_TASKS"
        )
    try:
        from lm_eval.models.huggingface import HFLM
    except ImportError as err:  # HFLM imports accelerate, which lm-eval does not require
        raise RuntimeError(
            f"lm-eval's Hugging Face model cannot be loaded ({err}); install the "
            f"package it names into .venv (pip install accelerate)"
        ) from None
    manager, loaded = load_tasks(names, cfg.LM_EVAL_INCLUDE_PATH)
    log(f"lm-eval: {len(loaded['tasks'])} task(s) ready: {', '.join(loaded['tasks'])}")
    trust = bool(value_or(cfg.EVAL_TRUST_REMOTE_CODE, False))
    model, tokenizer, info = load_baseline(folder, trust)
    device = resolve_device(cfg.DEVICE)
    precision = resolve_precision(cfg.speed, device)
    lm = HFLM(
        pretrained=model.model.to(device),
        tokenizer=tokenizer.tokenizer,
        batch_size=cfg.EVAL_BATCH_SIZE,
        max_length=info["block_size"],
        mixed_precision_dtype=None if precision.dtype == "fp32" else DTYPES[precision.dtype],
    )
    section = {
        "model": info,
        "device": device.type,
        "dtype": precision.dtype,
        **evaluate(lm, manager, loaded, cfg.LM_EVAL_LIMIT),
    }
    section["settings"]["tasks"] = names
    out = baseline_dir(folder, cfg)
    log(f"wrote {write_lm_eval(out, section)}")
    return section
