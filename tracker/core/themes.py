"""The area (and sub-area) a change is in, by a taxonomy or by its code layout, without a language model. Pure.

A report's themes are grouped per month by tracker.core.clusters; this module gives each change its
area, which that grouping takes as a light prior and the report takes for names ("· Megatron-FSDP").

With a taxonomy (`ThemeConfig`s from the YAML config), every theme is scored against the change:
- paths: the share of the change's files the theme's patterns claim. Test, CI and documentation files
  are ignored when the change also has code files. A pattern with `*`, `?` or `[` is a glob where `*`
  (and `**`) also crosses `/`, and `**/` may match no directory at all; a pattern without them is a
  path prefix (`megatron/core/` or `pretrain_gpt.py`). When patterns of several themes match one file,
  the file goes to the most specific of them (the one with the most literal characters), so a broad
  catch-all like `megatron/training/**` does not take `megatron/training/checkpointing.py` from a
  theme that names it;
- labels: any of the theme's labels on the PR (case-insensitive);
- keywords in the title: case-insensitive and word-bounded, where only letters and digits make a word
  (`inference_optimized` mentions "inference"); a space, `-` or `_` inside a keyword matches any run of
  them or none ("cuda graph" finds "CUDA graphs", "cuda_graph" and "cudagraph"); a plural `s`/`es`
  is accepted. A keyword in the title counts a little more than a whole path share: the title is the
  author's own statement of what the change is about. A keyword in the scope the title declares up front
  (`[MoE] ...`, `fix(fsdp): ...`, `Inference: ...`) counts a little extra; a leading cherry-pick marker
  (`cp: ...`) is not part of the title.
The best score wins, ties going to the theme listed first (scores are whole numbers, so ties are exact);
the highlight inside the theme is chosen the same way; a theme without highlights is its own highlight,
and a change matching none of its highlights gets the last one if that one matches nothing by itself (a
catch-all), else a generic "other" highlight.

A change that no theme matches gets a theme derived from the code layout, as does every change of a
repository without a taxonomy: the most specific directory holding most of its code files (at most two
meaningful levels deep), named for readers in English and Chinese.

Titles, labels and paths come from PR authors: each is cut before any pattern sees it (a title to
`MAX_TITLE` characters, as in tracker.core.groups; a label or a path to `MAX_LABEL` / `MAX_PATH`), and
the patterns of titles cannot backtrack over a run of separators more than once.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import filterfalse

from tracker.core import memo
from tracker.core.groups import MAX_TITLE
from tracker.core.taxonomy import HighlightConfig, ThemeConfig

# Relative weights of the signals, in tenths of a point. A label is a maintainer's explicit call; a title
# keyword is the author's; a path share is circumstantial (a change touches the config and argument files
# of many areas), so all of a change's files in one theme (10) weigh a little less than one keyword (12).
PATH_WEIGHT = 10  # times the share of the change's files the theme claims
LABEL_WEIGHT = 20
KEYWORD_WEIGHT = 12
EXTRA_KEYWORD_WEIGHT = 2  # per further distinct keyword of the same theme, at most two
MAX_EXTRA_KEYWORDS = 2
# A keyword in the title's declared scope (`[MoE] ...`, `fix(fsdp): ...`, `Inference: ...`) is the author
# naming the area up front: it tips a close call. Only a little: teams also tag their own name on work in
# other areas (Megatron-LM's `feat(moe):` on a Gated DeltaNet change).
SCOPE_WEIGHT = 2

# GitHub keeps label names to 50 characters; Linux keeps a path to 4,096 bytes (PATH_MAX), so git cannot
# check out a longer one. Anything longer was not made on GitHub and is cut.
MAX_LABEL = 1024
MAX_PATH = 4096

LAYOUT_PREFIX = "layout-"
OTHER_HIGHLIGHT_ID = "other"
LAYOUT_DEPTH = 2  # meaningful directory levels a layout theme may have ("transformer/moe")


@dataclass(frozen=True)
class ThemeChoice:
    theme_id: str  # stable id (from the taxonomy, or derived, e.g. "layout-megatron-core-inference")
    theme_en: str
    theme_zh: str
    highlight_id: str  # a sub-area of the theme (stable id)
    highlight_en: str
    highlight_zh: str


def choose_theme(
    taxonomy: Sequence[ThemeConfig], title: str, labels: Sequence[str], paths: Sequence[str]
) -> ThemeChoice:
    """The theme and highlight of one change from its title, labels and changed paths. Deterministic."""
    if not taxonomy:
        return layout_theme(paths)
    title = title[:MAX_TITLE]
    labels = [label[:MAX_LABEL] for label in labels]
    paths = [path[:MAX_PATH] for path in paths]
    compiled = _compiled(taxonomy)
    key = (title, tuple(labels), tuple(paths))
    choice = compiled.choices.get(key)
    if choice is None:
        choice = _choose(compiled, title, labels, paths)
        if len(compiled.choices) >= _MEMO_SIZE:  # a long-running server renders many months; stay bounded
            compiled.choices.clear()
        compiled.choices[key] = choice
    return choice


def _choose(compiled: _Compiled, title: str, labels: Sequence[str], paths: Sequence[str]) -> ThemeChoice:
    files = considered_files(paths)
    text, scope = title_scope(title)
    best = _best(compiled.themes.scores(text, scope, labels, files))
    if best is None:
        return layout_theme(paths)
    theme = compiled.taxonomy[best]
    return _with_highlight(theme, compiled.highlights[best], text, scope, labels, files)


def title_scope(title: str) -> tuple[str, str]:
    """The title without a cherry-pick marker, and the area it declares up front, if any: leading
    `[tags]`, a conventional-commit scope `fix(scope):`, or a short `Area:` / `Area |` prefix."""
    text = _CHERRY_PICK.sub("", title[:MAX_TITLE], count=1).strip()
    scopes: list[str] = []
    rest = text
    tags = _TAGS.match(rest)
    if tags:
        scopes.append(tags.group(1).strip())
        rest = rest[tags.end() :]
    conventional = _CONVENTIONAL.match(rest)
    prefix = _PREFIX.match(rest)
    if conventional:
        scopes.append(conventional.group(1))
    elif prefix and len(prefix.group(1).split()) <= _PREFIX_WORDS:
        scopes.append(prefix.group(1))
    return text, " ".join(scopes)


@lru_cache(maxsize=65_536)
def is_auxiliary(path: str) -> bool:
    """Tests, CI and documentation: files that say little about which area a change is in."""
    offered = memo.known("is_auxiliary", path)
    if offered is not memo.MISSING:
        return bool(offered)
    parts = _normalise(path).split("/")
    name = parts[-1].lower()
    directories = [p.lower() for p in parts[:-1]]
    if directories and directories[0] in _AUX_ROOTS:
        return True
    if directories[:2] == ["tools", "ci"]:
        return True
    if any(d in _TEST_DIRECTORIES for d in directories):
        return True
    if name.startswith("test_") or name == "conftest.py" or re.search(r"_tests?\.[a-z0-9]+$", name):
        return True
    return name.endswith(_DOC_SUFFIXES)


def considered_files(paths: Sequence[str]) -> tuple[str, ...]:
    """The files a change is judged by: its code files, or all its files when it has no code files."""
    files, code = sorted_files(tuple(paths))
    return code or files


@lru_cache(maxsize=16_384)  # one change's paths, read for its theme, its highlight and their names
def sorted_files(paths: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """`paths` cleaned, each once, and those of them that are code files (not `is_auxiliary`). A big month's
    report asks this of some ten thousand paths in a process that has judged none of them, so the common case
    is answered in a few calls: paths that need no cleaning (what GitHub sends) are taken as they are, and the
    judgements the report was given (tracker.core.memo) are read at once."""
    if _clean(paths):
        files = tuple(dict.fromkeys(paths))
    else:
        files = tuple(dict.fromkeys(p for p in map(_cleaned_path, paths) if p))
    given = memo.given("is_auxiliary")
    try:
        return files, tuple(filterfalse(given.__getitem__, files))
    except KeyError:  # a path it was not given a judgement of
        return files, tuple(p for p in files if not (given[p] if p in given else is_auxiliary(p)))


def _clean(paths: tuple[str, ...]) -> bool:
    """Whether `_cleaned_path` gives every one of `paths` back as it is (none empty, too long, with space
    around it, or starting with `./` or `/`), asked of all of them at once."""
    joined = "\n" + "\n".join(paths)
    return (
        all(paths)
        and max(map(len, paths), default=0) <= MAX_PATH
        and tuple(map(str.strip, paths)) == paths
        and "\n/" not in joined
        and "\n./" not in joined
    )


def considered_files_of(groups: Sequence[Sequence[str]]) -> tuple[str, ...]:
    """`considered_files` of all the paths of several changes together: the code files of any of them, or
    every file when none has code files; each change's paths sorted once (`sorted_files`)."""
    split = [sorted_files(tuple(paths)) for paths in groups]
    code = tuple(dict.fromkeys(p for _, files in split for p in files))
    return code or tuple(dict.fromkeys(p for files, _ in split for p in files))


