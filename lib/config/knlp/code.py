"""What knlp's GPT-2 runs use whatever its Kconfig says: values fixed in its code
(lib/optimizers.py create_optimizer, gpt2/train.py's argument defaults, its runner
scripts/run_test_matrix.py), read by lib/config/knlp/translate.py. Written from
knlp at the table's commit (lib/config/knlp/table.py)."""

from __future__ import annotations

import kconfiglib

# knlp's runner's matrix (scripts/run_test_matrix.py get_test_matrix): its optimizers,
# and the pruning methods of each mode (PRUNING_MODE_NONE: dense only)
KNLP_OPTIMIZERS = ("sgd", "adam", "adamw", "adamwadv", "adamwspam", "adamwprune")
KNLP_METHODS = ("none", "magnitude", "movement", "state")

# knlp's MLA family (gpt2/mla.py): gpt2/trainers/vanilla.py create_model builds it when
# ENABLE_MLA is on and MLA_VARIANT is not empty, before it looks at RGSA or GPT2_KNLP
# (translate.py knlp_mla; a file with RA+MLA as well is refused there)
IN_MLA = 'ENABLE_MLA && MLA_VARIANT != "" && !ENABLE_RA_MLA'


def knlp_methods(k: kconfiglib.Kconfig) -> list[str]:
    """The pruning methods knlp's runner crosses with the optimizers (its
    PRUNING_ENABLED_*, which the table leaves out where it derives them: y for
    PRUNING_ENABLE_* in multiple mode, PRUNING_SELECT_* in single mode)."""

    def on(name):
        return name in k.syms and k.syms[name].tri_value == 2

    if on("PRUNING_MODE_MULTIPLE"):
        return [m for m in KNLP_METHODS if on(f"PRUNING_ENABLE_{m.upper()}")]
    if on("PRUNING_MODE_SINGLE"):
        return [m for m in KNLP_METHODS if on(f"PRUNING_SELECT_{m.upper()}")]
    return ["none"]


