"""Ranks workflows for `workflow_search`: BM25F over name, tags, description and input names, local and model-free.

A few hundred short documents need no search engine: the index is a dict of postings built in a millisecond or
two, and a query reads a handful of them. Words are reduced by a light suffix stripper (no dependency, English
only), and a query word also meets the indexed words it is a prefix of, or that are a prefix of it, at a lower
weight, so "summary" finds "summarize" and "notify" finds "notification".
"""

from __future__ import annotations

import bisect
import functools
import math
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

# Field weights (BM25F): a word in the name or the tags says more about a workflow than one in its prose.
FIELD_WEIGHTS = {"name": 3.0, "tags": 2.0, "description": 1.0, "inputs": 0.6}
K1 = 1.2
B = 0.75
PREFIX_WEIGHT = 0.6  # a word met through a shared prefix counts for less than the word itself
MIN_PREFIX = 4  # shorter prefixes join unrelated words ("pro" in process, product, profile)
MAX_QUERY_TERMS = 32  # a query is a sentence, not a document

# Words that say nothing about which workflow is wanted ("please give me the ...").
_STOPWORD_TEXT = """
a about after all also an and any are as at be been before but by can could do does for from get give had has
have how i if in into is it its just let me more my need of on once or our out over please so some than that the
their them then there these they this those to up us use using want was we what when which who will with would
you your
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())

_WORD = re.compile(r"[^\W_]+")  # letters and digits of any script
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
# Tried in order after a plural `s` is gone, the first that leaves three letters or more: "creation" and
# "creating" both give "creat" (so no "ation": "cre" would meet nothing).
_SUFFIXES = ("izing", "ising", "ized", "ised", "ize", "ise", "ing", "ion", "ment", "ness", "edly", "ed", "er",
             "ly")


def words(text: str) -> list[str]:
    """Lower-case words of `text`, accents dropped (résumé -> resume), `snake_case` and `camelCase` split apart."""
    plain = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    return _WORD.findall(_CAMEL.sub(" ", plain).lower())


@functools.lru_cache(maxsize=16384)  # a catalogue's vocabulary is small and every rebuild meets it again
def stem(word: str) -> str:
    """A light English stemmer: plurals, then one common suffix, then a final `e`/`y` (create, creating -> creat)."""
    if len(word) <= 3 or word.isdigit():
        return word
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("sses"):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    if len(word) > 3 and word[-1] in "ey":
        word = word[:-1] + ("i" if word[-1] == "y" else "")
    return word


def terms(text: str) -> list[str]:
    """The index terms of `text`: its words less the stopwords, stemmed."""
    return [stem(word) for word in words(text) if word not in STOPWORDS]


@dataclass(frozen=True, slots=True)
class SearchDoc:
    """What a workflow is found by."""

    name: str
    description: str = ""
    inputs: tuple[str, ...] = ()  # input names (and their descriptions)
    tags: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Hit:
    name: str
    score: float


class SearchIndex:
    """BM25F over a fixed set of documents; build a new one when they change."""

    def __init__(self, docs: Iterable[SearchDoc]) -> None:
        self._names: list[str] = []
        self._lengths: list[float] = []
        self._postings: dict[str, dict[int, float]] = {}  # term -> doc -> weighted term frequency
        for index, doc in enumerate(docs):
            self._names.append(doc.name)
            fields = {"name": doc.name, "tags": " ".join(doc.tags), "description": doc.description,
                      "inputs": " ".join(doc.inputs)}
            length = 0.0
            for field, text in fields.items():
                weight = FIELD_WEIGHTS[field]
                for term in terms(text):
                    postings = self._postings.setdefault(term, {})
                    postings[index] = postings.get(index, 0.0) + weight
                    length += weight
            self._lengths.append(length)
        count = len(self._names)
        self._average = (sum(self._lengths) / count) if count else 1.0
        self._idf = {term: math.log(1 + (count - len(found) + 0.5) / (len(found) + 0.5))
                     for term, found in self._postings.items()}
        self._vocabulary = sorted(self._postings)

    def __len__(self) -> int:
        return len(self._names)

    def _related(self, term: str) -> list[tuple[str, float]]:
        """Indexed terms a query term meets: itself, and (at a lower weight) those sharing a prefix with it."""
        found = [(term, 1.0)] if term in self._postings else []
        if len(term) >= MIN_PREFIX:
            start = bisect.bisect_right(self._vocabulary, term)
            for other in self._vocabulary[start:]:
                if not other.startswith(term):
                    break
                found.append((other, PREFIX_WEIGHT))
            found.extend((term[:end], PREFIX_WEIGHT) for end in range(MIN_PREFIX, len(term))
                         if term[:end] in self._postings)
        return found

    def search(self, query: str, limit: int = 5) -> list[Hit]:
        """The best `limit` documents for `query`, best first (ties by name); none when no word matches."""
        scores: dict[int, float] = {}
        for term in list(dict.fromkeys(terms(query)))[:MAX_QUERY_TERMS]:
            best: dict[int, float] = {}  # a query word counts once per document, through its best match
            for other, weight in self._related(term):
                idf = self._idf[other]
                for doc, frequency in self._postings[other].items():
                    norm = frequency + K1 * (1 - B + B * self._lengths[doc] / self._average)
                    value = weight * idf * frequency * (K1 + 1) / norm
                    if value > best.get(doc, 0.0):
                        best[doc] = value
            for doc, value in best.items():
                scores[doc] = scores.get(doc, 0.0) + value
        ranked = sorted(scores.items(), key=lambda item: (-item[1], self._names[item[0]]))
        return [Hit(self._names[doc], round(score, 4)) for doc, score in ranked[: max(0, limit)]]