# --- taxonomy scoring -------------------------------------------------------------------------------

_Matchers = ThemeConfig | HighlightConfig


@dataclass(frozen=True)
class _Pattern:
    prefix: str  # the literal text every matching path starts with
    regex: re.Pattern[str] | None  # a glob; None for a plain prefix
    specificity: int  # literal characters: the more, the more specific
    owner: int  # index of the theme (or highlight) the pattern belongs to

    def matches(self, path: str) -> bool:
        if self.regex is not None:
            return path.startswith(self.prefix) and self.regex.fullmatch(path) is not None
        # A plain prefix, as in the exclusion rules: the path itself (without the trailing `/`), or under it.
        return path.startswith(self.prefix) and (len(path) == len(self.prefix) or path[len(self.prefix)] == "/")


class _Scorer:
    """Scores a list of themes (or of one theme's highlights) against a change."""

    def __init__(self, entries: Sequence[_Matchers]) -> None:
        self.size = len(entries)
        patterns = [
            _pattern(pattern, index)
            for index, entry in enumerate(entries)
            for pattern in entry.paths
            if _normalise(pattern)
        ]
        # Each path is tried against the patterns that can match its first directory, most specific first.
        anywhere = [p for p in patterns if _first_component(p) is None]
        by_first: dict[str, list[_Pattern]] = {}
        for pattern in patterns:
            first = _first_component(pattern)
            if first is not None:
                by_first.setdefault(first, []).append(pattern)
        self._anywhere = sorted(anywhere, key=_most_specific_first)
        self._by_first = {first: sorted([*own, *anywhere], key=_most_specific_first) for first, own in by_first.items()}
        self.labels = [frozenset(label.strip().casefold() for label in entry.labels) for entry in entries]
        self.keywords = [_keyword_regex(entry.keywords) for entry in entries]
        # A keyword can only match where a word of the title starts, and that word starts with the keyword's
        # first letters: index the entries by them, so a title is searched only for the entries it may mention
        # (one search per entry costs microseconds, and a taxonomy has dozens).
        self._by_start: dict[str, set[int]] = {}
        self._always: set[int] = set()
        for index, entry in enumerate(entries):
            for keyword in entry.keywords:
                start = _keyword_start(keyword)
                if start:
                    self._by_start.setdefault(start, set()).add(index)
                elif keyword.strip():
                    self._always.add(index)
        self._owners: dict[str, frozenset[int]] = {}

    def owners(self, path: str) -> frozenset[int]:
        """The entries whose most specific matching pattern claims the file."""
        cached = self._owners.get(path)
        if cached is not None:
            return cached
        found: set[int] = set()
        best = -1
        for pattern in self._by_first.get(path.split("/", 1)[0], self._anywhere):
            if pattern.specificity < best:
                break
            if pattern.matches(path):
                best = pattern.specificity
                found.add(pattern.owner)
        owners = frozenset(found)
        if len(self._owners) >= 100_000:  # a long-running server sees many paths; keep the cache bounded
            self._owners.clear()
        self._owners[path] = owners
        return owners

    def scores(self, title: str, scope: str, labels: Sequence[str], files: Sequence[str]) -> list[int]:
        """Scores times the number of files (at least one), so that shares stay whole numbers and ties exact."""
        scale = max(len(files), 1)
        scores = [0] * self.size
        for path in files:
            for index in self.owners(path):
                scores[index] += PATH_WEIGHT
        wanted = {label.strip().casefold() for label in labels}
        if wanted:
            for index in range(self.size):
                if wanted & self.labels[index]:
                    scores[index] += LABEL_WEIGHT * scale
        for index in sorted(self._candidates(title)):
            regex = self.keywords[index]
            if regex is None:
                continue
            hits = {match.lastgroup for match in regex.finditer(title)}
            if hits:
                extra = EXTRA_KEYWORD_WEIGHT * min(len(hits) - 1, MAX_EXTRA_KEYWORDS)
                scores[index] += (KEYWORD_WEIGHT + extra) * scale
                if scope and regex.search(scope):
                    scores[index] += SCOPE_WEIGHT * scale
        return scores

    def _candidates(self, title: str) -> set[int]:
        found = set(self._always)
        for word in _WORD.findall(title.lower()):
            for length in range(1, _START_LENGTH + 1):
                found.update(self._by_start.get(word[:length], ()))
        return found


