"""Builds small stand-in tokenizers whose special tokens sit at the published ids.

The published tokenizers are large BPE vocabularies we cannot download. For
tiny test checkpoints only the ids of the special / added tokens matter (the
prompt layout and code mapping depend on them), so the regular vocabulary is
the 256 byte-level symbols (every text encodes, one token per byte) padded
with unreachable filler entries up to the size where the published special
tokens start; the special and added tokens then follow at their real ids.
"""

from __future__ import annotations

import json
from pathlib import Path


def build(
    folder: Path,
    *,
    regular_size: int,
    added: list[str],
    bos: str | None,
    eos: str,
    pad: str | None = None,
    chat_template: str | None = None,
) -> None:
    """Writes tokenizer.json + tokenizer_config.json; `added[i]` gets id `regular_size + i`."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors
    from tokenizers.pre_tokenizers import ByteLevel

    alphabet = ByteLevel.alphabet()
    vocab = {ch: i for i, ch in enumerate(sorted(alphabet))}
    for i in range(len(vocab), regular_size):
        vocab[f"<|filler_{i}|>"] = i
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in added])
    if bos is not None:
        bos_id = tok.token_to_id(bos)
        tok.post_processor = processors.Sequence(
            [
                processors.ByteLevel(trim_offsets=False),
                processors.TemplateProcessing(
                    single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, bos_id)]
                ),
            ]
        )
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": bos,
        "eos_token": eos,
        "pad_token": pad,
        "clean_up_tokenization_spaces": False,
        "model_max_length": 131072,
    }
    if chat_template:
        config["chat_template"] = chat_template
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
