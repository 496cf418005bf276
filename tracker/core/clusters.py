"""Month-adaptive themes: a section's changes grouped by what they share, without a language model. Pure.

Each change is described by what it touches and says (`Item`): the directories and files of its code
(tests, CI and docs counted apart and at half weight), the terms of its title (a *named* term such as
`GTP`, `MFSDP` or `DeepSeek-V4` twice as much as a plain word, and pairs of consecutive terms), its
labels, the PR numbers it is or cites, and, when the repository has a taxonomy, the area and sub-area
the taxonomy gives it (a prior, at a quarter of the weight of the rest: it breaks ties and names themes,
it does not decide them). Every feature is weighted by how rare it is in the section (inverse document
frequency: a directory every change touches says nothing), each kind of feature is normalised on its own
so that a change with 300 files does not drown its title, and the title counts three times the code layout (the
author's own statement of what the change is about).

Two changes are as similar as the cosine of their feature vectors. Each change is joined to its
`NEIGHBOURS` most similar ones, and that graph is split into communities by Louvain modularity (igraph's
multilevel algorithm, at `RESOLUTION`: finer communities than the report's themes), `RUNS` times with
fixed seeds; the communities are the groups of changes that were in one community in most runs
(average-linkage clustering of the co-membership, scipy). Agreement between runs keeps one unlucky run
from reshaping a theme, and keeps a late arrival from moving unrelated changes.

Then the limits of the report: at most `MAX_THEMES` themes per section, the upkeep theme among them (when
a section has upkeep and the grouping finds `MAX_THEMES` themes, the smallest joins the theme its changes
are most alike to). A community holding more than
`LARGEST_SHARE` of the section is split once more on its own when it falls apart (one area that really
dominates stays whole); the largest communities become the themes, and each change of the others joins
the theme it is most similar to on average (a change similar to no theme goes to "Other"). Inside a
theme, the same communities, found among its own changes, are its sub-topics (the report's highlights,
at most `MAX_TOPICS`, the smallest absorbed by the closest). Themes and sub-topics are named by their
*distinctive terms*: terms of the section's project vocabulary (tracker.core.vocabulary) frequent in them
and rare in the rest of the section.

Tuned on the development set (the published grouping of August 1–22, 2026 of Megatron-LM):
bench/themes.py prints the agreement. On 55 PRs the adjusted Rand index moves by ±0.05 between
neighbouring settings (`NEIGHBOURS` 4 to 8), so the weights are round numbers, not a fitted optimum.

Deterministic: the same items in the same order give the same groups (fixed seeds, stable sorts, ties
broken by position). Linear in the features, quadratic in the number of changes (a dense similarity
matrix: 1,500 changes are 2.25 million numbers); the quadratic parts are numpy's (each change's nearest
neighbours, by partition rather than a sort of whole rows; the runs' co-membership as one sparse product),
the Python loops linear.

Remembered twice, by content, since a grouping depends on nothing but its items and this code:
- in the process, the last `_REMEMBERED` groupings (`functools.lru_cache`; `forget()` clears it): the
  Markdown, HTML and JSON of one cutoff, in both languages, group the same sections once; and each change's
  features, by the change's content, so that a month grouped again after one of its PRs changed describes
  only the changed ones anew;
- across processes, by the caller: tracker.reports.groupings keeps each grouping, named
  (tracker.core.report.named_themes), in Redis under a digest of its items and of the core's sources (40
  days), so a worker that warmed a month (tracker.reports.warm) spares every web process the grouping and
  naming of the same sections. This module stays pure: `group` is what a report calls when the caller
  brings no such store.
"""

from __future__ import annotations

import math
import random
import threading
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import igraph
import numpy as np

from tracker.core.themes import considered_files, is_auxiliary
from tracker.core.titles import Term, term_key, title_terms
from tracker.core.vocabulary import month_vocabulary

if TYPE_CHECKING:  # scipy is imported where a month is grouped: a process that never groups skips its 0.4 s
    from scipy.sparse import csr_matrix

