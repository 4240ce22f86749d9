"""Persistent judge cache: one sqlite3 file in WAL mode, shared by every process of a user on one host.

Key. ``sha256`` of the canonical JSON of (key version, judge spec, messages, max_tokens,
temperature, seed, output constraint, attempt), after the judge's options filled in what
the request left open. Any change to one of them is another entry; nothing else (the
caller, the task, the time) is part of it, so the same question asked by two tasks, or by
two runs, is answered once. The judge spec is the full user-facing string: an
OpenAI-compatible server at another address is another judge (several endpoints of one
model, ``openai:URL1,URL2#model``, are one judge, whatever their order).

Only answers are stored, never failures: a re-run asks again for what failed. An answer the
caller could not parse is stored like any other; see ``retry_unparsable`` in
:mod:`lm_eval_fin.judge.options` for how a re-run treats it. A reply longer than the judge's
``max_reply_bytes`` is not stored (:func:`oversized_reply`): a server that ignores
``max_tokens`` must not fill the disk, and such a reply is a failure of its request.

Sharing. WAL lets readers and one writer work at once; writers wait on each other through a
busy timeout. Every answer is committed in its own short transaction as soon as it arrives
(a chunk of answers for the batched local backends), so a run killed half way keeps all
it had finished, and a second process sees them at once. A connection is opened per
process (and re-opened after ``fork``); within a process a lock serialises its use, because
the openai backend writes from its event-loop thread.

One host. WAL keeps its index in shared memory beside the file, which processes on other
hosts do not see (SQLite documents WAL as unusable over a network file system), so a cache
file belongs to one host: never point ``$LM_EVAL_FIN_CACHE`` of several hosts at one file
on a shared disk. Answers are not shared between hosts: the scale-out recipe (docs/judges.md,
"Several servers") runs every command on one driver host, whose cache holds every answer,
with the models on the servers.

Claims. Before a judge sends a request it *claims* its key (a row in ``claims``), so that two
processes judging the same data do not both send it: a key another live process has claimed
is waited for (its answer appears in ``completions``) rather than sent. A claim names its
process (host, pid and the pid's start time, so a reused pid is not taken for the dead
claimant); a claim whose process is gone is taken over. A claim under another host name
(a file copied from another machine, a container whose host name changed) cannot be checked
that way and expires ``CLAIM_LEASE_S`` seconds after its owner last stored an answer. A
failed request releases its claim at once; the others are released when their batch ends.

Errors. A file that is not a usable cache (not sqlite, corrupt, read-only, a table of
another shape, a folder that cannot be created) raises :class:`JudgeCacheError`, whose
message names the file and the fix, never a bare ``sqlite3`` error.

Path: ``$LM_EVAL_FIN_CACHE``, else ``judge.sqlite`` under :func:`lm_eval_fin.plumbing.paths.cache_home`.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from lm_eval_fin.judge.base import JudgeRequest
from lm_eval_fin.plumbing import paths
from lm_eval_fin.text.cleantext import one_line

CACHE_ENV = "LM_EVAL_FIN_CACHE"
# Bump when the meaning of a cached entry changes (prompt rendering, key fields).
KEY_VERSION = 1
# Well below SQLite's historical limit of 999 host parameters per statement.
_LOOKUP_CHUNK = 900
# A claim under another host name expires this long after its owner last showed signs of life.
CLAIM_LEASE_S = 600.0
# How often an owner refreshes its claims' heartbeat while it stores answers.
_HEARTBEAT_EVERY_S = 30.0

_COMPLETIONS = """
CREATE TABLE IF NOT EXISTS completions (
    key TEXT PRIMARY KEY,
    judge TEXT NOT NULL,
    text TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    created REAL NOT NULL
) WITHOUT ROWID
"""
_CLAIMS = """
CREATE TABLE IF NOT EXISTS claims (
    key TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    pid_start TEXT,
    heartbeat REAL NOT NULL
) WITHOUT ROWID
"""
_TABLES = {
    "completions": ["key", "judge", "text", "prompt_tokens", "completion_tokens", "created"],
    "claims": ["key", "owner", "host", "pid", "pid_start", "heartbeat"],
}


class JudgeCacheError(RuntimeError):
    """The judge cache file cannot be used; the message names the file and the way out."""


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


def oversized_reply(text: str, limit: int) -> str | None:
    """Why ``text`` is not stored: it is longer than ``limit`` UTF-8 bytes; None when it fits.

    >>> oversized_reply("x" * 10, 8)
    'the judge replied 10 bytes, more than the 8 the judge cache stores (--judge_max_reply_bytes)'
    """
    if 4 * len(text) <= limit:  # a character is at most 4 bytes: no need to count
        return None
    size = len(text.encode("utf-8", "surrogatepass"))
    if size <= limit:
        return None
    return f"the judge replied {size} bytes, more than the {limit} the judge cache stores (--judge_max_reply_bytes)"


@dataclass(frozen=True)
class CachedAnswer:
    text: str
    prompt_tokens: int
    completion_tokens: int
    created: float = field(default=0.0, compare=False)  # time.time() when stored


def _proc_stat(pid: int) -> list[bytes] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (Linux); None where unreadable."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            # the command name (field 2) may hold spaces and parentheses: split after its end
            return stat.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _pid_start(pid: int) -> str | None:
    """The start time of process ``pid``, which tells a reused pid apart; None where unknown."""
    fields = _proc_stat(pid)
    return fields[19].decode() if fields and len(fields) > 19 else None


def _pid_alive(pid: int, start: str | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, under another user
    fields = _proc_stat(pid)
    if fields is None:
        return True  # no /proc: the signal check is all there is
    # a zombie (killed, not yet reaped by its parent) sends nothing any more
    return fields[0] != b"Z" and (start is None or fields[19].decode() == start)


@dataclass(frozen=True)
class Claimant:
    """Who claims keys: one batch of one process."""

    owner: str
    host: str
    pid: int
    pid_start: str | None

    @classmethod
    def here(cls) -> Claimant:
        pid = os.getpid()
        return cls(uuid.uuid4().hex, socket.gethostname(), pid, _pid_start(pid))


def _claim_alive(here: Claimant, host: str, pid: int, pid_start: str | None, heartbeat: float) -> bool:
    if host == here.host:
        return _pid_alive(pid, pid_start)
    return time.time() - heartbeat < CLAIM_LEASE_S


def _read_only(path: Path) -> bool:
    """The file, or the folder its journal files go to, cannot be written (by this user, or
    on a read-only file system): sqlite then says only that it is "unable to open" it."""
    return (path.exists() and not os.access(path, os.W_OK)) or (
        path.parent.is_dir() and not os.access(path.parent, os.W_OK | os.X_OK)
    )


def _cache_error(path: Path, exc: BaseException) -> JudgeCacheError:
    """A :class:`JudgeCacheError` that says what is wrong with the file at ``path`` and what to do.

    A read-only cache is an error, not a cache to read from: every answer the run receives and
    every claim go into it, so read-only it would lose the run's judge work (a killed run
    could not resume, two runs would send the same requests). Its answers are intact, so the
    message never says to delete it."""
    detail = one_line(exc, 200)
    elsewhere = f"or point {CACHE_ENV} at another file"
    lowered = detail.lower()
    read_only = "readonly" in lowered or "read-only" in lowered or isinstance(exc, PermissionError)
    if read_only or ("unable to open" in lowered and _read_only(path)):
        fix = (f"make it and its folder writable, or copy it to a writable folder and point {CACHE_ENV} at the "
               "copy (its answers are kept)")
        what = "is read-only: new answers cannot be stored in it"
    elif "locked" in lowered or "busy" in lowered:
        fix = f"wait for the process holding it to finish, {elsewhere}"
        what = "is locked by another process"
    elif isinstance(exc, OSError):
        fix = f"check the path, {elsewhere}"
        what = "cannot be opened"
    else:
        fix = f"delete it (its cached answers are lost), {elsewhere}"
        what = "is not a usable judge cache"
    return JudgeCacheError(f"the judge cache {path} {what} ({detail}); {fix}")


def _guarded(method):
    """Turn sqlite and file-system errors of a cache method into :class:`JudgeCacheError`."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except (sqlite3.Error, OSError) as exc:
            raise _cache_error(self.path, exc) from exc

    return wrapper


