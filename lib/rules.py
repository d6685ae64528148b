"""Every package's rules across its symbols, registered with the configuration
layer (lib/config/rules.py), which loads this module by name on its first
check. A package that adds a rules.py lists it here; tests/test_layers.py
checks that none is left out.
"""

# Imported in the order a configuration's problems are listed: the model, the
# optimizer, the run's length, what runs within it.
from lib.model import rules as model_rules  # noqa: I001
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
