"""``fin-refine`` reaches lm-eval through its entry point (setup.cfg, group ``lm_eval.models`` of
lm-eval's plug-in proposal), not through an import of its module by hand: in a fresh process of
lm-eval 0.4.13 (``.venv``; the pre-release's case is in ``tests_next/``, run by ``make test-next``), :func:`lm_eval_fin.harness.compat.register_plugins` and then lm-eval's own
registry lookup find the wrapper, its module loaded only when lm-eval asks for it. Neither release
reads the group itself (an lm-eval with ``load_plugins`` does; compat then leaves it to lm-eval)."""

import importlib.metadata
import subprocess
import sys
from pathlib import Path

from lm_eval_fin.harness import compat

LOOKUP = """
import sys
import importlib.metadata as md
from lm_eval_fin.harness import compat
print(md.version("lm_eval"))
print(compat.register_plugins())
print("lm_eval_fin.harness.multistep" in sys.modules)
from lm_eval.api.registry import get_model
model = get_model("fin-refine")
print(f"{model.__module__}:{model.__qualname__}", get_model("dummy").__name__, get_model("hf").__name__)
print(compat.register_plugins())
"""


def test_the_installed_package_declares_fin_refine_in_lm_evals_model_group():
    (entry_point,) = [ep for ep in importlib.metadata.entry_points(group="lm_eval.models") if ep.name == "fin-refine"]
    assert entry_point.dist is not None and entry_point.dist.name == compat.DISTRIBUTION
    from lm_eval_fin.harness.multistep import MODEL_NAME, MultiStepLM

    assert entry_point.load() is MultiStepLM and entry_point.name == MODEL_NAME
    assert [ep.name for ep in compat.plugin_entry_points()] == ["fin-refine"]


def registry_lookup(python: Path, folder: Path) -> str:
    """In a fresh process of ``python``: our plug-ins registered, then lm-eval's own registry
    finds fin-refine (and still its own models) with the wrapper's module loaded only then.
    Returns the lm-eval version that ran."""
    done = subprocess.run([python, "-c", LOOKUP], cwd=folder, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    version, registered, loaded_early, found, again = done.stdout.splitlines()[-5:]
    assert registered == "['fin-refine']" and loaded_early == "False"
    # lm-eval's own models still listed beside ours
    assert found == "lm_eval_fin.harness.multistep:MultiStepLM DummyLM HFLM"
    assert again == "[]"  # registered once
    return version


def test_lm_evals_registry_finds_fin_refine_with_no_hand_import(tmp_path):
    assert registry_lookup(Path(sys.executable), tmp_path).startswith("0.4.")