MAX_THEMES = 10
MAX_TOPICS = 4
LARGEST_SHARE = 0.30
NEIGHBOURS = 6
# Consensus runs: with fewer, one late change moves more of the others (measured on August: 2.2 % of the
# pairs of the other changes at 8 runs, 1.4 % at 16).
RUNS = 16
TOPIC_RUNS = 4  # inside a theme, where a change moving between sub-topics moves no theme
# Louvain's resolution: above 1, smaller communities. A large section is cut finer than its themes, which
# are then its largest communities, grown by the rest; a small one (a few dozen changes) at 1, where a finer
# cut would leave every change alone. Between the two, in proportion to the number of changes.
RESOLUTION = (1.0, 1.25)
RESOLUTION_SIZE = 120  # changes from which the finer resolution applies in full
MIN_SIMILARITY = 0.05  # an edge of the graph: below this, two changes share nothing worth saying

# Weights of the kinds of features (each kind normalised on its own first).
TITLE_WEIGHT = 3.0
NAMED_WEIGHT = 2.0  # a named term inside the title block, against 1 for a plain word or a pair
PATH_WEIGHT = 1.0
AUXILIARY_WEIGHT = 0.5  # tests, CI and docs of a change that also has code
LABEL_WEIGHT = 1.0
REFERENCE_WEIGHT = 1.0
PRIOR_WEIGHT = 0.5
MAX_PATHS = 1_000  # of one change: a nightly sync touching thousands says no more with all of them

_RANDOM = threading.Lock()  # igraph's random number generator is one for the process

# A distinctive term must be in at least this share of a theme's changes (and in two of them).
TERM_SHARE = 0.2


@dataclass(frozen=True)
class Item:
    """One change as the grouping sees it."""

    title: str
    labels: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    references: tuple[int, ...] = ()  # the PR numbers it is, and the ones it cites
    prior: tuple[str, ...] = ()  # the taxonomy's area and sub-area ids; empty without a taxonomy
    # Upkeep (tracker.core.noise): grouped with the rest, then said in the section's own last theme, which
    # is one of its MAX_THEMES.
    upkeep: bool = False


@dataclass(frozen=True)
class Topic:
    members: tuple[int, ...]  # indexes into the items, ascending
    terms: tuple[str, ...]  # distinctive terms as written, most distinctive first
    share: float = 0.0  # of its changes whose titles carry its first term


@dataclass(frozen=True)
class Group:
    members: tuple[int, ...]
    terms: tuple[str, ...]
    topics: tuple[Topic, ...]
    other: bool = False


def group(items: Sequence[Item]) -> tuple[Group, ...]:
    """The themes of a section: largest first, "Other" (if any) last. Remembered by content for the last
    `_REMEMBERED` sections: the Markdown, HTML and JSON of one cutoff, in both languages, group the same
    changes."""
    return _group(tuple(items))


def forget() -> None:
    """Forget the remembered groupings and changes' features (benchmarks measure the first request after a
    change with it)."""
    _group.cache_clear()
    _features.cache_clear()


_REMEMBERED = 16
_FEATURES_REMEMBERED = 16_384  # changes: several months of a busy repository


@lru_cache(maxsize=_REMEMBERED)
def _group(items: tuple[Item, ...]) -> tuple[Group, ...]:
    n = len(items)
    if n == 0:
        return ()
    similarity = _similarity(items)
    vocabulary = _Vocabulary(items)
    clusters = _communities(similarity, list(range(n)))
    clusters = _split_dominant(similarity, clusters, n)
    clusters, other = _within_limit(similarity, clusters, MAX_THEMES)
    if any(item.upkeep for item in items) and len(clusters) + bool(other) >= MAX_THEMES:
        clusters = _smallest_joined(similarity, clusters)  # room for the upkeep theme
    # One change is no theme's story: its terms name its sub-topic, and its area the theme.
    groups = [
        Group(tuple(c), vocabulary.distinctive(c, limit=2) if len(c) > 1 else (), _topics(similarity, vocabulary, c))
        for c in clusters
    ]
    if other:
        members = tuple(sorted(other))
        groups.append(Group(members, (), (Topic(members, vocabulary.distinctive(members, limit=1)),), other=True))
    return tuple(groups)


