"""The talker's prefill admission gate (omnicli/engine/prefill_gate.py), on its own: plain asyncio."""

from __future__ import annotations

import asyncio

import pytest

from omnicli.engine.prefill_gate import PrefillGate, prefill_budget


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def _request(gate: PrefillGate, admitted: list[str], name: str, tokens: int) -> asyncio.Task:
    """A request waiting at the gate; its name is appended to `admitted` once it is let in."""
    async def run() -> None:
        await gate.acquire(tokens)
        admitted.append(name)
    return asyncio.create_task(run())


def test_budget_applies_only_where_vllm_cannot_bound_the_step():
    assert prefill_budget(512, 4096, chunked_prefill=False) == 512
    assert prefill_budget(4096, 4096, chunked_prefill=False) is None  # vLLM's own step budget already holds it
    assert prefill_budget(8192, 4096, chunked_prefill=False) is None
    assert prefill_budget(512, 4096, chunked_prefill=True) is None  # vLLM chunks prompts itself


def test_a_budget_below_one_token_is_refused():
    with pytest.raises(ValueError, match="at least 1"):
        PrefillGate(0)


def test_prompts_wait_while_the_tokens_awaiting_prefill_exceed_the_budget():
    async def run() -> None:
        gate = PrefillGate(500)
        admitted: list[str] = []
        tasks = [_request(gate, admitted, n, 300) for n in ("a", "b", "c")]
        await _settle()
        assert admitted == ["a"] and gate.waiting == 300 and gate.queued == 2  # 300 + 300 > 500
        gate.release(300)  # a's first token
        await _settle()
        assert admitted == ["a", "b"] and gate.waiting == 300
        gate.release(300)
        await _settle()
        assert admitted == ["a", "b", "c"]
        await asyncio.gather(*tasks)

    asyncio.run(run())


def test_admission_keeps_submission_order_even_when_a_later_prompt_would_fit():
    async def run() -> None:
        gate = PrefillGate(500)
        admitted: list[str] = []
        first = _request(gate, admitted, "a", 400)
        await _settle()
        big = _request(gate, admitted, "big", 300)  # 400 + 300 > 500: waits
        await _settle()
        small = _request(gate, admitted, "small", 50)  # 400 + 50 fits, but "big" came first
        await _settle()
        assert admitted == ["a"]
        gate.release(400)
        await _settle()
        assert admitted == ["a", "big", "small"]  # 300 + 50 fit together once a is prefilled
        await asyncio.gather(first, big, small)

    asyncio.run(run())


def test_a_prompt_larger_than_the_budget_goes_in_alone():
    async def run() -> None:
        gate = PrefillGate(100)
        await gate.acquire(700)  # nothing waiting: admitted at once
        assert gate.waiting == 700
        second = asyncio.create_task(gate.acquire(10))
        await _settle()
        assert not second.done()
        gate.release(700)
        await asyncio.wait_for(second, 1)
        assert gate.waiting == 10

    asyncio.run(run())


def test_a_cancelled_waiter_does_not_block_the_ones_behind_it():
    async def run() -> None:
        gate = PrefillGate(100)
        await gate.acquire(100)
        head = asyncio.create_task(gate.acquire(100))
        behind = asyncio.create_task(gate.acquire(100))
        await _settle()
        head.cancel()
        await _settle()
        gate.release(100)
        await asyncio.wait_for(behind, 1)
        assert head.cancelled() and gate.waiting == 100 and gate.queued == 0

    asyncio.run(run())


def test_no_budget_admits_everything_at_once():
    async def run() -> None:
        gate = PrefillGate(None)
        await asyncio.wait_for(asyncio.gather(*(gate.acquire(5000) for _ in range(10))), 1)
        assert gate.queued == 0

    asyncio.run(run())


class _FakeLLM:
    """Stands in for vLLM's AsyncLLM: records when each prompt is handed over, emits on demand."""

    errored = False

    def __init__(self) -> None:
        self.submitted: list[str] = []
        self.emit: dict[str, asyncio.Queue] = {}

    async def generate(self, prompt, params, request_id):
        from types import SimpleNamespace

        self.submitted.append(request_id)
        queue = self.emit.setdefault(request_id, asyncio.Queue())
        while True:
            item = await queue.get()
            if isinstance(item, Exception):
                raise item
            finished = item == "last"
            yield SimpleNamespace(finished=finished,
                                  outputs=[SimpleNamespace(token_ids=[1], finish_reason="stop" if finished else None)])
            if finished:
                return


def test_the_talker_hands_a_prompt_to_vllm_only_when_the_gate_admits_it():
    from omnicli.engine.talker import Talker
    from omnicli.profile.schema import TalkerConfig

    async def run() -> None:
        llm = _FakeLLM()
        talker = Talker(llm, [1], TalkerConfig(), prefill_budget=500)  # type: ignore[arg-type]

        async def consume(rid: str) -> int:
            return sum([len(d.token_ids) async for d in talker.generate(rid, [0] * 300, 10, 0)])

        tasks = {rid: asyncio.create_task(consume(rid)) for rid in ("a", "b", "c")}
        await _settle()
        assert llm.submitted == ["a"]  # b's 300 tokens would exceed 500 while a's prefill is pending
        llm.emit["a"].put_nowait("first")  # a's first token: its prefill is done
        await _settle()
        assert llm.submitted == ["a", "b"]
        llm.emit["b"].put_nowait(RuntimeError("engine said no"))  # b fails before its first token
        await _settle()
        assert llm.submitted == ["a", "b", "c"] and talker.prefill_gate.waiting == 300  # b gave its tokens back
        for rid in ("a", "c"):
            llm.emit.setdefault(rid, asyncio.Queue()).put_nowait("last")
        assert await tasks["a"] == 2 and await tasks["c"] == 1
        with pytest.raises(RuntimeError, match="engine said no"):
            await tasks["b"]
        assert talker.prefill_gate.waiting == 0

    asyncio.run(run())