# Which optimizer's hyper-parameters knlp uses (one optimizer per run)
# (in a test matrix, every enabled one: translate.py refuses the matrix when two
# of them need different values of one of our shared symbols, MATRIX_SHARED)
_ADAMW = "OPTIMIZER_ENABLED_ADAMW"
_SPAM = "OPTIMIZER_ENABLED_ADAMWSPAM"
_PRUNE = "OPTIMIZER_ENABLED_ADAMWPRUNE"
USES_SPAM = "OPTIMIZER_ENABLED_ADAMWSPAM"
_SGD = "OPTIMIZER_ENABLED_SGD"
_ADAM = "OPTIMIZER_ENABLED_ADAM"
_ADAMWADV = "OPTIMIZER_ENABLED_ADAMWADV"
# In a test matrix, an optimizer whose value differs from the one most of them use
# gets its own (MATRIX_OPTIMIZER_SETTINGS here); a value no single optimizer owns
# cannot be split that way.
OPTIMIZER_OF = {
    _SGD: "sgd",
    _ADAM: "adam",
    _ADAMWADV: "adamwadv",
    _ADAMW: "adamw",
    _SPAM: "adamwspam",
    _PRUNE: "adamwprune",
}
MATRIX_SHARED = (
    "two values of one setting in a test matrix that no single optimizer owns "
    "(MATRIX_OPTIMIZER_SETTINGS gives an optimizer its own values, not a model or rule)"
)
# scripts/run_test_matrix.py passes --pruning-method none; gpt2/trainers/vanilla.py then
# leaves AdamWPrune's pruning off, and lib/optimizers.py builds its base AdamW with
# AdamWPrune's betas, decay 0 and no AMSGrad (CODE_VALUES below): dense
ADAMWPRUNE_DENSE = "knlp's AdamWPrune dense cells (its base AdamW, no pruning)"
# knlp's AdamWSPAM is its own rule (lib/optimizers.py, gpt2/trainers/vanilla.py):
# SPAM_RULE_KNLP here (lib/optim/knlp_spam.py). Its runner (scripts/run_test_matrix.py
# -> gpt2/train.py) always clips (--spam-enable-clip is on by default) and passes
# SPAM_INTERVAL / SPAM_WARMUP_STEPS only when they are in the .config, else
# gpt2/train.py's defaults apply: 1000 and 1000. Its counter moves twice per step.
KNLP_SPAM_RUNNER_DEFAULT = 1000
# knlp's AdamWPrune on GPT-2, as its runner runs it (scripts/run_test_matrix.py ->
# gpt2/train.py -> gpt2/trainers/vanilla.py -> lib/optimizers.py update_adamprune_masks):
# the runner passes --target-sparsity (TARGET_SPARSITY, else "0.9"), --pruning-warmup
# (PRUNING_WARMUP, else gpt2/train.py's 1000) and --adamwprune-variant, nothing else;
# gpt2/train.py's --adamwprune-ramp-end-step stays 3000 and no argument sets the
# mask-update frequency, so update_adamprune_masks uses its own 50. After the 0-based
# iteration i's optimizer step it re-chooses every nn.Linear's mask (the tied lm_head's
# among them) when i > warmup and i % 50 == 0, at target * min(1, (i - warmup) /
# (3000 - warmup))^3. The trainer raises max_iters 10000 for some variants.
KNLP_PRUNE_FREQUENCY = 50
KNLP_PRUNE_RAMP_END = 3000
KNLP_PRUNE_WARMUP = 1000  # gpt2/train.py's --pruning-warmup default
KNLP_PRUNE_SPARSITY = "0.9"  # the runner's when no TARGET_SPARSITY is in the .config
KNLP_VARIANT_ITERS = {"bitter2": 12100} | {
    f"bitter{n}": 13000 for n in (3, 4, 5, 6, 8, 9)
}  # gpt2/trainers/vanilla.py: only when max_iters is 10000
# What knlp's GPT-2 runs use, fixed in its code whatever its Kconfig says
# (its GPT-2 MLP's activation; lib/optimizers.py create_optimizer; gpt2/train.py's --weight-decay default 0.1;
# AdamWPrune's getattr() defaults, as gpt2/train.py sets no adamwprune_* argument):
# (knlp expression, label for the report, our symbol values).
_TORCH_ADAM = (("ADAM_BETA1", "0.9"), ("ADAM_BETA2", "0.999"), ("ADAM_EPSILON", "1e-8"))
# SGD, Adam and AdamWAdv (lib/optimizers.py create_optimizer): the decay is
# gpt2/train.py's --weight-decay 0.1 (resolve_weight_decay returns a given value),
# on the same groups as AdamW's; SGD's momentum 0.9, Adam's and AdamWAdv's betas torch's.
CODE_VALUES: tuple[tuple[str, str, tuple[tuple[str, str], ...]], ...] = (
    (
        _SGD,
        "knlp's SGD (momentum 0.9, L2 decay 0.1)",
        (("SGD_MOMENTUM", "0.9"), ("WEIGHT_DECAY", "0.1")),
    ),
    (
        _ADAM,
        "knlp's Adam (torch defaults, L2 decay 0.1)",
        _TORCH_ADAM + (("WEIGHT_DECAY", "0.1"), ("ADAM_AMSGRAD", "n")),
    ),
    (
        _ADAMWADV,
        "knlp's AdamWAdv (lib/optimizers.py: AdamW, AMSGrad, decay 0.1; "
        "knlp's gpt2/train.py does not offer it)",
        _TORCH_ADAM + (("WEIGHT_DECAY", "0.1"),),
    ),
    (
        _ADAMW,
        "knlp's AdamW (torch defaults, decay 0.1)",
        _TORCH_ADAM + (("WEIGHT_DECAY", "0.1"), ("ADAM_AMSGRAD", "n")),
    ),
    (
        _SPAM,
        "knlp's AdamWSPAM (lib/optimizers.py)",
        _TORCH_ADAM + (("WEIGHT_DECAY", "0.1"), ("ADAM_AMSGRAD", "y")),
    ),
    (
        USES_SPAM,
        "knlp's AdamWSPAM rule (lib/optimizers.py, gpt2/train.py)",
        (
            ("SPAM_RULE_KNLP", "y"),
            ("SPAM_ENABLE_CLIP", "y"),
            ("SPAM_ENABLE_RESET", "y"),
            ("SPAM_SPIKE_RESET", "y"),
            ("SPAM_SPIKE_THRESHOLD", "2.0"),
        ),
    ),
    (
        _PRUNE,
        "knlp's AdamWPrune (AdamW, decay 0, no AMSGrad)",
        _TORCH_ADAM
        + (("WEIGHT_DECAY", "0"), ("ADAM_AMSGRAD", "n"), ("ADAMWPRUNE_BASE_ADAMW", "y")),
    ),
    # gpt2/model.py's MLP: nn.GELU(), the exact erf form (OpenAI's weights: tanh)
    ("MODEL_GPT2", "knlp's GPT-2 MLP (exact GELU)", (("GPT2_GELU_EXACT", "y"),)),
    # gpt2/model.py GPTConfig: vocab_size 50304, GPT-2's 50257 padded to a multiple of 64
    (
        f"MODEL_GPT2 && !({IN_MLA})",
        "knlp's GPT-2 vocabulary (padded to 50304)",
        (("GPT2_PAD_VOCAB", "y"),),
    ),
    # gpt2/mla.py GPT2_MLA*: vocab_size 50257 (create_model passes none), biased Linear
    # layers and a tied head whatever GPT2_BIAS and GPT2_WEIGHT_TYING say
    (
        IN_MLA,
        "knlp's MLA models (vocabulary 50257, biases, tied head)",
        (("GPT2_PAD_VOCAB", "n"), ("GPT2_BIAS", "y"), ("GPT2_TIE_HEAD", "y")),
    ),
    # gpt2/trainers/vanilla.py: clip_grad_norm_(..., 1.0) on every step, whatever the file says
    ("MODEL_GPT2", "knlp's GPT-2 trainer (norm clip 1.0)", (("TRAIN_GRAD_CLIP", "1.0"),)),
    # lib/optimizers.py param_groups_for_weight_decay: no decay for names ending in "bias"
    # or tensors of nn.Embedding / nn.LayerNorm modules; its GPT-2's LayerNorm is its own
    # class, so the gains are decayed; the tied head is the embedding's tensor
    (
        "MODEL_GPT2",
        "knlp's decay groups (all but biases and embeddings)",
        (("WEIGHT_DECAY_PARAMS_KNLP", "y"),),
    ),
)