@dataclass(frozen=True)
class _Compiled:
    taxonomy: tuple[ThemeConfig, ...]
    themes: _Scorer
    highlights: tuple[_Scorer, ...]
    choices: dict[tuple[str, tuple[str, ...], tuple[str, ...]], ThemeChoice] = field(default_factory=dict)


_MEMO_SIZE = 100_000
# The config hands out the same taxonomy tuple on every call; hashing it (dozens of pydantic models) would
# cost more than the lookup saves, so it is cached by identity, holding it so that its id stays its own.
_BY_IDENTITY: dict[int, tuple[tuple[ThemeConfig, ...], _Compiled]] = {}


def _compiled(taxonomy: Sequence[ThemeConfig]) -> _Compiled:
    if not isinstance(taxonomy, tuple):  # a list may change between calls: compile by value
        return _compile(tuple(taxonomy))
    entry = _BY_IDENTITY.get(id(taxonomy))
    if entry is not None and entry[0] is taxonomy:
        return entry[1]
    compiled = _compile(taxonomy)
    if len(_BY_IDENTITY) >= 16:
        _BY_IDENTITY.clear()
    _BY_IDENTITY[id(taxonomy)] = (taxonomy, compiled)
    return compiled


@lru_cache(maxsize=16)
def _compile(taxonomy: tuple[ThemeConfig, ...]) -> _Compiled:
    return _Compiled(taxonomy, _Scorer(taxonomy), tuple(_Scorer(theme.highlights) for theme in taxonomy))


