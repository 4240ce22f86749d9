"""The ``tests/utils.py`` of lm-eval's ``tests/test_tasks.py`` (not in lm-eval's source
distribution) when ``tests/test_lm_eval_task_tests.py`` runs that file: ``new_tasks()`` names the
tasks to test, as lm-eval's CI names the tasks of a changed folder."""

import json
import os


def new_tasks() -> list[str]:
    return json.loads(os.environ["LM_EVAL_FIN_RIG_TASKS"])
