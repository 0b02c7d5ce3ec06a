#!/usr/bin/env python3
"""The HTTP hop on paper: CPU seconds per audio second that `vllm serve --omni`'s speech endpoint and
`vllm bench serve --omni`'s client spend on what omni's in-process path does not do, projected onto the
seeds' H200 load (issue 33 item 8).

    PYTHONPATH=. .venv/bin/python scripts/bench_http_hop.py [--requests 48] [--concurrency 16] [--clip-s 6]

What runs, on synthetic audio chunks of the sizes the two families stream (first, ramp and steady chunk
frames read from the deploy YAMLs in the installed vllm_omni wheel; 12.5 codec frames a second; Qwen3-TTS
24 kHz mono, MOSS-TTS-Local 48 kHz stereo):

1. Per piece, in this process (time.process_time over many repetitions), with vLLM-Omni's own code:
   the request body parsed and validated (`OpenAICreateSpeechRequest.model_validate_json`), a chunk
   converted to s16le PCM (`AudioMixin.create_audio`, as `_generate_audio_chunks` calls it per chunk),
   a chunk framed as an SSE event (`OmniOpenAIServingSpeech._generate_audio_sse_events`, driven with a
   stand-in for its chunk source), and an SSE event decoded on the client (no vLLM-Omni client reads the
   speech SSE stream: stdlib `json.loads` + `base64.b64decode`, the calls such a client makes).
2. End to end over loopback: a uvicorn + Starlette server process whose route does 1's server pieces
   per request, and `vllm bench serve --omni`'s own speech client (`async_request_openai_audio_speech`,
   raw PCM, `stream_format=audio`) with aiohttp; the CPU seconds of the server process (psutil) and of
   the client (process_time) over the batch, per audio second. This adds what 1 cannot isolate: HTTP
   parsing and chunked framing, the sockets, and the event loops' work (the server's route awaits once
   per chunk, where the real one awaits the engine's output queue).

Not counted: the engine itself (the same in-process), the tensor -> numpy copy before create_audio
(the in-process path makes it too). Prints a projection onto vLLM-Omni's MOSS-TTS-Local on one H200 at
concurrency 128 (344.11 audio-s/s, 685 ms mean first audio): one API-server core's utilisation and an
M/D/1 queueing estimate for first audio. The figures are CPU-seconds on this machine's CPU (flags and
load average printed); a server CPU may be faster or slower.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

FRAME_RATE = 12.5  # codec frames per second, both families
FAMILIES = {  # deploy YAML in the vllm_omni wheel, sample rate, channels
    "qwen3-tts": ("qwen3_tts.yaml", 24000, 1),
    "moss-tts-local": ("moss_tts_local.yaml", 48000, 2),
}
SEED_LOAD = {"audio_throughput": 344.11, "concurrency": 128, "mean_first_audio_ms": 685.0}


def _vllm_omni():
    """vllm_omni's package folder, with omni's import shims in place (they must precede its first import)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from omnicli.runtime.quiet import quiet_vllm
    from omnicli.vllm_omni.shims import install_import_shims

    quiet_vllm()
    install_import_shims()
    import vllm_omni

    return Path(vllm_omni.__file__).parent


def chunk_plan(family: str) -> dict:
    """First, ramp and steady chunk sizes (codec frames) from the family's deploy YAML."""
    import yaml

    name, rate, channels = FAMILIES[family]
    found: dict = {}

    def walk(node):
        if isinstance(node, dict):
            for key in ("initial_codec_chunk_frames", "codec_chunk_frames", "codec_chunk_ramp"):
                if key in node and key not in found:
                    found[key] = node[key]
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(yaml.safe_load((_vllm_omni() / "deploy" / name).read_text()))
    # MOSS-TTS-Local's YAML: "Stage0 sends frame 1; Stage1 adds 160 ms, then 480 ms, then 1.2 s" for
    # codec_chunk_ramp [3, 6, 15]: the ramp's first entry counts the frame stage 0 already sent.
    ramp = [int(n) for n in found.get("codec_chunk_ramp") or []]
    first = int(found.get("initial_codec_chunk_frames") or 1)
    if ramp:
        ramp[0] -= first
    return {"family": family, "yaml": name, "sample_rate": rate, "channels": channels,
            "first": first, "ramp": ramp, "steady": int(found["codec_chunk_frames"])}


