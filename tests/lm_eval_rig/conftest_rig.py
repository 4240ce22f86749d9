"""The conftest.py of lm-eval's own ``tests/test_tasks.py`` when ``tests/test_lm_eval_task_tests.py``
runs that file on our task folder.

lm-eval's CI points the file at a changed task folder through ``tests/utils.py``'s ``new_tasks()``
(here ``utils_rig.py``) and loads those tasks with a default ``TaskManager()``. A default manager
here reads our task folder, and only it, with the calling test's ``--metadata`` (a section per
benchmark naming its shipped sample, in ``$LM_EVAL_FIN_RIG_METADATA``): nothing else, no model."""

import json
import os

from lm_eval.tasks import TaskManager

from lm_eval_fin.plumbing import paths

METADATA = json.loads(os.environ["LM_EVAL_FIN_RIG_METADATA"])
lm_eval_init = TaskManager.__init__


def our_task_folder(self, verbosity=None, include_path=None, include_defaults=True, metadata=None):
    if include_path is None:
        include_path, include_defaults = str(paths.tasks_dir()), False
    lm_eval_init(self, verbosity, include_path, include_defaults, METADATA if metadata is None else metadata)


TaskManager.__init__ = our_task_folder
