"""The registry of every package's registrations with the layers below it: its
rules across symbols (lib/config/rules.py) and, for lib/bench and lib/eval, the
trainer's analyses (lib/train/hooks.py). Every script has lib/cli.py hand its
import down, run on the first configuration check (the tests import it in
tests/conftest.py); lib/config/rules.py refuses to check a configuration, and
a trainer to start, without it. A package
that adds a rules.py lists it here; tests/test_layers.py checks that none is
left out.
"""

# Imported in the order a configuration's problems are listed: the model, the
# optimizer, the run's length, what runs within it.
from lib.config.rules import owners_registered  # noqa: I001
from lib.model import rules as model_rules
from lib.optim import rules as optim_rules
from lib.train import rules as train_rules
from lib.prune import rules as prune_rules
from lib.bench import rules as bench_rules
from lib.tune import rules as tune_rules
from lib.eval import rules as eval_rules

MODULES = (
    model_rules,
    optim_rules,
    train_rules,
    prune_rules,
    bench_rules,
    tune_rules,
    eval_rules,
)

owners_registered([module.__name__ for module in MODULES])
