"""Persistent judge cache: one sqlite3 file in WAL mode, shared by every process of a user.

Key. ``sha256`` of the canonical JSON of (key version, judge spec, messages, max_tokens,
temperature, seed, output constraint, attempt), after the judge's options filled in what
the request left open. Any change to one of them is another entry; nothing else (the
caller, the task, the time) is part of it, so the same question asked by two tasks, or by
two runs, is answered once. The judge spec is the full user-facing string: an
OpenAI-compatible server at another address is another judge.

Only answers are stored, never failures: a re-run asks again for what failed.

Sharing. WAL lets readers and one writer work at once; writers wait on each other through a
busy timeout. Every answer is committed in its own short transaction as soon as it arrives
(a chunk of answers for the batched local backends), so a run killed half way keeps all
it had finished, and a second process sees them at once. A connection is opened per
process (and re-opened after ``fork``); within a process a lock serialises its use, because
the openai backend writes from its event-loop thread.

Path: ``$LM_EVAL_FIN_CACHE``, else ``judge.sqlite`` under :func:`lm_eval_fin.paths.cache_home`.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from lm_eval_fin import paths
from lm_eval_fin.judge.base import JudgeRequest

CACHE_ENV = "LM_EVAL_FIN_CACHE"
# Bump when the meaning of a cached entry changes (prompt rendering, key fields).
KEY_VERSION = 1
# Well below SQLite's historical limit of 999 host parameters per statement.
_LOOKUP_CHUNK = 900

_SCHEMA = """
CREATE TABLE IF NOT EXISTS completions (
    key TEXT PRIMARY KEY,
    judge TEXT NOT NULL,
    text TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    created REAL NOT NULL
) WITHOUT ROWID
"""


def default_cache_path() -> Path:
    override = os.environ.get(CACHE_ENV)
    return Path(override) if override else paths.cache_home() / "judge.sqlite"


def cache_key(judge_spec: str, request: JudgeRequest) -> str:
    """The cache key of a request whose decoding parameters are already resolved."""
    payload = {
        "v": KEY_VERSION,
        "judge": judge_spec,
        "messages": [dict(message) for message in request.messages],
        "max_tokens": None if request.max_tokens is None else int(request.max_tokens),
        # 0 and 0.0 must be one key
        "temperature": None if request.temperature is None else float(request.temperature),
        "seed": None if request.seed is None else int(request.seed),
        "constraint": request.constraint,
        "attempt": int(request.attempt),
    }
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class CachedAnswer:
    text: str
    prompt_tokens: int
    completion_tokens: int


class JudgeCache:
    """Answers by cache key. Safe to use from several threads and several processes."""

    def __init__(self, path: str | os.PathLike | None = None, busy_timeout_s: float = 60.0):
        self.path = Path(path) if path is not None else default_cache_path()
        self.busy_timeout_s = busy_timeout_s
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid: int | None = None

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None or self._pid != os.getpid():
            # a connection inherited through fork belongs to the parent: never reuse it
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(
                self.path, timeout=self.busy_timeout_s, isolation_level=None, check_same_thread=False
            )
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_s * 1000)}")
            conn.execute("PRAGMA journal_mode = WAL")
            # with WAL, NORMAL stays consistent after a crash; a power loss may lose the
            # last few answers, which a re-run asks again
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute(_SCHEMA)
            self._conn, self._pid = conn, os.getpid()
        return self._conn

    def get_many(self, keys: Sequence[str]) -> dict[str, CachedAnswer]:
        """The cached answers among ``keys`` (missing keys are absent from the result)."""
        unique = list(dict.fromkeys(keys))
        found: dict[str, CachedAnswer] = {}
        with self._lock:
            conn = self._connection()
            for start in range(0, len(unique), _LOOKUP_CHUNK):
                chunk = unique[start : start + _LOOKUP_CHUNK]
                marks = ",".join("?" * len(chunk))
                rows = conn.execute(
                    f"SELECT key, text, prompt_tokens, completion_tokens FROM completions "
                    f"WHERE key IN ({marks})",
                    chunk,
                )
                for key, text, prompt_tokens, completion_tokens in rows:
                    found[key] = CachedAnswer(text, prompt_tokens, completion_tokens)
        return found

    def get(self, key: str) -> CachedAnswer | None:
        return self.get_many([key]).get(key)

    def put_many(self, judge_spec: str, items: Iterable[tuple[str, CachedAnswer]]) -> None:
        """Store answers in one short transaction."""
        now = time.time()
        rows = [
            (key, judge_spec, answer.text, answer.prompt_tokens, answer.completion_tokens, now)
            for key, answer in items
        ]
        if not rows:
            return
        insert = "INSERT OR REPLACE INTO completions VALUES (?, ?, ?, ?, ?, ?)"
        with self._lock:
            conn = self._connection()
            if len(rows) == 1:  # autocommit: the statement is its own transaction
                conn.execute(insert, rows[0])
                return
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany(insert, rows)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def put(self, judge_spec: str, key: str, answer: CachedAnswer) -> None:
        self.put_many(judge_spec, [(key, answer)])

    def __len__(self) -> int:
        with self._lock:
            return self._connection().execute("SELECT COUNT(*) FROM completions").fetchone()[0]

    def journal_mode(self) -> str:
        with self._lock:
            return self._connection().execute("PRAGMA journal_mode").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None