def request_chunks(plan: dict, clip_s: float) -> list[int]:
    """Chunk sizes (frames) of one request of `clip_s` seconds: first, ramp, then steady, the last cut."""
    total = round(clip_s * FRAME_RATE)
    sizes = [plan["first"], *plan["ramp"]]
    out: list[int] = []
    while sum(out) < total:
        out.append(sizes[len(out)] if len(out) < len(sizes) else plan["steady"])
    out[-1] -= sum(out) - total
    return [n for n in out if n > 0]


def synthetic_chunk(plan: dict, frames: int, rng: np.random.Generator) -> np.ndarray:
    samples = int(frames * plan["sample_rate"] / FRAME_RATE)
    shape = (samples,) if plan["channels"] == 1 else (plan["channels"], samples)  # the codec's (C, T)
    return (rng.standard_normal(shape) * 0.1).astype(np.float32)


def request_body(family: str, stream_format: str = "audio") -> bytes:
    return json.dumps({"model": family, "input": "The quick brown fox jumps over the lazy dog. " * 3,
                       "stream": True, "stream_format": stream_format, "response_format": "pcm"}).encode()


# -- server pieces (vLLM-Omni's own code) --------------------------------------------------------------
class _Converter:
    """vLLM-Omni's AudioMixin.create_audio, as its speech endpoint calls it on every chunk."""

    def __init__(self):
        from vllm_omni.entrypoints.openai.audio_utils_mixin import AudioMixin
        from vllm_omni.entrypoints.openai.protocol.audio import CreateAudio

        self._mixin, self._make = AudioMixin(), CreateAudio

    def pcm(self, chunk: np.ndarray, sample_rate: int) -> bytes:
        audio = self._make(audio_tensor=chunk, sample_rate=sample_rate, response_format="pcm", speed=1.0,
                           base64_encode=False)
        return self._mixin.create_audio(audio).audio_data


class _ChunkSource:
    """Stands in for the endpoint's `_generate_audio_chunks` (the engine side) under its SSE framing."""

    def __init__(self, pieces: list[bytes], per_chunk_await: bool = True):
        self.pieces, self.per_chunk_await = pieces, per_chunk_await

    async def _generate_audio_chunks(self, generator, request_id, response_format, **_kwargs):
        for piece in self.pieces:
            if self.per_chunk_await:
                await asyncio.sleep(0)
            yield piece


def sse_events(pieces: list[bytes], per_chunk_await: bool = True):
    """vLLM-Omni's `_generate_audio_sse_events` over ready PCM pieces (base64, JSON, `event:` framing)."""
    from vllm_omni.entrypoints.openai.serving_speech import OmniOpenAIServingSpeech

    return OmniOpenAIServingSpeech._generate_audio_sse_events(
        _ChunkSource(pieces, per_chunk_await), None, "hop", "pcm")


# -- 1: per piece ----------------------------------------------------------------------------------------
def cpu_per_call(fn, min_s: float = 0.3) -> float:
    """CPU seconds of one call of fn(), over repetitions of at least `min_s` CPU seconds."""
    fn()
    n, spent = 0, 0.0
    t0 = time.process_time()
    while spent < min_s:
        fn()
        n += 1
        spent = time.process_time() - t0
    return spent / n


