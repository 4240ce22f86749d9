"""``make bench`` on a machine without vLLM: bench_vllm's rows are one row that says how to get
them, in the shape run_all.py prints (a fresh clone has neither vLLM in .venv nor .venv-vllm)."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_without_vllm_bench_vllm_says_how_to_get_its_rows(tmp_path, monkeypatch, capsys):
    bench_vllm = _load("bench_vllm")
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *args: None if name == "vllm" else find_spec(name))
    monkeypatch.setattr(bench_vllm, "VLLM_PYTHON", tmp_path / "no-venv-vllm" / "bin" / "python")
    (row,) = bench_vllm.run()
    assert row["ours"] is None and "make install-vllm" in row["note"]
    assert set(row) == {"figure", "ours", "peer", "ratio", "unit", "note"}
    # run_all prints it in its table, and a module that fails would make it exit 1
    run_all = _load("run_all")
    monkeypatch.setattr(run_all, "_load", lambda path: bench_vllm)
    assert run_all.main(["bench_vllm"]) == 0
    assert "not measured: no vLLM here" in capsys.readouterr().out

