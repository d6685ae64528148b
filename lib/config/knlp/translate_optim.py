"""The optimizer part of a knlp file's translation (lib/config/knlp/translate.py):
what knlp's code fixes for each optimizer that runs (in a test matrix, every
enabled one), its AdamWSPAM schedule counted in steps, and AdamWPrune's pruning as
its runner runs it."""

from __future__ import annotations

from collections import defaultdict

import kconfiglib

from lib.config.knlp.code import (
    ADAMWPRUNE_DENSE,
    CODE_VALUES,
    KNLP_MAGNITUDE_FREQUENCY,
    KNLP_METHODS,
    KNLP_OPTIMIZERS,
    KNLP_PRUNE_FREQUENCY,
    KNLP_PRUNE_RAMP_END,
    KNLP_PRUNE_SPARSITY,
    KNLP_PRUNE_WARMUP,
    KNLP_SPAM_RUNNER_DEFAULT,
    KNLP_VARIANT_ITERS,
    MATRIX_SHARED,
    MOVEMENT_RULE,
    OPTIMIZER_OF,
    knlp_methods,
)


def unquote(value: str) -> str:
    """A .config string value without its quotes (other values as they are)."""
    return value[1:-1] if len(value) > 1 and value[0] == value[-1] == '"' else value


def knlp_value(sym: kconfiglib.Symbol) -> str | None:
    """knlp's resolved value as .config text; None when the symbol is inactive."""
    if sym.orig_type in (kconfiglib.BOOL, kconfiglib.TRISTATE):
        return kconfiglib.TRI_TO_STR[sym.tri_value]
    return sym.str_value if sym.config_string else None