# --- features ---------------------------------------------------------------------------------------


@lru_cache(maxsize=_FEATURES_REMEMBERED)
def _features(item: Item) -> dict[str, float]:
    """What a change touches and says, by feature: remembered by content, since a month's sections are
    grouped again at every change of the month and most of their changes are the same. Shared: read it,
    never change it."""
    features: dict[str, float] = defaultdict(float)
    paths = list(dict.fromkeys(item.paths))[:MAX_PATHS]
    files = considered_files(paths)
    for path in files:
        for key in _path_keys(path):
            features[key] += 1 / len(files)
    chosen = set(files)
    for path in paths:
        if path not in chosen and is_auxiliary(path):
            parts = path.split("/")
            for depth in range(2, len(parts)):
                features["a:" + "/".join(parts[:depth])] += 1 / len(paths)
    terms = title_terms(item.title)
    for term in terms:
        features["w:" + term.key] = NAMED_WEIGHT if term.named else 1.0
    for first, second in zip(terms, terms[1:], strict=False):
        features[f"w:{first.key} {second.key}"] = 1.0
    for label in item.labels:
        features["l:" + label.strip().casefold()] = 1.0
    for number in item.references:
        features[f"r:{number}"] = 1.0
    for index, prior in enumerate(item.prior[:2]):
        features[f"{'pq'[index]}:{prior}"] = 1.0
    return dict(features)


@lru_cache(maxsize=65_536)
def _path_keys(path: str) -> tuple[str, ...]:
    """A code file's features: each directory above it (`d:`), then the file itself (`f:`)."""
    parts = path.split("/")
    directories = []
    prefix = "d:"
    for depth in range(len(parts) - 1):
        prefix = prefix + parts[depth] if depth == 0 else prefix + "/" + parts[depth]
        directories.append(prefix)
    return (*directories, "f:" + path)


_BLOCKS = {"d": PATH_WEIGHT, "f": PATH_WEIGHT, "a": AUXILIARY_WEIGHT, "w": TITLE_WEIGHT, "l": LABEL_WEIGHT}
_BLOCKS |= {"r": REFERENCE_WEIGHT, "p": PRIOR_WEIGHT, "q": PRIOR_WEIGHT}  # area, sub-area


def _similarity(items: Sequence[Item]) -> np.ndarray:
    """Cosine similarity of every pair of changes (a dense n × n matrix, 1 on the diagonal or 0 for a
    change that shares nothing with any other)."""
    from scipy.sparse import csr_matrix

    n = len(items)
    rows = [_features(item) for item in items]
    # Every (change, feature) entry, change by change, each change's in the order of its features.
    keys = [key for row in rows for key in row]
    values = np.fromiter((value for row in rows for value in row.values()), dtype=float, count=len(keys))
    changes = np.repeat(np.arange(n), [len(row) for row in rows])
    frequency = Counter(keys)
    # A feature of every change cannot tell them apart. One of a single change makes it alike to none, but
    # stays in its norm: what a change does alone dilutes what it shares.
    columns = {key: i for i, key in enumerate(sorted(k for k, count in frequency.items() if count < n))}
    rarity = {key: math.log(n / frequency[key]) for key in columns}
    column = np.fromiter((columns.get(key, -1) for key in keys), dtype=np.int64, count=len(keys))
    weighted = values * np.fromiter((rarity.get(key, 0.0) for key in keys), dtype=float, count=len(keys))
    kind = np.fromiter((ord(key[0]) for key in keys), dtype=np.int64, count=len(keys))
    total = None
    for block, weight in _BLOCKS.items():
        chosen = (column >= 0) & (kind == ord(block))
        entries = (weighted[chosen], (changes[chosen], column[chosen]))
        matrix = _normalised(csr_matrix(entries, shape=(n, len(columns)))) * weight
        total = matrix if total is None else total + matrix
    assert total is not None
    vectors = _normalised(total)
    return np.asarray((vectors @ vectors.T).todense())