def _best(scores: Sequence[int]) -> int | None:
    """The index of the highest positive score; the first one listed on a tie."""
    best: int | None = None
    for index, score in enumerate(scores):
        if score > 0 and (best is None or score > scores[best]):
            best = index
    return best


def _with_highlight(
    theme: ThemeConfig, scorer: _Scorer, title: str, scope: str, labels: Sequence[str], files: Sequence[str]
) -> ThemeChoice:
    if not theme.highlights:
        return ThemeChoice(theme.id, theme.en, theme.zh, theme.id, theme.en, theme.zh)
    best = _best(scorer.scores(title, scope, labels, files))
    if best is not None:
        highlight = theme.highlights[best]
    else:
        last = theme.highlights[-1]
        if not (last.paths or last.labels or last.keywords):  # a catch-all listed last takes the rest
            highlight = last
        else:
            return ThemeChoice(
                theme.id, theme.en, theme.zh, OTHER_HIGHLIGHT_ID, f"Other {theme.en} work", f"{theme.zh}：其他改进"
            )
    return ThemeChoice(theme.id, theme.en, theme.zh, highlight.id, highlight.en, highlight.zh)


def _most_specific_first(pattern: _Pattern) -> tuple[int, int]:
    return -pattern.specificity, pattern.owner


def _first_component(pattern: _Pattern) -> str | None:
    """The first directory (or file name) every path the pattern matches has; None if it may vary."""
    if "/" in pattern.prefix:
        return pattern.prefix.split("/", 1)[0]
    return pattern.prefix if pattern.regex is None else None


