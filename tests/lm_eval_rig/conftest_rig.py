"""The conftest.py of lm-eval's own ``tests/test_tasks.py`` when ``tests/test_lm_eval_task_tests.py``
runs that file on our task folder.

lm-eval's CI points the file at a changed task folder through ``tests/utils.py``'s ``new_tasks()``
(here ``utils_rig.py``) and loads those tasks with a default ``TaskManager()``. A default manager
here reads our task folder, and only it, with the data the calling test made (``--metadata``
sections per benchmark, in ``$LM_EVAL_FIN_RIG_METADATA``)."""

import json
import os

from lm_eval.tasks import TaskManager

from lm_eval_fin.harness.multistep import MultiStepLM
from lm_eval_fin.plumbing import paths

METADATA = json.loads(os.environ["LM_EVAL_FIN_RIG_METADATA"])
lm_eval_init = TaskManager.__init__


def our_task_folder(self, verbosity=None, include_path=None, include_defaults=True, metadata=None):
    if include_path is None:
        include_path, include_defaults = str(paths.tasks_dir()), False
    lm_eval_init(self, verbosity, include_path, include_defaults, METADATA if metadata is None else metadata)


TaskManager.__init__ = our_task_folder
# the multi-step tasks load only beside a fin-refine model, as in a run with --model fin-refine
REFINE_MODEL = MultiStepLM(base="dummy")