def _normalised(matrix: csr_matrix) -> csr_matrix:
    from scipy.sparse import diags

    norms = np.sqrt(np.asarray(matrix.multiply(matrix).sum(axis=1)).ravel())
    norms[norms == 0] = 1.0
    return diags(1 / norms) @ matrix


# --- communities ------------------------------------------------------------------------------------


def _communities(similarity: np.ndarray, members: Sequence[int], runs: int = RUNS) -> list[list[int]]:
    """Consensus Louvain communities of the neighbour graph of `members`, largest first."""
    from scipy.cluster.hierarchy import fcluster, linkage
    from scipy.sparse import csr_matrix
    from scipy.spatial.distance import squareform

    if len(members) <= 2:
        return _ordered([[m] for m in members] if _sim(similarity, members) < MIN_SIMILARITY else [list(members)])
    sub = similarity[np.ix_(members, members)]
    np.fill_diagonal(sub, -1.0)  # a change is not its own neighbour (`sub` is a copy)
    nearest = _nearest(sub, NEIGHBOURS)
    edges: dict[tuple[int, int], float] = {}
    weights_of = np.take_along_axis(sub, nearest, axis=1).tolist()
    for i, (row, row_weights) in enumerate(zip(nearest.tolist(), weights_of, strict=True)):
        for j, weight in zip(row, row_weights, strict=True):
            if weight < MIN_SIMILARITY:
                break
            edges[(min(i, j), max(i, j))] = weight
    pairs = sorted(edges)
    graph = igraph.Graph(n=len(members), edges=pairs)
    weights = [edges[pair] for pair in pairs]
    low, high = RESOLUTION
    resolution = low + (high - low) * min(1.0, max(0.0, (len(members) - 2 * NEIGHBOURS) / RESOLUTION_SIZE))
    memberships = []
    with _RANDOM:
        for seed in range(runs):
            # igraph draws from the generator it is given; a fresh one per run, seeded, makes runs repeatable.
            igraph.set_random_number_generator(random.Random(seed))
            memberships.append(graph.community_multilevel(weights=weights, resolution=resolution).membership)
        igraph.set_random_number_generator(random)
    # How many runs put each pair in one community: one column per community of each run, 1 for its
    # changes; the product counts the columns two changes share (whole numbers, exact in floats).
    size = len(members)
    offsets = np.cumsum([0] + [max(m) + 1 for m in memberships[:-1]])
    columns = np.concatenate([np.asarray(m) + offset for m, offset in zip(memberships, offsets, strict=True)])
    runs_of = csr_matrix((np.ones(size * runs), (np.tile(np.arange(size), runs), columns)))
    together = (runs_of @ runs_of.T).toarray()
    distance = 1 - together / runs
    np.fill_diagonal(distance, 0)
    labels = fcluster(linkage(squareform(distance, checks=False), method="average"), t=0.5, criterion="distance")
    clusters: dict[int, list[int]] = defaultdict(list)
    for position, label in enumerate(labels):
        clusters[int(label)].append(members[position])
    return _ordered(list(clusters.values()))


def _nearest(sub: np.ndarray, k: int) -> np.ndarray:
    """Each row's `k` most similar others, most similar first, ties by position: the first `k` columns of
    a stable argsort of `-sub`, found without sorting whole rows (a row's candidates are the values at
    least as similar as its k-th, ties included; only those are sorted)."""
    n = sub.shape[1]
    if n <= k:
        return np.argsort(-sub, axis=1, kind="stable")[:, :k]
    negated = -sub
    kth = np.partition(negated, k - 1, axis=1)[:, k - 1 : k]
    rows, columns = np.nonzero(negated <= kth)  # row by row, columns ascending
    order = np.lexsort((columns, negated[rows, columns], rows))  # by row, then similarity, then position
    starts = np.searchsorted(rows[order], np.arange(sub.shape[0]))
    nearest: np.ndarray = columns[order][starts[:, None] + np.arange(k)]
    return nearest