def _pattern(pattern: str, owner: int) -> _Pattern:
    pattern = _normalise(pattern)
    wildcard = next((i for i, char in enumerate(pattern) if char in "*?["), None)
    if wildcard is None:
        return _Pattern(pattern.rstrip("/"), None, _specificity(pattern), owner)
    return _Pattern(pattern[:wildcard], _glob_regex(pattern), _specificity(pattern), owner)


def _glob_regex(pattern: str) -> re.Pattern[str]:
    out: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif char == "*":
            while i < len(pattern) and pattern[i] == "*":
                i += 1
            out.append(".*")
        elif char == "?":
            out.append("[^/]")
            i += 1
        elif char == "[":
            end = pattern.find("]", i + 2)
            if end == -1:
                out.append(re.escape(char))
                i += 1
            else:
                body = pattern[i + 1 : end]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body.replace(chr(92), chr(92) * 2)}]")
                i = end + 1
        else:
            out.append(re.escape(char))
            i += 1
    return re.compile("".join(out), re.DOTALL)


def _specificity(pattern: str) -> int:
    return len(re.sub(r"\*+|\?|\[[^\]]*\]", "", _normalise(pattern)))


_WORD = re.compile(r"[a-z0-9]+")
_START_LENGTH = 4


def _keyword_start(keyword: str) -> str:
    """The first letters (at most four) of the title word a keyword's match begins with; "" if the keyword
    does not start with a letter or digit. Separators inside a keyword may match nothing, so "M-FSDP"
    can begin the word "mfsdp": only the letters before the first separator count."""
    match = re.match(r"[a-z0-9]+", keyword.strip().lower())
    return match.group(0)[:_START_LENGTH] if match else ""


def _keyword_regex(keywords: Sequence[str]) -> re.Pattern[str] | None:
    alternatives = []
    for index, keyword in enumerate(keywords):
        tokens = [t for t in re.split(r"[\s_\-]+", keyword.strip()) if t]
        if tokens:
            # Possessive: a token never starts with a separator, so giving one back never helps a match,
            # and a long run of separators after a keyword's first word is read once.
            body = r"[\s_\-]*+".join(re.escape(token) for token in tokens)
            alternatives.append(f"(?P<k{index}>{body})")
    if not alternatives:
        return None
    return re.compile(rf"(?<![A-Za-z0-9])(?:{'|'.join(alternatives)})(?:e?s)?(?![A-Za-z0-9])", re.IGNORECASE | re.ASCII)


# Anchored at the start and possessive where giving characters back cannot help (what follows a run of
# whitespace or letters is never whitespace or a letter): each is one pass over the title.
_CHERRY_PICK = re.compile(r"^\s*+cp\s*+:\s*+", re.IGNORECASE)  # "cp: `Fix X (#123)` into `dev`"
_TAGS = re.compile(r"^\s*+((?:\[[^\]]*+\]\s*+)+)")
_CONVENTIONAL = re.compile(r"^\s*+[A-Za-z]++\(([^)]*+)\)!?\s*+:")
_PREFIX = re.compile(r"^\s*+([^\s:|\[\](){}`][^:|\[\](){}`]{0,39}?)\s*+(?::\s|\|)")
_PREFIX_WORDS = 3


@lru_cache(maxsize=65_536)  # a report names each path of the month several times (themes, highlights)
def _cleaned_path(path: str) -> str:
    return _normalise(path[:MAX_PATH])


def cleaned_path(path: str) -> str:
    """A changed path as the themes read it: without `./` or a leading `/`, at most MAX_PATH characters."""
    return _cleaned_path(path)


def _normalise(path: str) -> str:
    path = path.strip()
    while path.startswith("./"):
        path = path[2:]
    return path.lstrip("/")


# --- the layout default -----------------------------------------------------------------------------

_AUX_ROOTS = frozenset({".github", ".gitlab", ".circleci", ".ci", "ci", "docs", "doc"})
_TEST_DIRECTORIES = frozenset({"tests", "test", "unit_tests", "functional_tests"})
_DOC_SUFFIXES = (".md", ".rst", ".adoc")