def chunk_costs(plan: dict, conv: _Converter, frames: int, rng: np.random.Generator) -> dict:
    """One chunk size's CPU seconds: s16le conversion and SSE framing (server), SSE decoding (client)."""
    chunk = synthetic_chunk(plan, frames, rng)
    piece = conv.pcm(chunk, plan["sample_rate"])
    burst = [piece] * 10

    async def events():
        return [e async for e in sse_events(burst, per_chunk_await=False)]

    loop = asyncio.new_event_loop()
    try:
        data = loop.run_until_complete(events())[0].split("data: ", 1)[1]
        # ten delta events and one done event, less the loop's own round trip, per delta
        sse_cost = cpu_per_call(lambda: loop.run_until_complete(events())) / len(burst)
        empty = cpu_per_call(lambda: loop.run_until_complete(asyncio.sleep(0))) / len(burst)
    finally:
        loop.close()
    return {
        "frames": frames, "pcm_bytes": len(piece), "audio_s": frames / FRAME_RATE,
        "pcm_convert_s": cpu_per_call(lambda: conv.pcm(chunk, plan["sample_rate"])),
        "sse_frame_s": max(sse_cost - empty, 0.0),
        "sse_client_decode_s": cpu_per_call(lambda: base64.b64decode(json.loads(data)["audio"])),
        "sse_bytes": len(data) + len("event: speech.audio.delta\ndata: \n\n"),
    }


def per_piece(plan: dict, clip_s: float) -> dict:
    from vllm_omni.entrypoints.openai.protocol.audio import OpenAICreateSpeechRequest

    rng = np.random.default_rng(0)
    conv = _Converter()
    sizes = request_chunks(plan, clip_s)
    body = request_body(plan["family"], "sse")
    return {"chunks_per_request": sizes,
            "request_parse_s": cpu_per_call(lambda: OpenAICreateSpeechRequest.model_validate_json(body)),
            "first": chunk_costs(plan, conv, sizes[0], rng),
            "steady": chunk_costs(plan, conv, plan["steady"], rng)}


# -- 2: over loopback --------------------------------------------------------------------------------------
def serve(port: int, clip_s: float) -> None:
    """The loopback server (a subprocess): the endpoint's per-request and per-chunk work, no engine."""
    import uvicorn
    from starlette.applications import Starlette
    from starlette.responses import StreamingResponse
    from starlette.routing import Route
    from vllm_omni.entrypoints.openai.protocol.audio import OpenAICreateSpeechRequest

    rng = np.random.default_rng(0)
    conv = _Converter()
    plans = {f: chunk_plan(f) for f in FAMILIES}
    chunks = {f: [synthetic_chunk(p, n, rng) for n in request_chunks(p, clip_s)] for f, p in plans.items()}

    async def speech(request):
        req = OpenAICreateSpeechRequest.model_validate_json(await request.body())
        plan = plans[req.model]

        async def pcm():
            for chunk in chunks[req.model]:
                await asyncio.sleep(0)  # where the endpoint awaits the engine's next output
                yield conv.pcm(chunk, plan["sample_rate"])

        if req.stream_format == "sse":
            pieces = [conv.pcm(c, plan["sample_rate"]) for c in chunks[req.model]]
            return StreamingResponse(sse_events(pieces), media_type="text/event-stream")
        return StreamingResponse(pcm(), media_type="audio/pcm", headers={
            "X-Audio-Sample-Rate": str(plan["sample_rate"]), "X-Audio-Channels": str(plan["channels"])})

    app = Starlette(routes=[Route("/v1/audio/speech", speech, methods=["POST"])])
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _client_batch(url: str, family: str, requests: int, concurrency: int, stream_format: str) -> float:
    """Audio seconds received by `requests` requests at `concurrency`; raw PCM with vLLM-Omni's bench
    client, SSE with a stdlib reader (json.loads + b64decode per event)."""
    import aiohttp
    from vllm_omni.benchmarks.patch.patch import RequestFuncInput, async_request_openai_audio_speech

    _, rate, channels = FAMILIES[family]
    slots = asyncio.Semaphore(concurrency)
    audio = 0.0
    timeout = aiohttp.ClientTimeout(total=600)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        async def raw(i: int) -> None:
            nonlocal audio
            async with slots:
                inp = RequestFuncInput(prompt="The quick brown fox jumps over the lazy dog. " * 3, api_url=url,
                                       prompt_len=0, output_len=0, model=family, request_id=f"hop-{i}")
                out = await async_request_openai_audio_speech(inp, session)
                if not out.success:
                    raise RuntimeError(out.error)
                audio += out.audio_duration

        async def sse(_: int) -> None:
            nonlocal audio
            async with slots, session.post(url, data=request_body(family, "sse"),
                                           headers={"Content-Type": "application/json"}) as resp:
                buffer = b""
                async for piece in resp.content.iter_any():
                    buffer += piece
                    while b"\n\n" in buffer:
                        event, buffer = buffer.split(b"\n\n", 1)
                        data = event.split(b"data: ", 1)[1]
                        payload = json.loads(data)
                        if payload.get("type") == "speech.audio.delta":
                            audio += len(base64.b64decode(payload["audio"])) / (2 * channels * rate)

        await asyncio.gather(*((raw if stream_format == "audio" else sse)(i) for i in range(requests)))
    return audio