def _sim(similarity: np.ndarray, members: Sequence[int]) -> float:
    return float(similarity[members[0], members[-1]]) if len(members) == 2 else 1.0


def _ordered(clusters: Iterable[list[int]]) -> list[list[int]]:
    return sorted((sorted(c) for c in clusters), key=lambda c: (-len(c), c[0]))


def _split_dominant(similarity: np.ndarray, clusters: list[list[int]], n: int) -> list[list[int]]:
    """A theme over `LARGEST_SHARE` of the section is split on its own, once, if it falls apart."""
    result = []
    for cluster in clusters:
        if len(cluster) > LARGEST_SHARE * n and len(cluster) >= 4:
            parts = _communities(similarity, cluster)
            if len(parts) > 1:
                result.extend(parts)
                continue
        result.append(cluster)
    return _ordered(result)


def _within_limit(similarity: np.ndarray, clusters: list[list[int]], limit: int) -> tuple[list[list[int]], list[int]]:
    """At most `limit` themes, "Other" included: the largest communities are the themes, and each
    change of the others joins the theme it is most similar to on average; a change similar to none of
    them goes to "Other", which then takes the last theme's place."""
    for room in (limit, limit - 1):
        if len(clusters) <= room:
            return [list(c) for c in clusters], []
        kept = _Growing(clusters[:room])
        other: list[int] = []
        for member in (m for c in clusters[room:] for m in c):
            alike = kept.means(similarity[member])
            closest = int(np.argmax(alike))
            if alike[closest] > 0:
                kept.add(closest, member)
            else:
                other.append(member)
        if not other:
            return _ordered(kept.members), []
    return _ordered(kept.members), other


def _smallest_joined(similarity: np.ndarray, clusters: list[list[int]]) -> list[list[int]]:
    """One theme fewer: the smallest joins the theme its changes are most alike to on average."""
    *rest, smallest = clusters  # ordered: largest first
    alike = [float(similarity[np.ix_(smallest, cluster)].mean()) for cluster in rest]
    closest = int(np.argmax(alike))
    return _ordered([c + smallest if k == closest else c for k, c in enumerate(rest)])


class _Growing:
    """Clusters that gain changes one at a time, each with its members as an index array for `means`
    (made again only for the cluster that grew)."""

    def __init__(self, clusters: Iterable[Sequence[int]]) -> None:
        self.members = [list(c) for c in clusters]
        self._indexes = [np.asarray(c, dtype=np.intp) for c in self.members]

    def means(self, row: np.ndarray) -> list[float]:
        """A change's mean similarity to each cluster (`row`: its similarities), as `ndarray.mean` gives it:
        the same sum (numpy's pairwise summation of the same values) over the same count."""
        return [float(np.add.reduce(row[index]) / len(index)) for index in self._indexes]

    def add(self, position: int, member: int) -> None:
        self.members[position].append(member)
        self._indexes[position] = np.asarray(self.members[position], dtype=np.intp)


# --- sub-topics -------------------------------------------------------------------------------------


def _topics(similarity: np.ndarray, vocabulary: _Vocabulary, members: Sequence[int]) -> tuple[Topic, ...]:
    """At most `MAX_TOPICS` sub-topics: the theme's own communities, the largest kept, each of the rest
    merged into the one it is most similar to (or, alike to none, into a last "further" sub-topic)."""
    members = sorted(members)
    parts = _communities(similarity, members, TOPIC_RUNS) if len(members) >= 4 else [members]
    chosen = [list(p) for p in parts if len(p) >= 2][: MAX_TOPICS - 1] or [list(parts[0])]
    rest = [m for p in parts if not any(p == k for k in chosen) for m in p]
    kept = _Growing(chosen)
    further: list[int] = []
    for member in rest:
        alike = kept.means(similarity[member])
        closest = int(np.argmax(alike))
        if alike[closest] >= 2 * MIN_SIMILARITY:
            kept.add(closest, member)
        else:
            further.append(member)
    topics = _ordered(kept.members)
    if len(further) == 1 and len(topics) < MAX_TOPICS:
        topics.append(further)  # one change alike to none stands as its own sub-topic
    elif further:
        topics.append(sorted(further))
    named: list[Topic] = []
    taken: set[str] = set()
    for index, topic in enumerate(topics):
        if index == len(topics) - 1 and further and len(further) > 1:
            named.append(Topic(tuple(topic), ()))  # alike to nothing: no single term names it
            continue
        terms = [t for t in vocabulary.distinctive(topic, limit=3) if t.casefold() not in taken]
        taken.update(t.casefold() for t in terms[:1])
        share = vocabulary.share(terms[0], topic) if terms else 0.0
        named.append(Topic(tuple(topic), tuple(terms[:1]), share))
    return tuple(named)