class OptimizerRules:
    """Mixed into translate.py's _Translation, which provides what is declared here."""

    knlp: kconfiglib.Kconfig
    features: dict[str, list[str]]
    assigned: dict[str, tuple[str, str, str]]

    def assign(self, ours: str, value: str, knlp_name: str, where: str = "") -> None:
        raise NotImplementedError

    def _origin(self, name: str) -> str:
        raise NotImplementedError

    def optimizer_rules(self) -> None:
        """knlp's optimizer semantics no single row states."""
        knlp = self.knlp.syms
        self.own: dict[str, dict[str, str]] = defaultdict(dict)  # optimizer -> ours -> value
        if knlp["OPTIMIZER_ENABLED_ADAMWSPAM"].tri_value == 2:
            self.spam_schedule()
        if self.knlp.eval_string("OPTIMIZER_ENABLED_ADAMWPRUNE && OPTIMIZER_MODE_SINGLE") == 2:
            if self.knlp.eval_string("PRUNING_MODE_SINGLE && PRUNING_SELECT_STATE") == 2:
                self.prune_schedule()
            # PRUNING_MODE_NONE: its runner trains AdamWPrune dense, as PRUNING_MODE_NONE
            # does here (AdamWPrune's base optimizer with code.py's AdamWPrune values)
        if self.knlp.eval_string("OPTIMIZER_ENABLED_ADAMWPRUNE && OPTIMIZER_MODE_MULTIPLE") == 2:
            methods = knlp_methods(self.knlp)
            multiple = knlp["PRUNING_MODE_MULTIPLE"].tri_value == 2
            if "none" in methods and multiple:  # its runner trains AdamWPrune dense there
                self.assign("PRUNING_ENABLE_NONE_ADAMWPRUNE", "y", ADAMWPRUNE_DENSE, "knlp code")
            if "state" in methods:
                self.prune_schedule(matrix=True)
        for method in ("magnitude", "movement"):
            if method in knlp_methods(self.knlp):
                self.mask_schedule(method)
        self.code_values()
        self.own_settings()

    def set_own(self, key: str, ours: str, value: str, label: str) -> None:
        """One optimizer's or pruning method's own value in a test matrix
        (MATRIX_OPTIMIZER_SETTINGS, MATRIX_PRUNING_SETTINGS)."""
        earlier = self.own[key].get(ours)
        if earlier is not None and earlier != value:
            self.features[f"two values of {ours} for knlp's {key}"].append(label)
            return
        self.own[key][ours] = value

    def own_settings(self) -> None:
        """The per-optimizer and per-method values, as this project's matrix takes them."""
        for symbol, keys, label in (
            (
                "MATRIX_OPTIMIZER_SETTINGS",
                KNLP_OPTIMIZERS,
                "knlp's values per optimizer (lib/optimizers.py, its runner)",
            ),
            (
                "MATRIX_PRUNING_SETTINGS",
                KNLP_METHODS,
                "knlp's values per pruning method (its pruners, its runner)",
            ),
        ):
            words = [
                f"{k}:" + ",".join(f"{n}={v}" for n, v in self.own[k].items())
                for k in keys
                if self.own.get(k)
            ]
            if words:
                self.assign(symbol, " ".join(words), label, "knlp code")

    def code_values(self) -> None:
        """What knlp's code uses, not its Kconfig, for each optimizer that runs (in a
        test matrix, every enabled one). Where a matrix's optimizers need different
        values of one symbol, the value most use is the shared one and each other
        optimizer gets its own (MATRIX_OPTIMIZER_SETTINGS)."""
        # ours -> value -> [(label, optimizer or None)]
        wanted: dict[str, dict[str, list[tuple[str, str | None]]]] = defaultdict(dict)
        for when, label, pairs in CODE_VALUES:
            if self.knlp.eval_string(when) == 2:
                for ours_name, value in pairs:
                    wanted[ours_name].setdefault(value, []).append((label, OPTIMIZER_OF.get(when)))
        for ours_name, by_value in wanted.items():
            shared = max(by_value, key=lambda value: len(by_value[value]))  # ties: the first
            others = [e for value, entries in by_value.items() if value != shared for e in entries]
            if any(optimizer is None for _, optimizer in others):
                self.features[MATRIX_SHARED].append(f"{ours_name}={'/'.join(by_value)}")
                continue
            self.assign(ours_name, shared, by_value[shared][0][0], "knlp code")
            for value, entries in by_value.items():
                for label, optimizer in entries:
                    if value != shared and optimizer is not None:
                        self.set_own(optimizer, ours_name, value, label)

    def spam_schedule(self) -> None:
        """knlp's reset interval and LR re-warmup, in steps. Its counter moves twice per
        step: it resets at step k when 2k is a multiple of SPAM_INTERVAL, and re-warms
        the LR over the steps j with 2j < SPAM_WARMUP_STEPS, by (1 - cos(pi 2j / W)) / 2
        (lib/optim/knlp_spam.py uses pi j / N): exact when W is even."""
        knlp = self.knlp.syms
        value = {}
        for name in ("SPAM_INTERVAL", "SPAM_WARMUP_STEPS"):  # absent from its .config:
            raw = knlp_value(knlp[name])  # gpt2/train.py's default
            value[name] = int(raw) if raw else KNLP_SPAM_RUNNER_DEFAULT
        interval, warmup = value["SPAM_INTERVAL"], value["SPAM_WARMUP_STEPS"]
        if interval % 2:  # reset when 2k is a multiple of an odd interval: every interval
            self.assign(
                "SPAM_INTERVAL", str(interval), "SPAM_INTERVAL", self._origin("SPAM_INTERVAL")
            )
        else:
            self.assign(
                "SPAM_INTERVAL",
                str(interval // 2),
                "SPAM_INTERVAL/2",
                self._origin("SPAM_INTERVAL"),
            )
        if warmup % 2:
            self.features[
                "knlp's LR re-warmup over an odd SPAM_WARMUP_STEPS (it ends mid-step in "
                "knlp's half-step count; this project's is whole steps)"
            ].append(f"SPAM_WARMUP_STEPS={warmup}")
        else:
            self.assign(
                "SPAM_WARMUP_STEPS",
                str(warmup // 2),
                "SPAM_WARMUP_STEPS/2",
                self._origin("SPAM_WARMUP_STEPS"),
            )

    def prune_schedule(self, matrix: bool = False) -> None:
        """AdamWPrune's pruning as knlp's runner runs it (names.py, above KNLP_PRUNE_*).
        Its update after 0-based iteration i is ours after step i + 1, so our warmup
        and ramp end are knlp's + 1 and our progress equals its; our updates fall at
        warmup + 1 + k*50, its at multiples of 50: the same steps when its warmup is a
        multiple of 50. After the ramp it re-chooses masks at the target; a pruned
        weight scores 0 there, below every live score (bitter5 aside), so that keeps
        every mask: this project's stop at the ramp end is the same run. In a test
        matrix the schedule is state pruning's own (MATRIX_PRUNING_SETTINGS), each of
        its variants a run, and the sparsities are the matrix's levels."""
        knlp = self.knlp.syms
        variants = [
            f"bitter{n}"
            for n in range(10)
            if knlp[f"GPT2_ADAMWPRUNE_VARIANT_BITTER{n}"].tri_value == 2
        ] or ["bitter0"]
        names = [f"GPT2_ADAMWPRUNE_VARIANT_{v.upper()}" for v in variants]
        iters = int(knlp_value(knlp["GPT2_MAX_ITERS"]) or 0)
        if iters == 10000:  # knlp's trainer lengthens it for some variants
            lengths = {KNLP_VARIANT_ITERS.get(v, iters) for v in variants}
        else:
            lengths = {iters}
        if len(variants) > 1 and not matrix:
            self.features[
                "several AdamWPrune variants in one file (knlp's runner trains one run each)"
            ] += names
            return
        if len(lengths) > 1:
            self.features[
                "AdamWPrune variants of different lengths in one test matrix (knlp's trainer "
                "lengthens some 10,000-iteration runs)"
            ] += names
            return
        if "bitter5" in variants:
            self.features[
                "knlp's bitter5 masks, chosen afresh at each update (its scores go negative, "
                "so pruned weights can return; masks here only grow)"
            ].append("GPT2_ADAMWPRUNE_VARIANT_BITTER5")
            return
        warmup = int(knlp_value(knlp["PRUNING_WARMUP"]) or KNLP_PRUNE_WARMUP)
        if warmup % KNLP_PRUNE_FREQUENCY or warmup >= KNLP_PRUNE_RAMP_END:
            self.features[
                f"knlp's AdamWPrune updates at multiples of {KNLP_PRUNE_FREQUENCY} with a "
                f"PRUNING_WARMUP that is not one below {KNLP_PRUNE_RAMP_END}"
            ].append(f"PRUNING_WARMUP={warmup}")
            return
        (length,) = lengths
        if length <= KNLP_PRUNE_RAMP_END:
            self.features[
                f"knlp's AdamWPrune ramp to step {KNLP_PRUNE_RAMP_END} in a run that ends "
                "before it (below the target sparsity)"
            ].append(f"GPT2_MAX_ITERS={length}")
            return
        label = "knlp's AdamWPrune schedule (lib/optimizers.py, gpt2/train.py)"
        schedule = {
            "PRUNING_WARMUP": str(warmup + 1),
            "PRUNING_RAMP_END": str(KNLP_PRUNE_RAMP_END + 1),
            "PRUNING_FREQUENCY": str(KNLP_PRUNE_FREQUENCY),
            "PRUNING_SCHEDULE": "cubic_late",
            "PRUNING_SCOPE": "global",
            "PRUNING_HEAD": "y",
        }
        if matrix:
            if length != iters:
                schedule["GPT2_MAX_ITERS"] = str(length)
            for ours, value in schedule.items():  # its state cells', not its dense one
                self.set_own("state", ours, value, label)
            for n in range(10):  # the runner's variant list, each one a run
                value = "y" if f"bitter{n}" in variants else "n"
                self.assign(f"ADAMWPRUNE_ENABLE_BITTER{n}", value, f"BITTER{n}", "knlp runner")
            return
        if length != iters:
            self.assigned["GPT2_MAX_ITERS"] = (str(length), "knlp code", f"{variants[0]} max_iters")
        sparsity = knlp_value(knlp["TARGET_SPARSITY"]) or KNLP_PRUNE_SPARSITY
        self.assign(
            "PRUNING_TARGET_SPARSITY", sparsity, "TARGET_SPARSITY", self._origin("TARGET_SPARSITY")
        )
        self.assign(
            "PRUNING_WARMUP", str(warmup + 1), "PRUNING_WARMUP+1", self._origin("PRUNING_WARMUP")
        )
        self.assign(f"ADAMWPRUNE_VARIANT_{variants[0].upper()}", "y", names[0], "knlp runner")
        for ours, value in list(schedule.items())[1:]:
            if ours in ("PRUNING_SCHEDULE", "PRUNING_SCOPE"):
                ours, value = f"{ours}_{value.upper()}", "y"
            self.assign(ours, value, label, "knlp code")

    def mask_schedule(self, method: str) -> None:
        """knlp's magnitude or movement pruning as its GPT-2 trainer runs it (code.py,
        above KNLP_MAGNITUDE_FREQUENCY and MOVEMENT_RULE): its update after 0-based
        iteration i is ours after step i + 1, at every step past its warmup, so our
        warmup and ramp end are knlp's + 1 and our frequency 1. Magnitude: past the
        ramp it re-chooses at the target from weights the masks have zeroed, which
        keeps every mask: ours stop at the ramp end (cubic_late). Movement: knlp's rule
        (PRUNING_MOVEMENT_KNLP) on a linear ramp, in a test matrix through
        MATRIX_PRUNING_SETTINGS, as magnitude's runs there keep their own schedule. In a
        test matrix the sparsities are the matrix's levels; alone, the runner's
        TARGET_SPARSITY (else 0.9)."""
        knlp = self.knlp.syms
        warmup = int(knlp_value(knlp["PRUNING_WARMUP"]) or KNLP_PRUNE_WARMUP)
        iters = int(knlp_value(knlp["GPT2_MAX_ITERS"]) or 0)
        if warmup >= KNLP_PRUNE_RAMP_END:
            self.features[
                f"knlp's {method} pruning with a PRUNING_WARMUP not below its ramp's end "
                f"({KNLP_PRUNE_RAMP_END}: it jumps to the target there)"
            ].append(f"PRUNING_WARMUP={warmup}")
            return
        if iters <= KNLP_PRUNE_RAMP_END:
            self.features[
                f"knlp's {method} pruning ramp to step {KNLP_PRUNE_RAMP_END} in a run that "
                "ends before it (below the target sparsity)"
            ].append(f"GPT2_MAX_ITERS={iters}")
            return
        label = f"knlp's {method} pruning schedule (lib/{method}_pruning.py, gpt2/train.py)"
        if knlp["PRUNING_MODE_SINGLE"].tri_value == 2:
            sparsity = knlp_value(knlp["TARGET_SPARSITY"]) or KNLP_PRUNE_SPARSITY
            self.assign(
                "PRUNING_TARGET_SPARSITY",
                sparsity,
                "TARGET_SPARSITY",
                self._origin("TARGET_SPARSITY"),
            )
        self.assign(
            "PRUNING_WARMUP", str(warmup + 1), "PRUNING_WARMUP+1", self._origin("PRUNING_WARMUP")
        )
        for ours, value in (
            ("PRUNING_RAMP_END", str(KNLP_PRUNE_RAMP_END + 1)),
            ("PRUNING_FREQUENCY", str(KNLP_MAGNITUDE_FREQUENCY)),
            ("PRUNING_SCOPE_GLOBAL", "y"),
            ("PRUNING_HEAD", "y"),
        ):
            self.assign(ours, value, label, "knlp code")
        if method == "magnitude":
            self.assign("PRUNING_SCHEDULE_CUBIC_LATE", "y", label, "knlp code")
            return
        self.assign("PRUNING_MOVEMENT_KNLP", "y", MOVEMENT_RULE, "knlp code")
        if knlp["PRUNING_MODE_SINGLE"].tri_value == 2:
            self.assign("PRUNING_SCHEDULE_LINEAR", "y", label, "knlp code")
        else:
            self.set_own("movement", "PRUNING_SCHEDULE", "linear", label)
