"""`make import-knlp` and `make defconfig-*` on knlp-format files, run for real."""

from __future__ import annotations

from tests.scripts.conftest import make
from tests.scripts.test_make import load_config_py

# A knlp-format GPT-2 experiment written for this test (knlp's symbol names)
KNLP_FILE = """# knlp-style tiny run
CONFIG_MODEL_MODE_SINGLE=y
CONFIG_MODEL_SELECT_GPT2=y
CONFIG_MODEL="gpt2"
CONFIG_GPT2_DATASET_SHAKESPEARE=y
CONFIG_GPT2_DATASET_NAME="shakespeare"
CONFIG_OPTIMIZER_MODE_SINGLE=y
CONFIG_OPTIMIZER_SELECT_ADAMW=y
CONFIG_PRUNING_MODE_NONE=y
CONFIG_DEVICE="cpu"
CONFIG_GPT2_MAX_TIME=60
CONFIG_NUM_WORKERS=8
"""


def test_import_knlp_with_a_name_writes_a_defconfig_in_our_names(project):
    (project / "exp.knlp").write_text(KNLP_FILE)
    out = make(project, "import-knlp", "FILE=exp.knlp", "NAME=from-knlp")
    assert out.returncode == 0, out.stderr
    assert "knlp defaults applied" in out.stdout and "NUM_WORKERS" in out.stdout
    saved = (project / "defconfigs/from-knlp").read_text()
    assert saved.startswith("# knlp-style tiny run")
    assert "SELECT" not in saved and "CONFIG_TRAIN_MAX_TIME=60" in saved
    assert not (project / ".config").exists()
    assert make(project, "defconfig-from-knlp").returncode == 0
    values = load_config_py(project)
    assert (values["GPT2_MAX_ITERS"], values["GPT2_BLOCK_SIZE"], values["TRAIN_MAX_TIME"]) == (
        10000,
        1024,
        60,
    )


def test_a_knlp_file_in_defconfigs_loads_with_its_report(project):
    (project / "defconfigs/knlp-exp").write_text(KNLP_FILE)
    out = make(project, "defconfig-knlp-exp")
    assert out.returncode == 0, out.stderr
    assert "knlp format" in out.stdout and load_config_py(project)["GPT2_MAX_ITERS"] == 10000


def test_a_refused_knlp_file_names_the_feature_and_writes_nothing(project):
    variant = 'CONFIG_MLA_VARIANT="ksplice_asym"\n'  # knlp's asymmetric split-KV: not here
    (project / "exp.knlp").write_text(KNLP_FILE + "CONFIG_ENABLE_MLA=y\n" + variant)
    out = make(project, "import-knlp", "FILE=exp.knlp")
    assert out.returncode != 0
    assert "asymmetric split-KV" in out.stderr and "Traceback" not in out.stderr
    assert not (project / ".config").exists()