def loopback(requests: int, concurrency: int, clip_s: float) -> dict:
    import psutil

    port = _free_port()
    server = subprocess.Popen([sys.executable, __file__, "--serve", str(port), "--clip-s", str(clip_s)])
    url = f"http://127.0.0.1:{port}/v1/audio/speech"
    out: dict = {}
    try:
        deadline = time.monotonic() + 600  # vLLM-Omni's serving module takes minutes to import on a busy machine
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the loopback server did not start") from None
                time.sleep(1)
        proc = psutil.Process(server.pid)
        for family in FAMILIES:
            for fmt in ("audio", "sse"):
                asyncio.run(_client_batch(url, family, min(4, requests), concurrency, fmt))  # warm both sides
                s0, c0 = proc.cpu_times(), time.process_time()
                audio = asyncio.run(_client_batch(url, family, requests, concurrency, fmt))
                s1, c1 = proc.cpu_times(), time.process_time()
                server_s = (s1.user + s1.system) - (s0.user + s0.system)
                out[(family, fmt)] = {"audio_s": audio, "server_cpu_s": server_s, "client_cpu_s": c1 - c0}
    finally:
        server.terminate()
        server.wait(30)
    return out


# -- the projection ------------------------------------------------------------------------------------------
def md1_wait_s(rho: float, service_s: float) -> float:
    """M/D/1 mean wait in queue: work items (chunks) arrive at random to one core, each taking service_s."""
    return rho * service_s / (2 * (1 - rho)) if rho < 1 else float("inf")


