"""``lm-eval-fin export``: our lm-eval runs in the formats results travel in.

* ``--format eee``: Every Eval Ever records (the EvalEval coalition's schema 0.3.0), one
  aggregate file and one instance-level file per run and task, laid out as its datastore
  wants them (``data/<task>/<developer>/<model>/<uuid>.json`` and ``<uuid>_samples.jsonl``);
  :mod:`lm_eval_fin.export.eee`.
* ``--format model-index``: the ``model-index`` block of a Hugging Face model card, one entry
  per task with its headline metrics; :mod:`lm_eval_fin.export.model_index`.
* ``--format eval-results``: the hub's ``.eval_results/<task>.yaml`` files of a model
  repository, one result per task with a hub dataset id; :mod:`lm_eval_fin.export.eval_results`.

All say the same things about a run (:mod:`lm_eval_fin.export.facts`): the model's hub id and
the weights as run, each metric's scale and direction (the benchmark's ``scales`` table and the
task's ``higher_is_better``), its uncertainty, the data's source (hub dataset, shipped sample
or local file with its sha256), the judge and its prompt version, the BERTScore model, the
generation settings and the metrics with no value, with why; none holds a local path. The runs
are read with :mod:`lm_eval_fin.outputs.runfiles` only.
"""
