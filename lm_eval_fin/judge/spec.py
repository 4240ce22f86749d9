"""Judge specs: one string names the backend and the model, the same on every subcommand.

    vllm:<model>                          in-process vLLM engine (GPU)
    openai:<base url>[,<base url>...]#<model>   OpenAI-compatible server(s): vllm serve, SGLang, TGI, OpenAI
    hf:<model id or path>[#<gguf>]        transformers, CPU or GPU

Each backend module registers its kind here (:func:`register_backend`): how the part after
``<kind>:`` reads, how the backend is built, and what to check before a run. Nothing outside
the backend modules names a backend; :mod:`lm_eval_fin.judge` imports them all, so the
registry is full whenever a spec is parsed.

>>> parse_spec("openai:http://127.0.0.1:8000/v1#Qwen/Qwen2.5-7B-Instruct").model
'Qwen/Qwen2.5-7B-Instruct'
>>> parse_spec("hf:/models/smol#smol.Q4.gguf").gguf_file
'smol.Q4.gguf'
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lm_eval_fin.judge.base import JudgeConfigError

if TYPE_CHECKING:
    from lm_eval_fin.judge.options import JudgeOptions


class JudgeSpecError(JudgeConfigError):
    """A judge spec that names no known backend or lacks a part."""


@dataclass(frozen=True)
class JudgeSpec:
    """A parsed spec. ``base_urls``: the endpoints of an openai judge (several serve one model),
    sorted, so the same set in any order is one judge (and one cache key)."""

    backend: str
    model: str
    base_urls: tuple[str, ...] = ()
    gguf_file: str | None = None

    @property
    def base_url(self) -> str | None:
        return self.base_urls[0] if self.base_urls else None

    def __str__(self) -> str:
        where = f"{','.join(self.base_urls)}#" if self.base_urls else ""
        file = f"#{self.gguf_file}" if self.gguf_file else ""
        return f"{self.backend}:{where}{self.model}{file}"


@dataclass(frozen=True)
class BackendKind:
    """What a backend module registers.

    ``parse`` reads the part of a spec after ``<name>:`` (stripped), None when malformed;
    ``build(spec, options)`` makes the backend (nothing heavy: a model loads on the first
    miss); ``problem(spec)`` says in one line why the judge cannot work here, or None;
    ``ready`` says what a passed check means (``lm-eval-fin doctor``)."""

    name: str
    form: str
    parse: Callable[[str], JudgeSpec | None]
    build: Callable[[JudgeSpec, JudgeOptions], Any]
    problem: Callable[[JudgeSpec], str | None]
    ready: str
    example: str = ""


_KINDS: dict[str, BackendKind] = {}


def register_backend(kind: BackendKind) -> None:
    _KINDS[kind.name] = kind


def backend_kind(name: str) -> BackendKind:
    return _KINDS[name]


def spec_forms() -> str:
    """The forms of every registered kind, for messages: ``a, b or c``."""
    forms = [kind.form for kind in _KINDS.values()]
    return ", ".join(forms[:-1]) + f" or {forms[-1]}" if len(forms) > 1 else "".join(forms)


def parse_spec(spec: str) -> JudgeSpec:
    """Parse a judge spec; :class:`JudgeSpecError` says what is wrong and what is expected."""
    text = (spec or "").strip()
    name, colon, rest = text.partition(":")
    kind = _KINDS.get(name) if colon else None
    if kind is None:
        raise JudgeSpecError(f"bad judge spec {spec!r}: expected {spec_forms()}")
    parsed = kind.parse(rest.strip())
    if parsed is None:
        example = f", e.g. {kind.example}" if kind.example else ""
        raise JudgeSpecError(f"bad judge spec {spec!r}: expected {kind.form}{example}")
    return parsed