class JudgeCache:
    """Answers by cache key. Safe to use from several threads and several processes."""

    def __init__(self, path: str | os.PathLike | None = None, busy_timeout_s: float = 60.0):
        self.path = Path(path) if path is not None else default_cache_path()
        self.busy_timeout_s = busy_timeout_s
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid: int | None = None
        self._heartbeat_at = 0.0

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None or self._pid != os.getpid():
            # a connection inherited through fork belongs to the parent: never reuse it
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(
                self.path, timeout=self.busy_timeout_s, isolation_level=None, check_same_thread=False
            )
            try:
                self._set_up(conn)
            except BaseException:
                conn.close()
                raise
            self._conn, self._pid = conn, os.getpid()
        return self._conn

    def _set_up(self, conn: sqlite3.Connection) -> None:
        """WAL mode, the tables, the schema check. Switching a new file to WAL while another
        process creates it answers "database is locked" at once, without sqlite's busy wait,
        so that case is waited for here, up to the same busy timeout."""
        deadline = time.monotonic() + self.busy_timeout_s
        while True:
            try:
                conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_s * 1000)}")
                conn.execute("PRAGMA journal_mode = WAL")
                # with WAL, NORMAL stays consistent after a crash; a power loss may lose the
                # last few answers, which a re-run asks again
                conn.execute("PRAGMA synchronous = NORMAL")
                conn.execute(_COMPLETIONS)
                conn.execute(_CLAIMS)
                break
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc).lower() or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        self._check_schema(conn)

    def _check_schema(self, conn: sqlite3.Connection) -> None:
        for table, expected in _TABLES.items():
            columns = [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
            if columns != expected:
                raise JudgeCacheError(
                    f"the judge cache {self.path} has a table '{table}' with the columns {columns}, where "
                    f"{expected} are expected (a file of another program or version); delete it (its cached "
                    f"answers are lost) or point {CACHE_ENV} at another file"
                )

    @_guarded
    def check(self) -> None:
        """Open the file now and try a write that changes nothing: :class:`JudgeCacheError` if
        it is not a usable cache or answers cannot be stored in it (a read-only file opens and
        reads, and would fail only at the first answer, after the model under test ran)."""
        with self._lock:
            conn = self._connection()
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute("DELETE FROM claims WHERE 0")
            finally:
                conn.execute("ROLLBACK")

    @_guarded
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
                    f"SELECT key, text, prompt_tokens, completion_tokens, created FROM completions "
                    f"WHERE key IN ({marks})",
                    chunk,
                )
                for key, text, prompt_tokens, completion_tokens, created in rows:
                    found[key] = CachedAnswer(text, prompt_tokens, completion_tokens, created)
        return found

    def get(self, key: str) -> CachedAnswer | None:
        return self.get_many([key]).get(key)

    @_guarded
    def put_many(self, judge_spec: str, items: Iterable[tuple[str, CachedAnswer]],
                 claimant: Claimant | None = None) -> None:
        """Store answers in one short transaction (``claimant``: refresh its claims' heartbeat
        now and then, so claims of a live owner under another host name do not expire)."""
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
            if claimant is not None and now - self._heartbeat_at > _HEARTBEAT_EVERY_S:
                self._heartbeat_at = now
                conn.execute("UPDATE claims SET heartbeat = ? WHERE owner = ?", (now, claimant.owner))
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

    @_guarded
    def claim(self, keys: Sequence[str], claimant: Claimant) -> list[str]:
        """Claim ``keys`` for ``claimant``: those free, already its own, or held by a process
        that is gone. Returns the keys it now holds; the rest are held by live claimants."""
        unique = list(dict.fromkeys(keys))
        if not unique:
            return []
        now = time.time()
        mine: list[str] = []
        with self._lock:
            conn = self._connection()
            conn.execute("BEGIN IMMEDIATE")
            try:
                self._reap(conn, claimant)
                for start in range(0, len(unique), _LOOKUP_CHUNK):
                    chunk = unique[start : start + _LOOKUP_CHUNK]
                    marks = ",".join("?" * len(chunk))
                    held = {
                        row[0]: row[1:] for row in conn.execute(
                            f"SELECT key, owner, host, pid, pid_start, heartbeat FROM claims WHERE key IN ({marks})",
                            chunk,
                        )
                    }
                    take = []
                    for key in chunk:
                        other = held.get(key)
                        if other is None or other[0] == claimant.owner or not _claim_alive(claimant, *other[1:]):
                            take.append(key)
                    conn.executemany(
                        "INSERT OR REPLACE INTO claims VALUES (?, ?, ?, ?, ?, ?)",
                        [(key, claimant.owner, claimant.host, claimant.pid, claimant.pid_start, now) for key in take],
                    )
                    mine += take
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        return mine

    @staticmethod
    def _reap(conn: sqlite3.Connection, claimant: Claimant) -> None:
        """Drop the claims of owners that are gone (a killed process leaves its claims behind,
        also on keys answered since by others)."""
        owners = conn.execute(
            "SELECT owner, host, pid, pid_start, MAX(heartbeat) FROM claims WHERE owner != ? GROUP BY owner",
            (claimant.owner,),
        ).fetchall()
        dead = [(owner,) for owner, *holder in owners if not _claim_alive(claimant, *holder)]
        conn.executemany("DELETE FROM claims WHERE owner = ?", dead)

    @_guarded
    def release(self, claimant: Claimant, keys: Sequence[str] | None = None) -> None:
        """Drop ``claimant``'s claims on ``keys`` (all of its claims when None)."""
        with self._lock:
            conn = self._connection()
            if keys is None:
                conn.execute("DELETE FROM claims WHERE owner = ?", (claimant.owner,))
                return
            unique = list(dict.fromkeys(keys))
            for start in range(0, len(unique), _LOOKUP_CHUNK):
                chunk = unique[start : start + _LOOKUP_CHUNK]
                marks = ",".join("?" * len(chunk))
                conn.execute(f"DELETE FROM claims WHERE owner = ? AND key IN ({marks})", [claimant.owner, *chunk])

    @_guarded
    def claims(self) -> int:
        """How many claims are held (by any process)."""
        with self._lock:
            return self._connection().execute("SELECT COUNT(*) FROM claims").fetchone()[0]

    @_guarded
    def __len__(self) -> int:
        with self._lock:
            return self._connection().execute("SELECT COUNT(*) FROM completions").fetchone()[0]

    @_guarded
    def journal_mode(self) -> str:
        with self._lock:
            return self._connection().execute("PRAGMA journal_mode").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None