def cpu_flags() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                wanted = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")
                return " ".join(f for f in wanted if f in flags) or "none of avx2/avx512/amx"
    except OSError:
        pass
    return "unknown"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=48, help="requests per family and stream format")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--clip-s", type=float, default=6.0, help="audio seconds per request")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    _vllm_omni()
    if args.serve:
        serve(args.serve, args.clip_s)
        return 0
    load0 = os.getloadavg()
    print(f"CPU: {cpu_model()}; flags: {cpu_flags()}; {os.cpu_count()} cores; load average {load0[0]:.1f}")
    figures: dict = {"machine": {"cpu": cpu_model(), "flags": cpu_flags(), "load_before": load0},
                     "clip_s": args.clip_s}
    print(f"\n1. Per piece (CPU seconds, vLLM-Omni's code unless marked), {args.clip_s:g} s requests")
    for family in FAMILIES:
        plan = chunk_plan(family)
        pieces = per_piece(plan, args.clip_s)
        figures[family] = {"plan": plan, "pieces": pieces}
        print(f"  {family} ({plan['yaml']}: first {plan['first']}, ramp {plan['ramp']}, steady {plan['steady']} "
              f"frames; {plan['sample_rate']} Hz x {plan['channels']}): chunks/request {pieces['chunks_per_request']}")
        print(f"    request JSON parse + validate: {pieces['request_parse_s'] * 1e6:.0f} us per request")
        for kind in ("first", "steady"):
            p = pieces[kind]
            print(f"    {kind:6} chunk {p['frames']:>2} frames ({p['pcm_bytes']:>7} B PCM): s16le convert "
                  f"{p['pcm_convert_s'] * 1e6:7.0f} us, SSE event {p['sse_frame_s'] * 1e6:7.0f} us "
                  f"({p['sse_bytes']} B), client SSE decode (stdlib) {p['sse_client_decode_s'] * 1e6:7.0f} us; "
                  f"per audio s: {(p['pcm_convert_s'] + p['sse_frame_s']) / p['audio_s'] * 1e3:.2f} ms server")
    print(f"\n2. Over loopback: {args.requests} requests at c={args.concurrency} per family and format "
          "(server: uvicorn + Starlette + the pieces above; raw client: vLLM-Omni's bench speech client)")
    hop = loopback(args.requests, args.concurrency, args.clip_s)
    for (family, fmt), h in hop.items():
        h["server_cpu_per_audio_s"] = h["server_cpu_s"] / h["audio_s"]
        h["client_cpu_per_audio_s"] = h["client_cpu_s"] / h["audio_s"]
        figures[family][f"loopback_{fmt}"] = h
        print(f"  {family:15} {fmt:5}: {h['audio_s']:7.1f} audio s; server {h['server_cpu_s']:.3f} CPU s "
              f"({h['server_cpu_per_audio_s'] * 1e3:.2f} ms per audio s), client {h['client_cpu_s']:.3f} CPU s "
              f"({h['client_cpu_per_audio_s'] * 1e3:.2f} ms per audio s)")
    moss = figures["moss-tts-local"]
    rate, c = SEED_LOAD["audio_throughput"], SEED_LOAD["concurrency"]
    print(f"\n3. Projection onto vLLM-Omni's MOSS-TTS-Local on one H200: c={c}, {rate} audio-s/s, "
          f"{SEED_LOAD['mean_first_audio_ms']:.0f} ms mean first audio (from this CPU's measurements)")
    plan_sizes = moss["pieces"]["chunks_per_request"]
    requests_per_s = rate / args.clip_s
    chunks_per_s = requests_per_s * len(plan_sizes)
    for fmt in ("audio", "sse"):
        h = moss[f"loopback_{fmt}"]
        rho = h["server_cpu_per_audio_s"] * rate
        service = 1.0 / chunks_per_s * rho  # mean CPU seconds per work item (a chunk, its request's share of parse)
        first = moss["pieces"]["request_parse_s"] + moss["pieces"]["first"]["pcm_convert_s"] + (
            moss["pieces"]["first"]["sse_frame_s"] if fmt == "sse" else 0.0)
        wait = md1_wait_s(rho, service)
        added = (wait + first) * 1000.0
        figures[f"projection_{fmt}"] = {"utilisation": rho, "service_ms": service * 1e3, "wait_ms": wait * 1e3,
                                        "first_audio_added_ms": added, "chunks_per_s": chunks_per_s}
        verdict = (f"first audio +{added:.2f} ms ({added / SEED_LOAD['mean_first_audio_ms'] * 100:.2f}% of 685 ms)"
                   if rho < 1 else "saturated: first audio grows without bound")
        print(f"  {fmt:5}: {rho * 100:.1f}% of one API-server core; {chunks_per_s:.0f} chunks/s, mean service "
              f"{service * 1e3:.3f} ms, M/D/1 wait {wait * 1e3:.3f} ms; {verdict}; one core saturates at "
              f"{1 / h['server_cpu_per_audio_s']:.0f} audio-s/s")
    print(f"  client (vLLM-Omni's bench, raw PCM): {moss['loopback_audio']['client_cpu_per_audio_s'] * rate * 100:.1f}%"
          " of one core at that rate")
    load1 = os.getloadavg()
    figures["machine"]["load_after"] = load1
    print(f"\nload average {load0[0]:.1f} before, {load1[0]:.1f} after")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
