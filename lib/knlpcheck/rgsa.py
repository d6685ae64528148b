"""RGSA's settings, knlp's side and ours, for scripts/check_knlp.sh (check.py).

knlp's side is read from its code at 041ec5f2, apart from the translation so
that a wrong one shows: gpt2/trainers/vanilla.py builds GPT2_RGSA from the
RGSA_* values of its .config (each int()/float() of the Kconfig value), and
gpt2/rgsa.py skips routing in dense mode (so random routing then does
nothing) and sizes chunks by compute_chunk_size. The effective chunk size at
the file's block size is compared too: ours comes from gpt2/rgsa.py itself.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, cast

from lib.config.run_config import RunConfig


def knlp_chunk(block: int, dynamic: bool, fixed: int, v: Callable[[str], Any]) -> int:
    """knlp's compute_chunk_size(block) for the resolved values."""
    if not dynamic:
        return fixed
    low, high = int(v("RGSA_CHUNK_SIZE_MIN")), int(v("RGSA_CHUNK_SIZE_MAX"))
    if v("RGSA_CHUNK_SIZE_SCHEDULE") == "power":
        size = int(round(block ** float(v("RGSA_CHUNK_SIZE_ALPHA"))))
    else:
        size = high
        for pair in (p for p in v("RGSA_CHUNK_SIZE_PIECEWISE").split(",") if ":" in p):
            if block <= int(pair.split(":")[0]):
                size = int(pair.split(":")[1])
                break
    size = min(max(size, low), high)
    rounding = v("RGSA_CHUNK_SIZE_ROUNDING")
    if rounding == "pow2" and size > 1:
        below = 1 << ((size - 1).bit_length() - 1)
        size = below if size - below <= 2 * below - size else 2 * below
    elif rounding == "multiple_of_8":
        size = max(8, round(size / 8) * 8)
    return max(1, size)


def knlp_rgsa(
    v: Callable[[str], Any], on: Callable[[str], bool], exp: dict[str, Any]
) -> dict[str, Any]:
    """What knlp's GPT2_RGSA is built with; {} for another attention."""
    if exp["attention"] != "rgsa":
        return {}
    block = exp["block"]
    dynamic = on("RGSA_DYNAMIC_CHUNKING")
    fixed = int(v("RGSA_CHUNK_SIZE"))
    return {
        "rgsa chunk": fixed,
        "rgsa routing dim": int(v("RGSA_ROUTING_DIM")),
        "rgsa top b": int(v("RGSA_TOP_B")),
        "rgsa window": int(v("RGSA_LOCAL_WINDOW")),
        "rgsa route stride": int(v("RGSA_ROUTE_STRIDE")),
        "rgsa cached layers": int(v("RGSA_CACHE_ROUTING_LAYERS")),
        "rgsa routing": (
            "dense"
            if on("RGSA_DENSE_MODE")
            else "random"
            if on("RGSA_RANDOM_ROUTING")
            else "learned"
        ),
        "rgsa dynamic": (
            (
                int(v("RGSA_CHUNK_SIZE_MIN")),
                int(v("RGSA_CHUNK_SIZE_MAX")),
                v("RGSA_CHUNK_SIZE_SCHEDULE"),
                float(v("RGSA_CHUNK_SIZE_ALPHA")),
                v("RGSA_CHUNK_SIZE_PIECEWISE"),
                v("RGSA_CHUNK_SIZE_ROUNDING"),
            )
            if dynamic
            else False
        ),
        "rgsa chunk at block": knlp_chunk(block, dynamic, fixed, v),
    }


def our_rgsa(run: RunConfig) -> dict[str, Any]:
    """The same from our RunConfig, the chunk size from gpt2/rgsa.py; {} for
    another attention."""
    if run.GPT2_ATTENTION != "rgsa":
        return {}
    dynamic = bool(run.GPT2_RGSA_DYNAMIC_CHUNKING)
    fields = {
        "rgsa_chunk_size": run.GPT2_RGSA_CHUNK_SIZE,
        "rgsa_dynamic_chunking": dynamic,
        "rgsa_chunk_size_min": run.GPT2_RGSA_CHUNK_SIZE_MIN,
        "rgsa_chunk_size_max": run.GPT2_RGSA_CHUNK_SIZE_MAX,
        "rgsa_chunk_schedule": run.GPT2_RGSA_CHUNK_SCHEDULE,
        "rgsa_chunk_size_alpha": run.GPT2_RGSA_CHUNK_SIZE_ALPHA,
        "rgsa_chunk_piecewise": run.GPT2_RGSA_CHUNK_PIECEWISE,
        "rgsa_chunk_rounding": run.GPT2_RGSA_CHUNK_ROUNDING,
    }
    from gpt2.rgsa import chunk_size as chunk

    return {
        "rgsa chunk": run.GPT2_RGSA_CHUNK_SIZE,
        "rgsa routing dim": run.GPT2_RGSA_ROUTING_DIM,
        "rgsa top b": run.GPT2_RGSA_TOP_B,
        "rgsa window": run.GPT2_RGSA_LOCAL_WINDOW,
        "rgsa route stride": run.GPT2_RGSA_ROUTE_STRIDE,
        "rgsa cached layers": run.GPT2_RGSA_CACHE_ROUTING_LAYERS,
        "rgsa routing": run.GPT2_RGSA_ROUTING,
        "rgsa dynamic": (
            tuple(fields[k] for k in list(fields)[2:]) if dynamic else False  # min ... rounding
        ),
        # chunk_size reads only these fields of a GPT2Config
        "rgsa chunk at block": chunk(run.GPT2_BLOCK_SIZE, cast(Any, SimpleNamespace(**fields))),
    }
