"""`import tfviz` and the modules that need no model load without torch (seconds to import):
the package's public names are lazy, and these modules import torch nowhere at module level."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

TORCH_FREE = (
    "tfviz",
    "tfviz.messages",
    "tfviz.words",
    "tfviz.core.modes",
    "tfviz.settings",
    "tfviz.core.config",
    "tfviz.training.recipes",
    "tfviz.experiments.atlas_cells",
    "tfviz.experiments.atlas_store",
    "tfviz.experiments.atlas_stats",
    "tfviz.plots.atlas",
    "tfviz.experiments.stats",
    "tfviz.serve.tally",
    "tfviz.core.metrics",
    "tfviz.plots",
    "tfviz.plots.export",
    "tfviz.plots.standalone",
)


def _loads_torch(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def test_modules_that_need_no_model_do_not_import_torch():
    code = f"import sys; import {', '.join(TORCH_FREE)}; assert 'torch' not in sys.modules"
    done = _loads_torch(code)
    assert done.returncode == 0, done.stderr


def test_the_public_names_still_load_on_first_use():
    # The check above must be able to fail: touching a lazy name loads torch.
    code = (
        "import sys, tfviz; assert 'torch' not in sys.modules; "
        "from tfviz import Encoder, train; import tfviz.core.model; "
        "assert Encoder is tfviz.core.model.Encoder and 'torch' in sys.modules; "
        "assert all(hasattr(tfviz, name) for name in tfviz.__all__)"
    )
    done = _loads_torch(code)
    assert done.returncode == 0, done.stderr
    missing = _loads_torch("import tfviz; tfviz.no_such_name")
    assert "has no attribute 'no_such_name'" in missing.stderr


def test_tfviz_train_stays_the_function_after_its_module_is_imported():
    # Importing the submodule tfviz.training.train (tfviz.training.ensemble does) must not hide the
    # function.
    code = (
        "import tfviz.training.ensemble, tfviz.training.train; from tfviz import train; "
        "assert callable(train) and train.__module__ == 'tfviz.training.train', train"
    )
    done = _loads_torch(code)
    assert done.returncode == 0, done.stderr
