"""What each of the original project's (mcgrof/knlp) GPT-2 symbols means here.

One row per knlp symbol, read by lib/config/knlp/translate.py. Kinds:
  same      knlp's value goes to our symbol `ours` as it is
  member    a knlp choice member: when it is y, our choice member `ours` is y
  values    knlp's value selects one of our choice members (`values` maps it)
  runtime   tunes knlp's own runtime only: accepted with a notice (`why`)
  pending   a runtime/records feature this project will get as `ours`: acts
            like `same` once `ours` is a symbol here; until then a notice
  feature   changes what is trained or measured and is missing here: the
            file is refused, one line per feature, when the value is on
  absent    not a knlp symbol at the table's commit: knlp ignored it, so it
            is ignored here too, with a notice (`why` says what to set)
  special   translated by translate.py's special() (a unit change, or a
            value knlp's runner substitutes); counted as translated
A knlp symbol with no prompt (OPTIMIZER, PRUNING_METHOD, GPT2_MODEL_NAME...)
is derived there: a file's value is checked against the selection, no row
needed. Adding a feature later is one row: `feature` -> `same`, or nothing
at all for `pending` (its row already names the symbol it will have).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Row:
    kind: str
    ours: str = ""
    values: tuple[tuple[str, str], ...] = ()
    why: str = ""
    when: str = ""  # a knlp expression: the row applies only when it holds
    file_only: bool = False  # translate only a value the file itself sets
    trains: bool = False  # pending: changes what is trained (refused until it exists)


def same(ours: str, when: str = "") -> Row:
    return Row("same", ours, when=when)


def member(ours: str, file_only: bool = False) -> Row:
    return Row("member", ours, file_only=file_only)


def values(**pairs: str) -> Row:
    return Row("values", values=tuple(pairs.items()))


def runtime(why: str) -> Row:
    return Row("runtime", why=why)


def pending(ours: str, feature: str, trains: bool = False) -> Row:
    return Row("pending", ours, why=feature, trains=trains)


def feature(name: str) -> Row:
    return Row("feature", why=name)


def absent(why: str) -> Row:
    return Row("absent", why=why)


def special() -> Row:
    return Row("special")


_WORKERS = "knlp's DataLoader workers; this project reads token files in the training process"
_ITERS = "GPT-2 runs end at GPT2_MAX_ITERS or GPT2_MAX_TIME; epochs do not govern them"
_LOGS = "knlp's own console and file logging"
# Which optimizer's hyper-parameters knlp uses (one optimizer per run)
_ADAMW = "OPTIMIZER_ENABLED_ADAMW && OPTIMIZER_MODE_SINGLE"
_SPAM = "OPTIMIZER_ENABLED_ADAMWSPAM && OPTIMIZER_MODE_SINGLE"
_PRUNE = "OPTIMIZER_ENABLED_ADAMWPRUNE && OPTIMIZER_MODE_SINGLE"
_USES_SPAM = "OPTIMIZER_ENABLED_ADAMWSPAM"
# knlp's GPT-2 runs (Makefile -> scripts/run_test_matrix.py -> gpt2/train.py ->
# lib/optimizers.py create_optimizer) read none of these: gpt2/train.py has no
# argument for them, and the optimizer is built from hard-coded values (CODE_VALUES).
_UNREAD = "knlp's GPT-2 training does not read it: "
_ADAM_UNREAD = _UNREAD + "its optimizers use betas (0.9, 0.999) and eps 1e-8 in code"
_AMSGRAD_UNREAD = _UNREAD + "its AdamWSPAM always uses AMSGrad, its AdamW and AdamWPrune never"
_DECAY_UNREAD = _UNREAD + (
    "AdamW and AdamWSPAM decay 0.1 (gpt2/train.py's --weight-decay default), AdamWPrune 0"
)
# knlp's AdamWSPAM is its own rule (lib/optimizers.py, gpt2/trainers/vanilla.py):
# SPAM_RULE_KNLP here (lib/optim/knlp_spam.py). Its runner (scripts/run_test_matrix.py
# -> gpt2/train.py) always clips (--spam-enable-clip is on by default) and passes
# SPAM_INTERVAL / SPAM_WARMUP_STEPS only when they are in the .config, else
# gpt2/train.py's defaults apply: 1000 and 1000. Its counter moves twice per step.
KNLP_SPAM_RUNNER_DEFAULT = 1000
_CLIP_ALWAYS = (
    "knlp's runner always clips (gpt2/train.py's --spam-enable-clip is on by default): "
    "SPAM_ENABLE_CLIP=y here"
)
_RESET_ALWAYS = (
    "knlp's runner resets anyway (without SPAM_INTERVAL it passes none and gpt2/train.py's "
    "default 1000 applies): SPAM_ENABLE_RESET=y here"
)

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
_UNREAD_PRUNE = "knlp's GPT-2 runner does not pass it: "
_FREQUENCY_UNREAD = _UNREAD_PRUNE + "AdamWPrune re-chooses its masks every 50 steps in code"
_RAMP_UNREAD = _UNREAD_PRUNE + "AdamWPrune's ramp ends at step 3000 (gpt2/train.py's default)"
_MASK_PRUNERS = "knlp's magnitude and movement pruning (lib/pruning.py's own schedules)"

ROWS: dict[str, Row] = {
    # model and size (GPT2_MODEL_124M... and GPT2_DATASET_* have the same names here)
    "MODEL_MODE_SINGLE": runtime("one model per run is how this project always trains"),
    "MODEL_MODE_MULTIPLE": feature(
        "several model families in one run (knlp's MODEL_MODE_MULTIPLE)"
    ),
    "MODEL_SELECT_GPT2": member("MODEL_GPT2"),
    "MODEL_SELECT_LENET5": feature("LeNet-5, ResNet and GNN models"),
    "MODEL_SELECT_RESNET18": feature("LeNet-5, ResNet and GNN models"),
    "MODEL_SELECT_RESNET50": feature("LeNet-5, ResNet and GNN models"),
    "MODEL_SELECT_GNN": feature("LeNet-5, ResNet and GNN models"),
    "GPT2_WEIGHT_TYING": same("GPT2_TIE_HEAD"),
    "GPT2_CUSTOM_DATASET_PATH": same("DATA_CUSTOM_PATH"),
    "GPT2_MODEL_SIZE": absent("knlp's size is its GPT2_MODEL_* choice"),
    "GPT2_N_LAYER": absent(
        "knlp's size is its GPT2_MODEL_* choice (for another shape use GPT2_MODEL_CUSTOM here)"
    ),
    "GPT2_N_HEAD": absent("knlp's size is its GPT2_MODEL_* choice"),
    "GPT2_N_EMBD": absent("knlp's size is its GPT2_MODEL_* choice"),
    "GPT2_DATASET": absent("knlp's dataset is its GPT2_DATASET_* choice"),
    # batch, schedule, length, evaluation
    "HYPER_PARAM_AUTO": member("HYPER_PARAM_AUTO"),
    "TARGET_EFFECTIVE_BATCH": runtime(
        "knlp's MANUAL mode trains BATCH_SIZE x GPT2_GRADIENT_ACCUMULATION and does not read it"
    ),
    "GRADIENT_ACCUMULATION": absent("GPT-2's is GPT2_GRADIENT_ACCUMULATION"),
    "SEED": absent("the seed here is TRAIN_SEED"),
    "GPT2_MAX_TIME": same("TRAIN_MAX_TIME"),
    "GPT2_LOG_INTERVAL": same("TRAIN_LOG_INTERVAL"),
    "GPT2_EVAL_SAMPLES": same("TRAIN_EVAL_ITERS"),
    "GPT2_DECAY_LR": values(y="LR_SCHEDULE_COSINE", n="LR_SCHEDULE_CONSTANT"),
    "NUM_EPOCHS": runtime(_ITERS),
    # device, precision, compile, kernels
    "DEVICE": values(cuda="DEVICE_CUDA", cpu="DEVICE_CPU", mps="DEVICE_MPS"),
    "GPT2_AMP_DTYPE": values(
        bfloat16="MIXED_PRECISION_DTYPE_BF16", float16="MIXED_PRECISION_DTYPE_FP16"
    ),
    "GPT2_TF32_ALLOWED": same("TF32"),
    "GPT2_FLASH_ATTENTION": values(y="SDPA_BACKEND_AUTO", n="SDPA_BACKEND_MATH"),
    "COMPILE_AUTO": runtime(
        "knlp compiles on any GPU under HYPER_PARAM_AUTO: COMPILE_MODEL is set from that"
    ),
    "COMPILE_MANUAL": runtime("COMPILE_MODEL carries the choice"),
    "COMPILE_MODEL": same("COMPILE_MODEL", "!COMPILE_AUTO"),
    "GPT2_COMPILE": runtime(
        "knlp's compile switch is COMPILE_MODEL; GPT2_COMPILE only exists while that is on"
    ),
    "TORCH_ROCM_AOTRITON_ENABLE_EXPERIMENTAL": runtime(
        "a ROCm environment switch for knlp's launcher"
    ),
    "NUM_WORKERS": runtime(_WORKERS),
    "PREFETCH_FACTOR": runtime(_WORKERS),
    "PERSISTENT_WORKERS": runtime(_WORKERS),
    "DATA_DIR": runtime(
        "a folder inside knlp's checkout; this project prepares its data under its own DATA_DIR"
    ),
    "OUTPUT_DIR": runtime("knlp's output folder; runs go to RESULTS_DIR here"),
    "JSON_OUTPUT": runtime("knlp's metrics file name; runs write metrics.json here"),
    "GPU_MONITOR": runtime("knlp's GPU monitor; MONITOR is this project's"),
    "VERBOSE": runtime(_LOGS),
    "LOG_LEVEL": runtime(_LOGS),
    "DEBUG": runtime(_LOGS),
    "DRY_RUN": runtime("knlp's dry run is a make flag here: DRY_RUN=1"),
    "PROFILE": runtime(_LOGS),
    "PARALLEL_JOBS": runtime("knlp's matrix runner; MATRIX_PARALLEL_JOBS is this project's"),
    "TEST_PARALLEL_JOBS": absent("the matrix's is MATRIX_PARALLEL_JOBS"),
    "GPT2_GENERATION_TEMPERATURE": runtime("knlp's sampling after training"),
    "GPT2_GENERATION_TOP_K": runtime("knlp's sampling after training"),
    "GPT2_GENERATION_MAX_TOKENS": runtime("knlp's sampling after training"),
    "GPT2_DDP_NUM_GPUS": same("GPT2_NUM_GPUS"),
    "GPT2_DDP_BACKEND": values(nccl="DIST_BACKEND_NCCL", gloo="DIST_BACKEND_GLOO"),
    "GPT2_DDP_FIND_UNUSED_PARAMS": runtime("DDP bookkeeping; the gradients are the same"),
    # optimizers
    "OPTIMIZER_SELECT_ADAMW": member("OPTIMIZER_ADAMW"),
    "OPTIMIZER_SELECT_ADAMWSPAM": member("OPTIMIZER_ADAMWSPAM"),
    "OPTIMIZER_ENABLE_ADAMWSPAM": same("OPTIMIZER_ENABLE_ADAMWSPAM"),
    "OPTIMIZER_SELECT_ADAMWPRUNE": member("OPTIMIZER_ADAMWPRUNE"),
    "OPTIMIZER_SELECT_SGD": feature("SGD, Adam and AdamWAdv optimizers"),
    "OPTIMIZER_SELECT_ADAM": feature("SGD, Adam and AdamWAdv optimizers"),
    "OPTIMIZER_SELECT_ADAMWADV": feature("SGD, Adam and AdamWAdv optimizers"),
    "OPTIMIZER_MODE_NONE": feature("training without an optimizer (OPTIMIZER_MODE_NONE)"),
    "OPTIMIZER_ENABLE_SGD": feature("SGD, Adam and AdamWAdv optimizers"),
    "OPTIMIZER_ENABLE_ADAM": feature("SGD, Adam and AdamWAdv optimizers"),
    "OPTIMIZER_ENABLE_ADAMWADV": feature("SGD, Adam and AdamWAdv optimizers"),
    "ADAMW_BETA1": runtime(_ADAM_UNREAD),
    "ADAMW_BETA2": runtime(_ADAM_UNREAD),
    "ADAMW_EPSILON": runtime(_ADAM_UNREAD),
    "ADAMW_WEIGHT_DECAY": runtime(_DECAY_UNREAD),
    "WEIGHT_DECAY": absent(
        "knlp reads ADAMW_WEIGHT_DECAY, ADV_WEIGHT_DECAY or ADAMWPRUNE_WEIGHT_DECAY"
    ),
    "ADV_WEIGHT_DECAY": runtime(_DECAY_UNREAD),
    "ADV_USE_AMSGRAD": runtime(_AMSGRAD_UNREAD),
    "ADAMWPRUNE_AMSGRAD": runtime(_AMSGRAD_UNREAD),
    "ADV_USE_COSINE_ANNEALING": runtime("knlp's GPT-2 trainer schedules the LR by GPT2_DECAY_LR"),
    "ADV_COSINE_ETA_MIN": runtime("knlp's GPT-2 trainer schedules the LR by GPT2_DECAY_LR"),
    "SPAM_PERIODIC_RESET": runtime(_RESET_ALWAYS),
    "SPAM_ENABLE_CLIP": runtime(_CLIP_ALWAYS),
    "SPAM_THETA": same("SPAM_THETA", _USES_SPAM),
    "SPAM_INTERVAL": special(),  # halved: knlp's counter moves twice per step
    "SPAM_WARMUP_STEPS": special(),
    "SPAM_WARMUP": special(),  # off: gpt2/train.py's default warmup applies
    "SPAM_SPIKE_THRESHOLD": runtime(_UNREAD + "its AdamWSPAM's spike test uses 2.0 in code"),
    "ADAMWPRUNE_BETA1": runtime(_ADAM_UNREAD),
    "ADAMWPRUNE_BETA2": runtime(_ADAM_UNREAD),
    "ADAMWPRUNE_WEIGHT_DECAY": runtime(_DECAY_UNREAD),
    "ADAMWPRUNE_BASE_ADAMW": runtime(_UNREAD + "it builds AdamWPrune on AdamW"),
    "ADAMWPRUNE_BASE_ADAMWSPAM": runtime(_UNREAD + "it builds AdamWPrune on AdamW"),
    "ADAMWPRUNE_TARGET_SPARSITY": runtime(_UNREAD + "its sparsity is TARGET_SPARSITY"),
    "ADAMWPRUNE_WARMUP_STEPS": runtime(_UNREAD + "its pruning warmup is PRUNING_WARMUP"),
    "ADAMWPRUNE_FREQUENCY": runtime(_FREQUENCY_UNREAD),
    "ADAMWPRUNE_ENABLE_PRUNING": runtime(
        _UNREAD + "its runner prunes when PRUNING_SELECT_STATE is chosen"
    ),
    "ADAMWPRUNE_RAMP_END_EPOCH": runtime(_RAMP_UNREAD),
    "PRUNING_RAMP_END_EPOCH": runtime(_RAMP_UNREAD),
    "ADAMWPRUNE_RAMP_END_STEP": absent("the ramp's end here is PRUNING_RAMP_END"),
    "ADAMWPRUNE_BASE_ADAM": feature("SGD, Adam and AdamWAdv optimizers"),
    "ADAMWPRUNE_BASE_ADAMWADV": feature("SGD, Adam and AdamWAdv optimizers"),
    # pruning
    # knlp's magnitude and movement pruners (lib/pruning.py) keep their own schedules,
    # not transcribed here: refused rather than run on ours
    "PRUNING_SELECT_MAGNITUDE": feature(_MASK_PRUNERS),
    "PRUNING_SELECT_MOVEMENT": feature(_MASK_PRUNERS),
    "PRUNING_SELECT_STATE": member("PRUNING_METHOD_STATE"),
    "TARGET_SPARSITY": special(),  # AdamWPrune's sparsity (prune_schedule)
    "PRUNING_WARMUP": special(),  # AdamWPrune's warmup, counted from step 0 (prune_schedule)
    "PRUNING_FREQUENCY": runtime(_FREQUENCY_UNREAD),
    **{f"SPARSITY_ENABLE_{n}": same(f"PRUNING_SPARSITY_{n}") for n in (50, 70, 90, 95, 99)},
    # the runner's variant list (prune_schedule): every one that is y, else bitter0
    **{f"GPT2_ADAMWPRUNE_VARIANT_BITTER{n}": special() for n in range(10)},
    # attention
    "ENABLE_RA_MLA": member("GPT2_ATTENTION_RA_MLA"),
    "GPT2_KNLP": runtime("GPT2_KNLP_SDPA_GATE and GPT2_KNLP_RA pick the attention here"),
    "GPT2_KNLP_RA_LAYERS": same("GPT2_RA_GATED_LAYERS"),
    "GPT2_KNLP_RA_HEADS": same("GPT2_RA_GATED_HEADS"),
    "KNLP_VARIANT": runtime("a label knlp adds to its run names"),
    "ENABLE_RGSA": feature("RGSA, retrieval-gated sparse attention (ENABLE_RGSA)"),
    "ENABLE_MLA": feature("knlp's MLA/KVSplice attention (ENABLE_MLA)"),
    "GPT2_VANILLA_ABLATION_MODE": feature(
        "knlp's vanilla ablation steps (GPT2_VANILLA_ABLATION_MODE)"
    ),
    "KNLP_MECHINT": feature("mechanistic-interpretability analysis (KNLP_MECHINT)"),
    "ENABLE_HIERARCHICAL_TIERING": feature(
        "Adam-state memory tiering (ENABLE_HIERARCHICAL_TIERING)"
    ),
    # evaluation
    "INFERENCE_BENCHMARK": values(y="INFERENCE_BENCH_Y", n="INFERENCE_BENCH_N"),
    "RUN_LM_EVAL": same("LM_EVAL_AT_END"),
    # checkpoints, GPU runtime, trackers, baseline: runtime/records features, all here now
    # (carried as `same`; a knlp default of one applies only where our tree shows it)
    "SAVE_CHECKPOINT": pending("SAVE_CHECKPOINT", "checkpoint on/off"),
    "CHECKPOINT_INTERVAL": pending("CHECKPOINT_INTERVAL", "checkpoint interval"),
    "GPT2_CUDNN_BENCHMARK": pending("CUDNN_BENCHMARK", "cudnn.benchmark"),
    "PYTORCH_CUDA_ALLOC_CONF": pending("PYTORCH_CUDA_ALLOC_CONF", "the CUDA allocator setting"),
    "GPU_WARMUP": pending("GPU_WARMUP", "a GPU warm-up before timing"),
    "ENABLE_TRACKIO": pending("TRACKER_TRACKIO", "the Trackio tracker"),
    "ENABLE_WANDB": same("TRACKER_WANDB"),
    "WANDB_PROJECT": same("TRACKER_WANDB_PROJECT"),
    "WANDB_OFFLINE": same("TRACKER_WANDB_OFFLINE"),
    "TRACKER_PROJECT": pending("TRACKER_PROJECT", "one project name for every tracker"),
    "WANDB_ENTITY": pending("TRACKER_WANDB_ENTITY", "the W&B entity"),
    "TRACKER_RUN_NAME": pending("TRACKER_RUN_NAME", "a tracker run name"),
    "BASELINE_RUN_ID": pending("RESULTS_BASELINE_RUN_ID", "a baseline run id for make results"),
    "TRACKIO_PORT": runtime("the Trackio dashboard's port"),
}

# What knlp's GPT-2 runs use, fixed in its code whatever its Kconfig says
# (its GPT-2 MLP's activation; lib/optimizers.py create_optimizer; gpt2/train.py's --weight-decay default 0.1;
# AdamWPrune's getattr() defaults, as gpt2/train.py sets no adamwprune_* argument):
# (knlp expression, label for the report, our symbol values).
_TORCH_ADAM = (("ADAM_BETA1", "0.9"), ("ADAM_BETA2", "0.999"), ("ADAM_EPSILON", "1e-8"))
CODE_VALUES: tuple[tuple[str, str, tuple[tuple[str, str], ...]], ...] = (
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
        _USES_SPAM,
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
    # gpt2/trainers/vanilla.py: clip_grad_norm_(..., 1.0) on every step, whatever the file says
    ("MODEL_GPT2", "knlp's GPT-2 trainer (norm clip 1.0)", (("TRAIN_GRAD_CLIP", "1.0"),)),
)

# Settings of a knlp feature: refused with their gate, ignored while it is off.
FEATURE_PREFIXES: dict[str, str] = {
    "RGSA_": "ENABLE_RGSA",
    "MLA_": "ENABLE_MLA",
    "MLPSPLICE_": "ENABLE_MLA",
    "EMBED_D_LATENT": "ENABLE_MLA",
    "KNLP_MECHINT_": "KNLP_MECHINT",
    "TIERING_": "ENABLE_HIERARCHICAL_TIERING",
    "GPT2_VANILLA_ABLATION_": "GPT2_VANILLA_ABLATION_MODE",
    "RA_MLA_ABLATION_": "ENABLE_RA_MLA",
    "RA_SEED": "ENABLE_RA_MLA",
    "TEST_": "TEST_MATRIX_MODE",
}

# knlp's choice (GPT2_KNLP_SDPA_GATE, GPT2_KNLP_RA) -> our attention member
GATED_ATTENTION = {
    (False, False): "GPT2_ATTENTION_VANILLA",
    (True, False): "GPT2_ATTENTION_SDPA_GATE",
    (False, True): "GPT2_ATTENTION_RA_GATED",
    (True, True): "GPT2_ATTENTION_SDPA_GATE_RA_GATED",
}

# knlp's derived symbols (no prompt there) that its defconfigs write out: a
# file's value must agree with what knlp derives from the selection.
DERIVED = (
    "MODEL",
    "MODEL_GPT2",
    "GPT2_MODEL_NAME",
    "GPT2_DATASET_NAME",
    "OPTIMIZER",
    "PRUNING_METHOD",
    "ADAMWPRUNE_BASE_OPTIMIZER_NAME",
    "TEST_MATRIX_MODE",
    "GPT2_ADAMWPRUNE_DEFAULT_VARIANT",
)

# Markers: a file naming one of these is in knlp's format.
MARKERS = ("MODEL_SELECT_", "MODEL_MODE_", "OPTIMIZER_SELECT_", "PRUNING_SELECT_")


def gate_of(name: str) -> str | None:
    """The feature gate a knlp feature setting belongs to, if any."""
    for prefix, gate in FEATURE_PREFIXES.items():
        if name.startswith(prefix) and name != gate:
            return gate
    return None
