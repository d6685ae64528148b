"""The optimizers' rules across their symbols, registered with lib/config/rules.py:
SPAM's (lib/optim/Kconfig.spam) clipping cannot start against a zero second
moment, and the no-clipping window fits between two resets; a custom optimizer
class is importable and takes its keywords. Torch-free unless a custom class is
configured: it runs on every configuration loaded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lib.config.rules import rule

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig


@rule
def check_spam_start(run: RunConfig) -> list[str]:
    """Clipping must not start while the second moment is still zero."""
    skip = run.SPAM_CLIP_SKIP_STEPS  # None unless SPAM's clipping is on
    if skip is not None and skip < 2 and not run.SPAM_CLIP_SPARE_UNSEEN:
        return [
            f"CONFIG_SPAM_CLIP_SKIP_STEPS={skip} clips call 1 against a zero second "
            f"moment, which sets every gradient entry to 0; use 2 or more, or set "
            f"CONFIG_SPAM_CLIP_SPARE_UNSEEN=y"
        ]
    return []


@rule
def check_spam_schedule(run: RunConfig) -> list[str]:
    """SPAM's no-clipping window fits between two resets.

    Not refused, though each makes SPAM act less than its name says: a run
    shorter than SPAM_INTERVAL (no reset, as in every tiny run at the paper's
    500) or than SPAM_CLIP_SKIP_STEPS (no clipping), a run ending inside the
    warmup after a reset (the field's reference, 10000 steps with resets
    every 500, resets on its last call) and a warmup longer than the interval
    (the authors' launcher). The SPAM symbols' help says so."""
    skip = run.SPAM_CLIP_SKIP_STEPS  # None unless SPAM's clipping is on
    interval = run.SPAM_INTERVAL  # None unless SPAM's resets are on
    if skip is not None and interval is not None and skip >= interval:
        return [
            f"CONFIG_SPAM_CLIP_SKIP_STEPS={skip} must be below CONFIG_SPAM_INTERVAL="
            f"{interval}: no call would ever be clipped; use SPAM_CLIP_SKIP_STEPS="
            f"{min(20, interval - 1)}"
        ]
    return []


@rule
def check_custom_optimizer(run: RunConfig) -> list[str]:
    """OPTIMIZER_CUSTOM_CLASS names an importable torch.optim.Optimizer subclass whose
    constructor takes lr, the keywords given and (unless 0) weight_decay."""
    if run.OPTIMIZER_CUSTOM_CLASS is None:  # hidden: no custom optimizer runs
        return []
    from lib.optim.custom import check

    return check(run.optim)
