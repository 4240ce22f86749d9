"""Dataset builders reached through ``lm-eval-fin build`` (see :mod:`lm_eval_fin.builders.cli`)."""
