"""Shared fixtures. Tests never touch the network or the reference material outside the repo; the hub is off."""

import json
import os
import zipfile
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# The embedded model's threads, for this process and the commands it starts (OpenMP reads the
# variable when torch loads): the CPUs the machine's load leaves free. On a shared machine a
# second thread waiting for its core makes generation several times slower (bench/bench_demo_threads.py).
from lm_eval_fin.plumbing.cpus import compute_threads  # noqa: E402

os.environ.setdefault("OMP_NUM_THREADS", str(compute_threads()))

import pytest  # noqa: E402

from lm_eval_fin.plumbing import paths  # noqa: E402


@pytest.fixture(scope="session")
def embedded_model_dir():
    """The embedded SmolLM2-135M-Instruct as a transformers folder (converted once per machine)."""
    return paths.embedded_model()


@pytest.fixture(scope="session")
def embedded_judge_spec(embedded_model_dir):
    """Judge spec that runs the embedded model through the transformers backend."""
    return f"hf:{embedded_model_dir}"


@pytest.fixture
def judge_cache(tmp_path, monkeypatch):
    """A private judge cache for one test."""
    path = tmp_path / "judge-cache.sqlite"
    monkeypatch.setenv("LM_EVAL_FIN_CACHE", str(path))
    return path


EEE_WHEELS = Path(__file__).resolve().parents[1] / ".cache" / "every-eval-ever"


@pytest.fixture(scope="session")
def schemas() -> tuple[dict, dict]:
    """The aggregate and instance-level schemas, read out of the every-eval-ever wheel."""
    from lm_eval_fin.export import eee

    wheels = sorted(EEE_WHEELS.glob(f"every_eval_ever-{eee.SCHEMA_VERSION}-*.whl"))
    if not wheels:
        pytest.fail(f"no every-eval-ever {eee.SCHEMA_VERSION} wheel in {EEE_WHEELS}: `make install` downloads it "
                    f"(pip download --no-deps --only-binary=:all: --python-version 3.12 --dest {EEE_WHEELS} "
                    f"every-eval-ever=={eee.SCHEMA_VERSION})")
    with zipfile.ZipFile(wheels[0]) as wheel:
        return tuple(json.loads(wheel.read(f"every_eval_ever/schemas/{name}"))  # type: ignore[return-value]
                     for name in ("eval.schema.json", "instance_level_eval.schema.json"))
