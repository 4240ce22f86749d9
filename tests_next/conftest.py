"""lm-eval's pre-release check (``make test-next``): every task run by the real ``lm_eval`` of
``.venv-next`` (``make install-next``). Kept out of ``make test`` (``testpaths = tests``): it
starts a second lm-eval for each benchmark and takes minutes; ``.ci/run`` runs it as a step of
its own. The test drives .venv-next's commands from this (``.venv``) pytest; the hub stays off."""

import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
