"""The package list, found by pattern: every package folder under lm_eval_fin/, plus tasks/ and
metrics/ shipped as lm_eval_fin.tasks and lm_eval_fin.metrics (setup.cfg's package_dir, which
setup.cfg's ``find:`` cannot see). Everything else is in setup.cfg."""

from setuptools import find_packages, setup

setup(packages=[*find_packages(include=["lm_eval_fin", "lm_eval_fin.*"]), "lm_eval_fin.tasks", "lm_eval_fin.metrics"])