# Path levels that say nothing about the area: a source root, or the package's "core".
_GENERIC = frozenset(
    {"src", "lib", "libs", "core", "pkg", "internal", "python", "source", "sources", "packages", "models"}
)

# Top-level folders that say what kind of file it is rather than which area: named as a suffix.
_CATEGORIES: dict[str, tuple[str, str, str]] = {  # folder: English suffix, Chinese suffix, name when alone
    "examples": ("examples", "示例", "Examples"),
    "example": ("examples", "示例", "Examples"),
    "tools": ("tools", "工具", "Tools"),
    "scripts": ("scripts", "脚本", "Scripts"),
    "benchmarks": ("benchmarks", "基准测试", "Benchmarks"),
    "bench": ("benchmarks", "基准测试", "Benchmarks"),
    "experimental": ("(experimental)", "（实验性）", "Experimental"),
    "contrib": ("(contrib)", "（社区贡献）", "Contrib"),
    "docs": ("documentation", "文档", "Documentation"),
    "doc": ("documentation", "文档", "Documentation"),
}

# How technical terms are written; anything else is capitalised.
_TERMS = (
    "MoE CUDA FSDP MFSDP RL API APIs CI CD FP8 FP4 FP16 BF16 MXFP8 NVFP4 KV GPT SSM DSA MLA MTP GDN TP PP "
    "EP CP DP DDP NCCL NVSHMEM NIXL HF LLM LLMs VLM ViT T5 BERT RoPE MIMO TE IO CLI CPU GPU GPUs HTTP "
    "JSON YAML SQL UI URL ONNX LoRA QAT PTQ SFT GRPO NLP ML AI SDK UVM NVTX NVLS THD RNG HTML CSS JS ID "
    "IDs DB ORM gRPC GraphQL OAuth JWT TLS SSL SSH DNS TCP UDP ModelOpt PyTorch TensorRT vLLM GitHub "
    "GitLab OpenAI FlashInfer cuDNN Triton NeMo DeepEP HybridEP mHC VL ASR TTS OCR RAG"
)
_SPELLINGS: dict[str, str] = {word.lower(): word for word in _TERMS.split()}


def spelling(word: str) -> str:
    """How a technical term is written (`rl` is "RL", `pytorch` "PyTorch"); any other word capitalised."""
    return _SPELLINGS.get(word.lower(), word[:1].upper() + word[1:])


def layout_theme(paths: Sequence[str]) -> ThemeChoice:
    """The theme a change gets from where its code lives: the most specific directory holding more than
    half of its code files, kept at most two meaningful levels deep, and the next level below it (a
    directory, or a file's stem) as the highlight."""
    files = considered_files(paths)
    if not files:
        return ThemeChoice(f"{LAYOUT_PREFIX}general", "General changes", "综合改进", "general", "General", "综合改进")
    directories = [tuple(f.split("/")[:-1]) for f in files]
    theme_dir = _majority_prefix(directories, len(files))
    theme_dir = _cap_depth(theme_dir)
    theme_en, theme_zh = _name_directory(theme_dir)
    theme_id = LAYOUT_PREFIX + (_slug("-".join(theme_dir)) or "root")
    highlight = _highlight_component(files, theme_dir)
    highlight_en = _readable(highlight) or "General"
    return ThemeChoice(
        theme_id,
        theme_en,
        theme_zh,
        _slug(highlight) or "general",
        highlight_en,
        f"{highlight_en} 相关改进",
    )


def layout_area(paths: Sequence[str]) -> tuple[str, str] | None:
    """The area a set of files is in, named for readers in English and Chinese, as `layout_theme` names it;
    None when it is no area at all: the top level, or only the package root (`megatron/core`)."""
    return layout_area_of(considered_files(paths))


def layout_area_of(files: Sequence[str]) -> tuple[str, str] | None:
    """`layout_area` of the files `considered_files` chose."""
    if not files:
        return None
    theme_dir = _cap_depth(_majority_prefix([tuple(f.split("/")[:-1]) for f in files], len(files)))
    if not theme_dir or not _meaningful(theme_dir):
        return None
    if len(theme_dir) == 1 and theme_dir[0].lower() not in _CATEGORIES and not theme_dir[0].startswith("."):
        return None  # a top-level package ("megatron/") is most of the repository, not an area of it
    return _name_directory(theme_dir)


