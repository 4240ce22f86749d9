"""How far to trust a judge: its agreement with people, with another judge and with itself
(``lm-eval-fin agreement``; docs/agreement.md).

* :mod:`~lm_eval_fin.agreement.stats`: the statistics, pure (scipy.stats, scikit-learn);
  :mod:`~lm_eval_fin.agreement.settings`: their defaults;
* :mod:`~lm_eval_fin.agreement.criteria`: what is compared per benchmark, on which scale;
* :mod:`~lm_eval_fin.agreement.labels`: people's label files;
* :mod:`~lm_eval_fin.agreement.matching`: judged runs (through :mod:`lm_eval_fin.outputs.runfiles`)
  and labels on the same answers;
* :mod:`~lm_eval_fin.agreement.study`: the comparisons;
  :func:`~lm_eval_fin.agreement.study.judge_stability` for repeated runs of one judge;
* :mod:`~lm_eval_fin.agreement.template`: a label template for annotators;
* :mod:`~lm_eval_fin.agreement.command`: the subcommand.

Nothing is imported here: the command's arguments load without scipy and scikit-learn.
"""
