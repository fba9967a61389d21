"""A tiny LlamaForCausalLM written by code: no download, no weight files (vLLM's ``--load-format dummy``).

The tokenizer is trained locally with the ``tokenizers`` library from the vLLM
environment on a generated corpus; config.json takes its vocabulary size from the
trained tokenizer, since vLLM refuses a mismatch. The directory is cached under a
name derived from everything that shapes it, and written atomically.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from tests.harness.vllm_env import cache_dir, venv_python

SPECIAL = {"unk": "<unk>", "bos": "<s>", "eos": "</s>"}  # ids 0, 1, 2 in the trained vocabulary
SPECIAL_TOKENS = tuple(SPECIAL.values())

_TRAIN_TOKENIZER = r"""
import random, sys
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

out, vocab_size, seed, specials = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4].split(",")
rng = random.Random(seed)
syllables = ["ka", "lo", "mi", "ne", "ru", "ta", "si", "vo", "pe", "da", "gu", "ze", "the", "and", "ing", "er"]
corpus = [" ".join("".join(rng.choices(syllables, k=rng.randint(1, 4))) for _ in range(24)) for _ in range(4000)]
tok = Tokenizer(models.BPE(unk_token="<unk>"))
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
trainer = trainers.BpeTrainer(
    vocab_size=vocab_size,
    special_tokens=specials,
    initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    show_progress=False,
)
tok.train_from_iterator(corpus, trainer)
tok.save(out)
print(tok.get_vocab_size())
"""


@dataclass(frozen=True)
class TinyModelSpec:
    """The model's shape. head_dim must be one the CPU attention backend supports (32, 64, 80, ...)."""

    hidden_size: int = 256
    intermediate_size: int = 512
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    head_dim: int = 64
    max_position_embeddings: int = 512
    target_vocab_size: int = 1024
    seed: int = 7

    def digest(self) -> str:
        """Names the cached directory: the shape, the special tokens and the training script."""
        key = json.dumps([asdict(self), SPECIAL, _TRAIN_TOKENIZER], sort_keys=True)
        return hashlib.sha256(key.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class TinyModel:
    path: Path
    vocab_size: int
    max_model_len: int

    @property
    def first_plain_token(self) -> int:
        """Token ids below this are special tokens; prompts built from ids avoid them."""
        return len(SPECIAL_TOKENS)


def _token_ids() -> dict[str, int]:
    return {f"{role}_token_id": index for index, role in enumerate(SPECIAL)}


def _config_json(spec: TinyModelSpec, vocab_size: int) -> dict[str, object]:
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": spec.hidden_size,
        "intermediate_size": spec.intermediate_size,
        "num_hidden_layers": spec.num_hidden_layers,
        "num_attention_heads": spec.num_attention_heads,
        "num_key_value_heads": spec.num_attention_heads,
        "head_dim": spec.head_dim,
        "max_position_embeddings": spec.max_position_embeddings,
        "vocab_size": vocab_size,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        **_token_ids(),
    }


def _tokenizer_config(spec: TinyModelSpec) -> dict[str, object]:
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        **{f"{role}_token": token for role, token in SPECIAL.items()},
        "model_max_length": spec.max_position_embeddings,
    }


def _write(directory: Path, spec: TinyModelSpec, python: Path) -> int:
    trained = subprocess.run(
        [str(python), "-c", _TRAIN_TOKENIZER, str(directory / "tokenizer.json"), str(spec.target_vocab_size),
         str(spec.seed), ",".join(SPECIAL_TOKENS)],
        capture_output=True, text=True, timeout=300, check=False,
    )
    if trained.returncode != 0:
        raise RuntimeError(f"training the tokenizer with {python} failed:\n{trained.stderr[-4000:]}")
    vocab_size = int(trained.stdout.strip().splitlines()[-1])
    (directory / "config.json").write_text(json.dumps(_config_json(spec, vocab_size), indent=2))
    (directory / "tokenizer_config.json").write_text(json.dumps(_tokenizer_config(spec), indent=2))
    (directory / "generation_config.json").write_text(
        json.dumps({**_token_ids(), "do_sample": False}, indent=2)
    )
    return vocab_size


def tiny_model(
    spec: TinyModelSpec = TinyModelSpec(), root: Path | None = None, python: Path | None = None
) -> TinyModel:
    """The cached model directory for ``spec``, written on first use."""
    root = root or cache_dir() / "models"
    path = root / f"tiny-llama-{spec.digest()}"
    config_file = path / "config.json"
    if not config_file.exists():
        root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".tiny-llama-", dir=root))
        try:
            _write(staging, spec, python or venv_python())
            try:
                os.rename(staging, path)
            except OSError:  # another process won the race; its copy is identical
                if not config_file.exists():
                    raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    vocab_size = json.loads(config_file.read_text())["vocab_size"]
    return TinyModel(path=path, vocab_size=vocab_size, max_model_len=spec.max_position_embeddings)
