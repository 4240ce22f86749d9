"""Challenge-format records written by the tests themselves (no reference data is read)."""

import json

DOC_TYPES = ["DEF14A", "10-K", "10-Q", "8-K", "Earnings"]


def document_prompt(question):
    types = "\n\n".join(f"[Document Index {i}] {t}" for i, t in enumerate(DOC_TYPES))
    return (
        "Rank the following financial document types by relevance to answer the question. "
        "Provide your ranking as a list of indices from most relevant to least relevant.\n\n"
        f"Question: {question}\n\nDocument Types to rank:\n{types}\n\n"
        "Your response must be a list of indices in exact list format (e.g., [4, 2, 1, 0, 3]), "
        "ranking every index from 0 to 4."
    )


def chunk_prompt(question, chunks):
    body = "\n\n".join(f"[Chunk Index {i}] {c}" for i, c in enumerate(chunks))
    return (
        f"Rank the chunks by relevance.\n\nQuestion: {question}\n\nChunks to rank:\n{body}\n\n"
        "Your response must be a list of the 10 most relevant chunk indices, e.g. [3, 0, 7]."
    )


def document_record(uid, question, qrel=None, id_key="uuid"):
    record = {id_key: uid, "messages": [{"role": "user", "content": document_prompt(question)}]}
    if qrel is not None:
        record["qrel"] = qrel
    return record


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path
