"""Judge specs: one string names the backend and the model, the same on every subcommand.

    vllm:<model>                     in-process vLLM engine (GPU)
    openai:<base url>#<model>        any OpenAI-compatible server (vllm serve, SGLang, TGI, OpenAI)
    hf:<model id or path>[#<gguf>]   transformers, CPU or GPU

>>> parse_spec("openai:http://127.0.0.1:8000/v1#Qwen/Qwen2.5-7B-Instruct").model
'Qwen/Qwen2.5-7B-Instruct'
>>> parse_spec("hf:/models/smol#smol.Q4.gguf").gguf_file
'smol.Q4.gguf'
"""

from __future__ import annotations

from dataclasses import dataclass

from lm_eval_fin.judge.base import JudgeConfigError

BACKENDS = ("vllm", "openai", "hf")
SPEC_FORMS = "vllm:<model>, openai:<base url>#<model> or hf:<model id or path>[#<gguf file>]"


class JudgeSpecError(JudgeConfigError):
    """A judge spec that names no known backend or lacks a part."""


@dataclass(frozen=True)
class JudgeSpec:
    backend: str
    model: str
    base_url: str | None = None
    gguf_file: str | None = None

    def __str__(self) -> str:
        if self.backend == "openai":
            return f"openai:{self.base_url}#{self.model}"
        if self.gguf_file:
            return f"{self.backend}:{self.model}#{self.gguf_file}"
        return f"{self.backend}:{self.model}"


def parse_spec(spec: str) -> JudgeSpec:
    """Parse a judge spec; :class:`JudgeSpecError` says what is wrong and what is expected."""
    text = (spec or "").strip()
    backend, colon, rest = text.partition(":")
    if not colon or backend not in BACKENDS:
        raise JudgeSpecError(f"bad judge spec {spec!r}: expected {SPEC_FORMS}")
    rest = rest.strip()
    if backend == "openai":
        base_url, _, model = rest.partition("#")
        base_url, model = base_url.strip().rstrip("/"), model.strip()
        if not base_url.startswith(("http://", "https://")) or not model:
            raise JudgeSpecError(
                f"bad judge spec {spec!r}: expected openai:<base url>#<model>, "
                "e.g. openai:http://127.0.0.1:8000/v1#Qwen/Qwen2.5-7B-Instruct"
            )
        return JudgeSpec("openai", model, base_url=base_url)
    if backend == "hf":
        model, _, gguf_file = rest.rpartition("#") if "#" in rest else (rest, "", "")
        model, gguf_file = model.strip(), gguf_file.strip()
        if not model or ("#" in rest and not gguf_file):
            raise JudgeSpecError(f"bad judge spec {spec!r}: expected hf:<model id or path>[#<gguf file>]")
        return JudgeSpec("hf", model, gguf_file=gguf_file or None)
    if not rest or "#" in rest:
        raise JudgeSpecError(f"bad judge spec {spec!r}: expected vllm:<model>")
    return JudgeSpec("vllm", rest)