def _majority_prefix(directories: Sequence[tuple[str, ...]], total: int) -> tuple[str, ...]:
    """The deepest directory holding more than half of the files. At most one directory of a given depth
    can, and its parent does too, so the walk goes down one level at a time, keeping only the files under
    the directory chosen: linear in the number of path components (counting every prefix of every path
    would be quadratic in a path's depth, which a PR author chooses)."""
    prefix: list[str] = []
    under = list(directories)
    while True:
        depth = len(prefix)
        counts = Counter(parts[depth] for parts in under if len(parts) > depth)
        held = [name for name, count in counts.items() if 2 * count > total]
        if not held:
            return tuple(prefix)
        prefix.append(held[0])
        under = [parts for parts in under if len(parts) > depth and parts[depth] == held[0]]


def _meaningful(parts: Sequence[str]) -> list[int]:
    """Indexes of the levels that name an area: not a source root, not the top-level package (when
    something more specific follows), not a category folder like examples/ or tools/."""
    indexes = []
    for index, part in enumerate(parts):
        lower = part.lower()
        if lower in _GENERIC:
            continue
        # A dot folder (.gitlab, .claude) is a tool's home, not a package root: it names the area.
        if index == 0 and not part.startswith(".") and (lower in _CATEGORIES or len(parts) > 1):
            continue
        indexes.append(index)
    return indexes


def _cap_depth(parts: tuple[str, ...]) -> tuple[str, ...]:
    # Below a category folder the first level already names the area ("examples/inference").
    depth = 1 if parts and parts[0].lower() in _CATEGORIES else LAYOUT_DEPTH
    meaningful = _meaningful(parts)
    if len(meaningful) > depth:
        return parts[: meaningful[depth - 1] + 1]
    return parts


def _name_directory(parts: tuple[str, ...]) -> tuple[str, str]:
    if not parts:
        return "Top-level files", "仓库顶层文件"
    words = [_readable(parts[i]) for i in _meaningful(parts)]
    # Nothing but a package root ("megatron/core"): name it in full.
    name = _dedupe(" ".join(w for w in words if w)) or _dedupe(" ".join(_readable(p) for p in parts)) or parts[-1]
    category = _CATEGORIES.get(parts[0].lower())
    if category is not None:
        en_suffix, zh_suffix, alone = category
        if len(parts) == 1:
            return alone, zh_suffix.strip("（）")
        # Chinese puts no space before full-width brackets: "Lite（实验性）", but "Inference 示例".
        return f"{name} {en_suffix}", f"{name}{zh_suffix}" if zh_suffix.startswith("（") else f"{name} {zh_suffix}"
    return name, f"{name} 模块"


def _highlight_component(files: Sequence[str], theme_dir: tuple[str, ...]) -> str:
    """The first meaningful level below the theme's directory (a directory, or a file's stem), the one
    most of the files share; ties go to the name that sorts first."""
    counts: Counter[str] = Counter()
    for path in files:
        parts = path.split("/")
        if tuple(parts[: len(theme_dir)]) != theme_dir:
            continue
        below = parts[len(theme_dir) :]
        names = [*below[:-1], _stem(below[-1])]
        chosen = next((n for n in names if n.lower() not in _GENERIC), names[-1])
        counts[chosen] += 1
    if not counts:
        return ""
    return min(counts.items(), key=lambda item: (-item[1], item[0]))[0]


def _stem(name: str) -> str:
    return name.split(".", 1)[0] if not name.startswith(".") else name


def _readable(component: str) -> str:
    words = [w for w in re.split(r"[\s_\-.]+", component) if w]
    return " ".join(spelling(w) for w in words)


def _dedupe(name: str) -> str:
    """`Distributed FSDP Megatron FSDP` reads better without the repeated word."""
    seen: set[str] = set()
    kept = []
    for word in name.split():
        if word.lower() not in seen:
            kept.append(word)
            seen.add(word.lower())
    return " ".join(kept)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