# knlp's GPT-2 runs (Makefile -> scripts/run_test_matrix.py -> gpt2/train.py ->
# lib/optimizers.py create_optimizer) read none of these: gpt2/train.py has no
# argument for them, and the optimizer is built from hard-coded values (code.py CODE_VALUES).
UNREAD = "knlp's GPT-2 training does not read it: "
ADAM_UNREAD = UNREAD + "its optimizers use betas (0.9, 0.999) and eps 1e-8 in code"
AMSGRAD_UNREAD = UNREAD + "its AdamWSPAM always uses AMSGrad, its AdamW and AdamWPrune never"
DECAY_UNREAD = UNREAD + (
    "AdamW, AdamWSPAM, SGD, Adam and AdamWAdv decay 0.1 (gpt2/train.py's --weight-decay "
    "default), AdamWPrune 0"
)
CLIP_ALWAYS = (
    "knlp's runner always clips (gpt2/train.py's --spam-enable-clip is on by default): "
    "SPAM_ENABLE_CLIP=y here"
)
RESET_ALWAYS = (
    "knlp's runner resets anyway (without SPAM_INTERVAL it passes none and gpt2/train.py's "
    "default 1000 applies): SPAM_ENABLE_RESET=y here"
)

UNREAD_PRUNE = "knlp's GPT-2 runner does not pass it: "
FREQUENCY_UNREAD = UNREAD_PRUNE + "AdamWPrune re-chooses its masks every 50 steps in code"
RAMP_UNREAD = UNREAD_PRUNE + "AdamWPrune's ramp ends at step 3000 (gpt2/train.py's default)"
# knlp's magnitude pruning on GPT-2 (lib/pruning.py create_pruner -> lib/magnitude_pruning.py,
# called from gpt2/trainers/vanilla.py): create_pruner passes the target and
# --pruning-warmup only, so the ramp ends at MagnitudePruning's 3000 on its cubic
# (target * p^3) schedule; the trainer calls update_masks(i) after every 0-based
# iteration i's optimizer step (its own frequency of 100 is read only by step_pruning,
# which the trainer does not call): nothing while i <= warmup, then one global
# threshold over the |w| of every nn.Linear (the tied lm_head's among them), the
# weights zeroed by the masks before each update.
KNLP_MAGNITUDE_FREQUENCY = 1
# Its movement pruning (lib/pruning.py create_pruner -> lib/movement_pruning.py, the same
# calls from gpt2/trainers/vanilla.py): the same target, warmup and ramp end (3000), a
# linear ramp; every update re-chooses every mask from w (w - w0), w0 the weights at the
# trainer's start, so a pruned weight can come back: PRUNING_MOVEMENT_KNLP here.
MOVEMENT_RULE = "knlp's movement rule (lib/movement_pruning.py: w (w - w0), masks re-chosen)"