# --- distinctive terms ------------------------------------------------------------------------------


class _Vocabulary:
    """The project terms of a section's changes (tracker.core.vocabulary: names such as `MoE` or
    `DeepSeek-V4`, and phrases the section repeats, such as "prefix caching"; never a generic word alone
    or a fragment of a title), which of them each title holds, and how rare each is."""

    def __init__(self, items: Sequence[Item]) -> None:
        self.size = len(items)
        known = month_vocabulary([item.title for item in items], [item.paths for item in items])
        self.terms: list[dict[str, str]] = []  # per item: key -> text as the section writes it
        self.named: dict[str, bool] = {}
        for item in items:
            found = known.found(item.title)
            self.terms.append({term.key: term.text for term in found})
            self.named.update((term.key, term.named) for term in found)
        self.frequency = Counter(key for found in self.terms for key in found)

    def distinctive(self, members: Sequence[int], limit: int) -> tuple[str, ...]:
        """The terms most frequent in `members` and rarest in the section, as written."""
        counts = Counter(key for m in members for key in self.terms[m])
        base, size = self.frequency, self.size
        needed = 1 if len(members) == 1 else max(2, math.ceil(TERM_SHARE * len(members)))

        def score(key: str) -> float:
            rarity = math.log((size + 1) / base[key])
            return counts[key] * (rarity + 0.1) * (1.5 if self.named.get(key) else 1.0)

        candidates = [
            k
            for k, count in counts.items()
            if count >= needed and _worth_naming(k) and (len(members) > 1 or " " not in k)  # one title: one word
        ]
        # A pair as frequent as the rarer of its words says more than either word alone.
        pairs = {k for k in candidates if " " in k and counts[k] >= 0.6 * min(counts[w] for w in k.split())}
        covered = {word for pair in pairs for word in pair.split()}
        candidates = [k for k in candidates if (" " not in k or k in pairs) and k not in covered]
        chosen: list[str] = []
        for key in sorted(candidates, key=lambda k: (-score(k), k)):
            if any(set(key.split()) & set(c.split()) for c in chosen):
                continue
            if chosen and score(key) < 0.5 * score(chosen[0]):
                break  # a much weaker term would name a part of the theme as if it were all of it
            chosen.append(key)
            if len(chosen) == limit:
                break
        return tuple(self._written(key, members) for key in chosen)

    def share(self, written: str, members: Sequence[int]) -> float:
        """The share of `members` whose titles carry a term (as `distinctive` wrote it)."""
        key = " ".join(term_key(word) for word in written.split())
        return sum(1 for m in members if key in self.terms[m]) / max(len(members), 1)

    def _written(self, key: str, members: Sequence[int]) -> str:
        # The section's spelling of the term ("MoE" over "moe"), the same in every theme.
        return next(self.terms[m][key] for m in members if key in self.terms[m])


def _worth_naming(key: str) -> bool:
    """Not a version (`v2`, `0.5.1`) or a number alone, nor a pair starting with one: those name nothing."""
    first = key.split()[0]
    return not (first[:1].isdigit() or (" " not in key and first[:1] == "v" and first[1:2].isdigit()))


__all__ = ["Group", "Item", "Term", "Topic", "forget", "group"]
