"""What each of the original project's (mcgrof/knlp) GPT-2 symbols means here.

One row per knlp symbol (lib/config/knlp/row.py says what each kind does), read
by lib/config/knlp/translate.py. A knlp symbol with no prompt (OPTIMIZER,
PRUNING_METHOD, GPT2_MODEL_NAME...) is derived there: a file's value is checked
against the selection, no row needed. Adding a feature later is one row: `feature` -> `same`, or nothing
at all for `pending` (its row already names the symbol it will have).
"""

from __future__ import annotations

from lib.config.knlp.code import (
    ADAM_UNREAD,
    AMSGRAD_UNREAD,
    CLIP_ALWAYS,
    DECAY_UNREAD,
    FREQUENCY_UNREAD,
    IN_MLA,
    RAMP_UNREAD,
    RESET_ALWAYS,
    UNREAD,
    USES_SPAM,
)
from lib.config.knlp.names_attention import GATED_IN_USE, MLA_ROWS, RGSA_ROWS
from lib.config.knlp.row import (
    Row,
    absent,
    feature,
    member,
    pending,
    runtime,
    same,
    special,
    values,
)

_WORKERS = "knlp's DataLoader workers; this project reads token files in the training process"
_ITERS = "GPT-2 runs end at GPT2_MAX_ITERS or GPT2_MAX_TIME; epochs do not govern them"
_LOGS = "knlp's own console and file logging"
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
    # knlp's MLA models always tie the head and bias every layer (code.py CODE_VALUES)
    "GPT2_WEIGHT_TYING": same("GPT2_TIE_HEAD", f"!({IN_MLA})"),
    "GPT2_BIAS": same("GPT2_BIAS", f"!({IN_MLA})"),
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
    "GPT2_FLASH_ATTENTION": runtime(
        "knlp's gpt2/train.py parses --flash-attention but never reads it: its attention "
        "always leaves the SDPA kernel to PyTorch, as SDPA_BACKEND_AUTO does here"
    ),
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
    "OPTIMIZER_SELECT_SGD": member("OPTIMIZER_SGD"),
    "OPTIMIZER_SELECT_ADAM": member("OPTIMIZER_ADAM"),
    # knlp's gpt2/train.py offers no adamwadv (its --optimizer choices), so its runner
    # stops there; what lib/optimizers.py would build is run here (code.py CODE_VALUES)
    "OPTIMIZER_SELECT_ADAMWADV": member("OPTIMIZER_ADAMWADV"),
    "OPTIMIZER_MODE_NONE": feature("training without an optimizer (OPTIMIZER_MODE_NONE)"),
    "OPTIMIZER_ENABLE_SGD": same("OPTIMIZER_ENABLE_SGD"),
    "OPTIMIZER_ENABLE_ADAM": same("OPTIMIZER_ENABLE_ADAM"),
    "OPTIMIZER_ENABLE_ADAMWADV": same("OPTIMIZER_ENABLE_ADAMWADV"),
    "ADAMW_BETA1": runtime(ADAM_UNREAD),
    "ADAMW_BETA2": runtime(ADAM_UNREAD),
    "ADAMW_EPSILON": runtime(ADAM_UNREAD),
    "ADAMW_WEIGHT_DECAY": runtime(DECAY_UNREAD),
    "WEIGHT_DECAY": absent(
        "knlp reads ADAMW_WEIGHT_DECAY, ADV_WEIGHT_DECAY or ADAMWPRUNE_WEIGHT_DECAY"
    ),
    "ADV_WEIGHT_DECAY": runtime(DECAY_UNREAD),
    "ADV_USE_AMSGRAD": runtime(AMSGRAD_UNREAD),
    "ADAMWPRUNE_AMSGRAD": runtime(AMSGRAD_UNREAD),
    "ADV_USE_COSINE_ANNEALING": runtime("knlp's GPT-2 trainer schedules the LR by GPT2_DECAY_LR"),
    "ADV_COSINE_ETA_MIN": runtime("knlp's GPT-2 trainer schedules the LR by GPT2_DECAY_LR"),
    "SPAM_PERIODIC_RESET": runtime(RESET_ALWAYS),
    "SPAM_ENABLE_CLIP": runtime(CLIP_ALWAYS),
    "SPAM_THETA": same("SPAM_THETA", USES_SPAM),
    "SPAM_INTERVAL": special(),  # halved: knlp's counter moves twice per step
    "SPAM_WARMUP_STEPS": special(),
    "SPAM_WARMUP": special(),  # off: gpt2/train.py's default warmup applies
    "SPAM_SPIKE_THRESHOLD": runtime(UNREAD + "its AdamWSPAM's spike test uses 2.0 in code"),
    "ADAMWPRUNE_BETA1": runtime(ADAM_UNREAD),
    "ADAMWPRUNE_BETA2": runtime(ADAM_UNREAD),
    "ADAMWPRUNE_WEIGHT_DECAY": runtime(DECAY_UNREAD),
    "ADAMWPRUNE_BASE_ADAMW": runtime(UNREAD + "it builds AdamWPrune on AdamW"),
    "ADAMWPRUNE_BASE_ADAMWSPAM": runtime(UNREAD + "it builds AdamWPrune on AdamW"),
    "ADAMWPRUNE_TARGET_SPARSITY": runtime(UNREAD + "its sparsity is TARGET_SPARSITY"),
    "ADAMWPRUNE_WARMUP_STEPS": runtime(UNREAD + "its pruning warmup is PRUNING_WARMUP"),
    "ADAMWPRUNE_FREQUENCY": runtime(FREQUENCY_UNREAD),
    "ADAMWPRUNE_ENABLE_PRUNING": runtime(
        UNREAD + "its runner prunes when PRUNING_SELECT_STATE is chosen"
    ),
    "ADAMWPRUNE_RAMP_END_EPOCH": runtime(RAMP_UNREAD),
    "PRUNING_RAMP_END_EPOCH": runtime(RAMP_UNREAD),
    "ADAMWPRUNE_RAMP_END_STEP": absent("the ramp's end here is PRUNING_RAMP_END"),
    "ADAMWPRUNE_BASE_ADAM": runtime(UNREAD + "it builds AdamWPrune on AdamW"),
    "ADAMWPRUNE_BASE_ADAMWADV": runtime(UNREAD + "it builds AdamWPrune on AdamW"),
    # pruning
    # knlp's magnitude and movement pruners keep their own schedules and movement its
    # own rule (code.py, translate_optim.py mask_schedule: PRUNING_MOVEMENT_KNLP)
    "PRUNING_SELECT_MAGNITUDE": member("PRUNING_METHOD_MAGNITUDE"),
    "PRUNING_SELECT_MOVEMENT": member("PRUNING_METHOD_MOVEMENT"),
    "PRUNING_ENABLE_MAGNITUDE": same("PRUNING_ENABLE_MAGNITUDE"),  # in a test matrix
    "PRUNING_ENABLE_MOVEMENT": same("PRUNING_ENABLE_MOVEMENT"),
    "PRUNING_SELECT_STATE": member("PRUNING_METHOD_STATE"),
    "TARGET_SPARSITY": special(),  # AdamWPrune's sparsity (prune_schedule)
    "PRUNING_WARMUP": special(),  # AdamWPrune's warmup, counted from step 0 (prune_schedule)
    "PRUNING_FREQUENCY": runtime(FREQUENCY_UNREAD),
    **{f"SPARSITY_ENABLE_{n}": same(f"PRUNING_SPARSITY_{n}") for n in (50, 70, 90, 95, 99)},
    # the runner's variant list (prune_schedule): every one that is y, else bitter0
    **{f"GPT2_ADAMWPRUNE_VARIANT_BITTER{n}": special() for n in range(10)},
    # attention
    "ENABLE_RA_MLA": member("GPT2_ATTENTION_RA_MLA"),
    "GPT2_KNLP": runtime("GPT2_KNLP_SDPA_GATE and GPT2_KNLP_RA pick the attention here"),
    # read only where knlp's trainer builds the gated forms (after MLA and RGSA)
    "GPT2_KNLP_RA_LAYERS": same("GPT2_RA_GATED_LAYERS", GATED_IN_USE),
    "GPT2_KNLP_RA_HEADS": same("GPT2_RA_GATED_HEADS", GATED_IN_USE),
    "KNLP_VARIANT": runtime("a label knlp adds to its run names"),
    # knlp's runner (scripts/run_test_matrix.py get_test_matrix) builds its grid from
    # OPTIMIZER_ENABLED_*, PRUNING_ENABLED_* and TEST_SPARSITY_* (SPARSITY_ENABLE_*),
    # whatever TEST_MATRIX_MODE says; the TEST_* lists are read only when those are
    # empty, which a GPT-2 file's choices never leave them
    "TEST_MATRIX_MODE": runtime(
        "knlp's grid is its OPTIMIZER_MODE_MULTIPLE / PRUNING_MODE_MULTIPLE enables "
        "(OPTIMIZER_ENABLE_*, PRUNING_ENABLE_*, SPARSITY_ENABLE_* here, run by "
        "`make test-matrix`); its TEST_* lists are fallbacks its runner does not reach"
    ),
    **RGSA_ROWS,
    **MLA_ROWS,
    # knlp's vanilla ablation steps: one run each (translate.py's vanilla_steps)
    "GPT2_VANILLA_ABLATION_MODE": special(),
    "GPT2_VANILLA_ABLATION_STEPS": special(),
    # knlp's KV feature-circuit analysis after training (lib/eval/kv_circuit.py here)
    "KNLP_MECHINT": same("MECHINT_KV"),
    "KNLP_MECHINT_KV_POSTTRAIN": runtime(
        "the analysis runs after training, as knlp's `make` runs it"
    ),
    "KNLP_MECHINT_KV_FROM_RUNS": feature(
        "knlp's re-plotting of an earlier analysis folder (KNLP_MECHINT_KV_FROM_RUNS)"
    ),
    "KNLP_MECHINT_KV_RUN_DIR": runtime("knlp's folder of an earlier analysis"),
    "KNLP_MECHINT_KV_CHECKPOINT": runtime(
        "knlp's path to the .pt files it analyses; here each run analyses the model it "
        "trained (a knlp pickle is never loaded)"
    ),
    "KNLP_MECHINT_KV_TARGET_SPARSITY": same("MECHINT_KV_SPARSITY"),
    "KNLP_MECHINT_KV_STEPS": same("MECHINT_KV_STEPS"),
    "KNLP_MECHINT_KV_LR": same("MECHINT_KV_LR"),
    "KNLP_MECHINT_KV_TEMP_SCHEDULE": same("MECHINT_KV_TEMP_SCHEDULE"),
    "KNLP_MECHINT_KV_TARGET_METRIC": runtime(
        UNREAD + "its analysis always minimises the model's loss (so does this project's)"
    ),
    "KNLP_MECHINT_SAVE_MASKS": same("MECHINT_KV_SAVE_MASKS"),
    "KNLP_MECHINT_VISUALIZE_WANDB": runtime(
        "knlp's W&B copy of its figures; here they are in the run's kv_circuit/ folder"
    ),
    "KNLP_MECHINT_OUTPUT_DIR": runtime("knlp's output folder; here the run's kv_circuit/"),
    # written in knlp's mechint defconfigs but not symbols of its Kconfig
    **{
        f"KNLP_MECHINT_{n}": absent("not in knlp's Kconfig.mechint; its analysis has no such knob")
        for n in (
            "KV_SPARSITY_SCHEDULE",
            "KV_L1_LAMBDA",
            "KV_HARD_MASKS",
            "VISUALIZE_HEATMAPS",
            "VISUALIZE_CURVES",
            "VISUALIZE_FAITHFULNESS",
        )
    },
    # lib/tiering.py is used by scripts/benchmark_tiered_inference.py only, a separate
    # script no make target runs; its tier-hints JSON came from gpt2/trainers/ra.py
    # until knlp's 85a1465f removed that. Training is the same with it on or off.
    "ENABLE_HIERARCHICAL_TIERING": runtime(
        "knlp's GPT-2 training reads no TIERING_* symbol (gpt2/train.py, its trainers, "
        "scripts/run_test_matrix.py): the run trains and measures the same with it on"
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

# Settings of a knlp feature: refused with their gate, ignored while it is off.
FEATURE_PREFIXES: dict[str, str] = {
    "RGSA_": "ENABLE_RGSA",
    # MLPSPLICE_* and EMBED_D_LATENT: written in some knlp files, symbols of no knlp Kconfig
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
