"""Several endpoints of one model behind an openai judge: which one takes the next request.

``openai:<url 1>,<url 2>,...#<model>`` names servers that serve the same model (one ``vllm
serve`` per GPU node, say). Each request goes to the endpoint with the fewest requests in
flight among those in service, at most ``concurrency`` per endpoint; ties go round the list.

An endpoint whose request failed in a way that says the server is away or overwhelmed (a
refused connection, a timeout, 429, 5xx) is taken out of service for a cool-down,
``backoff_s * 2**k`` after its ``k + 1``-th failure in a row (at most
:data:`COOLDOWN_MAX_S`; a ``Retry-After`` sets it instead), and the request's retry goes at
once to another endpoint in service. After the cool-down the endpoint is tried again with
one request at a time; its first answer puts it back in full service. While every endpoint
is out, requests go to them anyway (each request's own backoff then paces them, as with one
server). A single endpoint is never taken out: its requests' backoff is all there is.

The pool is an asyncio object of one batch (one event loop); it holds no sockets.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

logger = logging.getLogger("lm_eval_fin.judge")

# the longest an endpoint stays out before it is tried again
COOLDOWN_MAX_S = 30.0


@dataclass
class Endpoint:
    url: str
    client: object = None
    in_flight: int = 0
    failures: int = 0  # in a row, since its last answer
    out_until: float = 0.0  # time.monotonic() until which it is out of service

    def in_service(self, now: float) -> bool:
        return self.out_until <= now

    def capacity(self, concurrency: int) -> int:
        """Requests it may have in flight: one while it is on trial after an outage."""
        return 1 if self.failures else concurrency


class EndpointPool:
    def __init__(self, urls: Sequence[str], concurrency: int, backoff_s: float, clients: Sequence[object] = ()):
        clients = list(clients) or [None] * len(urls)
        self.endpoints = [Endpoint(url, client) for url, client in zip(urls, clients)]
        self.concurrency = concurrency
        self.backoff_s = backoff_s
        self._turn = itertools.count()
        self._changed = asyncio.Condition()
        self.outages = 0

    @property
    def several(self) -> bool:
        return len(self.endpoints) > 1

    def choose(self, now: float) -> Endpoint | None:
        """The endpoint for the next request, or None while every one in service is full."""
        serving = [e for e in self.endpoints if e.in_service(now)] or self.endpoints
        free = [e for e in serving if e.in_flight < e.capacity(self.concurrency)]
        if not free:
            return None
        turn = next(self._turn)
        width = len(self.endpoints)
        return min(free, key=lambda e: (e.in_flight, (self.endpoints.index(e) - turn) % width))

    async def acquire(self, deadline: float | None = None) -> Endpoint:
        """An endpoint with room for one more request (waiting for one if need be); a
        TimeoutError when ``deadline`` (``time.monotonic()``) passes first."""
        async with self._changed:
            while True:
                endpoint = self.choose(time.monotonic())
                if endpoint is not None:
                    endpoint.in_flight += 1
                    return endpoint
                # a full pool frees up when a request ends; an endpoint out of service comes
                # back when its cool-down ends, which no request signals
                wake = min((e.out_until for e in self.endpoints if e.out_until > time.monotonic()), default=None)
                limit = None if wake is None else wake - time.monotonic()
                if deadline is not None:
                    remaining = deadline - time.monotonic()
                    limit = remaining if limit is None else min(limit, remaining)
                    if remaining <= 0:
                        raise TimeoutError
                try:
                    await asyncio.wait_for(self._changed.wait(), limit)
                except asyncio.TimeoutError:  # noqa: UP041 - not the builtin TimeoutError before Python 3.11
                    pass

    async def release(self, endpoint: Endpoint) -> None:
        async with self._changed:
            endpoint.in_flight -= 1
            self._changed.notify_all()

    def answered(self, endpoint: Endpoint) -> None:
        if endpoint.failures and self.several:
            logger.info("judge endpoint %s answers again; back in service", endpoint.url)
        endpoint.failures, endpoint.out_until = 0, 0.0

    def failed(self, endpoint: Endpoint, reason: str, retry_after: float | None = None) -> None:
        """The server at ``endpoint`` is away or overwhelmed: out of service for a while."""
        if not self.several:
            return
        endpoint.failures += 1
        cooldown = retry_after if retry_after is not None else self.backoff_s * 2 ** (endpoint.failures - 1)
        endpoint.out_until = time.monotonic() + min(COOLDOWN_MAX_S, cooldown)
        self.outages += 1
        serving = sum(e.in_service(time.monotonic()) for e in self.endpoints)
        logger.warning("judge endpoint %s out of service for %.1f s (%s); %d of %d in service",
                       endpoint.url, min(COOLDOWN_MAX_S, cooldown), reason, serving, len(self.endpoints))

    def another_in_service(self, endpoint: Endpoint) -> bool:
        """Whether a retry can go to another endpoint now, without waiting."""
        now = time.monotonic()
        return any(e is not endpoint and e.in_service(now) for e in self.endpoints)
