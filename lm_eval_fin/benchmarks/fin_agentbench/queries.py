"""FinAgentBench chunk-ranking records as FinCARDS queries: what ``lm-eval-fin rerank``
(:mod:`lm_eval_fin.rerank.command`) runs on."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lm_eval_fin.benchmarks.fin_agentbench.data import load_records
from lm_eval_fin.benchmarks.fin_agentbench.prompt import parse_challenge_prompt, prompt_text
from lm_eval_fin.rerank import doctype
from lm_eval_fin.rerank.pipeline import Query


def read_queries(data: str) -> list[Query]:
    """The queries of a chunk-ranking challenge JSONL file, or of a folder of
    chunk_ranking*.jsonl (:class:`~lm_eval_fin.benchmarks.fin_agentbench.data.ChallengeFormatError`
    or OSError when it cannot be read)."""
    return queries_from_records(load_records(data, kind="chunk"))


def _outside_chunks(text: str, chunks: Mapping[int, str]) -> str:
    """The prompt without the chunks' text: the instruction, the question and the markers."""
    for body in chunks.values():
        if body:
            text = text.replace(body, " ")
    return text


def queries_from_records(records: Sequence[Mapping[str, Any]]) -> list[Query]:
    """Queries from challenge records (see :mod:`~lm_eval_fin.benchmarks.fin_agentbench.data`),
    with their filing type (:func:`lm_eval_fin.rerank.doctype.document_type`). A record whose
    prompt lists no chunks becomes a query with no chunks (an empty ranking, scores 0)."""
    queries = []
    for record in records:
        text = prompt_text(record)
        question, chunks = parse_challenge_prompt(text)
        form, source = doctype.document_type(record, _outside_chunks(text, chunks), chunks.values())
        qrel = record.get("qrel")
        queries.append(
            Query(
                id=str(record.get("uuid", record.get("_id"))),
                question=question,
                chunks=chunks,
                qrel={str(k): v for k, v in qrel.items()} if qrel is not None else None,
                doc_type=form,
                doc_type_from=source,
            )
        )
    return queries
