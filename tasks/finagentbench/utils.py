"""Adapters between lm-eval and lm_eval_fin for the FinAgentBench ranking tasks."""

import json

import datasets

from lm_eval_fin import finagentbench
from lm_eval_fin.ranking import GAINS, parse_ranking, rank_metrics

DOC_K = 5
CHUNK_K = 10


def _load(kind, data_path=None, gain="exponential", **_):
    if not data_path:
        raise ValueError(
            f"fin_agentbench needs its data: pass --metadata '{{\"data_path\": \"<file or folder>\"}}' "
            f"with {finagentbench.EXPECTED}. There is no hub copy; see tasks/finagentbench/README.md."
        )
    if gain not in GAINS:
        raise ValueError(f"metadata 'gain' must be one of {GAINS}, got {gain!r}")
    records = finagentbench.load_records(data_path, kind)
    documents = finagentbench.to_documents(records, gain, with_labels=kind == "document")
    return {"test": datasets.Dataset.from_list(documents)}


def load_document_ranking(**metadata):
    return _load("document", **metadata)


def load_chunk_ranking(**metadata):
    return _load("chunk", **metadata)


def _process(doc, results, k):
    if not doc["qrel"]:
        raise ValueError(
            f"record {doc['id']} has no 'qrel' (an eval file without grades): it cannot be "
            "scored; run it with --predict_only --log_samples to collect the rankings"
        )
    labels = {int(k): v for k, v in json.loads(doc["labels"]).items()}
    ranking = parse_ranking(results[0], doc["candidates"], labels=labels)
    scores = rank_metrics(ranking, json.loads(doc["qrel"]), k=k, gain=doc["gain"])
    return {
        f"ndcg@{k}": scores["ndcg"],
        f"map@{k}": scores["map"],
        f"mrr@{k}": scores["mrr"],
        "parse_failure": float(ranking is None),
    }


def process_results_doc(doc, results):
    return _process(doc, results, DOC_K)


def process_results_chunk(doc, results):
    return _process(doc, results, CHUNK_K)
