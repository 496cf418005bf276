"""A month's project vocabulary: the terms that name something in the project, and names made of them. Pure.

A theme or sub-topic is named after what its changes are about, in the project's own words, never after a
generic English word or a fragment of a title (issue 32). The vocabulary of a section is read from its
titles (and confirmed by its paths):

- *named terms*, which name something wherever they appear: an acronym (`MoE`, `FSDP`, `THD`), a word with a
  capital or digit inside (`DeepEP`, `HybridModel`, `DeepSeek-V4`, `Qwen3.5-VL`, `FP8`, `mHC`);
- *recurring terms*, which the month shows to be names by using them again: a snake_case identifier
  (`pg_collection`), a proper noun capitalised inside titles and never written in lower case (`Mamba`,
  `Muon`), and phrases of two or three words written side by side in at least two titles, or in one title
  and a path component (`prefix_caching/`, `cuda_graphs.py`): "prefix caching", "CUDA graphs", "dynamic
  inference", "MFSDP v2" (a version counts only attached to a name).

Never a term: one generic word alone (a word of `GENERIC`: "path", "version", "error", "training"), a
generic acronym (`API`, `PR`, `CI`), the name of a top-level folder of the section's paths (the package
itself, `megatron`), a phrase that starts with a commit verb ("Extend", "Save", "Fix") or ends on a
function word or a participle ("TE fused", "TE cross" of "TE cross entropy": a phrase as frequent as a
longer one holding it is that longer one's fragment).

Chinese: a term is translated when the shipped glossary (`GLOSSARY`: common engineering words and phrases)
knows every plain word of it, named terms staying verbatim ("Mamba inference" is "Mamba 推理"); otherwise it
stays as written. `spaced` puts a space between CJK and Latin text, as Chinese technical writing does.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from tracker.core.groups import MAX_TITLE, display_title
from tracker.core.themes import considered_files, layout_area_of
from tracker.core.titles import STOP_WORDS, is_named, term_key

MAX_PHRASE = 3  # words: a longer run of words is a sentence, not a name
MIN_TITLES = 2  # a term that is no name by its spelling must recur to be one


def _inflected(verbs: str) -> frozenset[str]:
    """Each verb with the forms a commit title writes it in (`fix`, `fixes`, `fixed`, `fixing`)."""
    forms: set[str] = set()
    for verb in verbs.split():
        stem = verb[:-1] if verb.endswith("e") and not verb.endswith("ee") else verb
        forms |= {verb, verb + "s", verb + "es", verb + "d", verb + "ed", stem + "ed", stem + "ing"}
        if verb.endswith("y") and len(verb) > 3:
            forms |= {verb[:-1] + "ies", verb[:-1] + "ied"}
        if re.fullmatch(r"[a-z]*[^aeiou][aeiou][bdgmnpt]", verb):  # drop: dropped, dropping
            forms |= {verb + verb[-1] + "ed", verb + verb[-1] + "ing"}
    return frozenset(forms)


# What was done, not what it was done to: a name never starts with one of these.
VERBS = _inflected(
    "fix add remove support update use make enable disable allow improve refactor clean move rename handle set "
    "get avoid bump introduce implement change ensure follow revert apply keep let extend save load skip pass "
    "drop replace reduce increase raise expose unify simplify restore re-enable reenable migrate port align "
    "adjust tweak polish guard check validate verify prevent preserve respect switch convert cache compute "
    "run call create delete reuse wrap unwrap split merge sync upgrade downgrade pin unpin deprecate "
    "cleanup correct document test print log track report return read write store fetch release mark "
    "expand extract gate thread plumb propagate pipe inject wire hook patch tune optimize optimise speed "
    "accelerate avoid hide show emit warn raise catch limit cap bound pad fill install build rebuild "
    "attempt try make default generalize generalise decouple couple separate isolate factor consolidate "
    "deduplicate dedupe inline override register configure parametrize parameterize specify select "
    "filter sort route dispatch schedule overlap fuse offload reload shard reshard slice broadcast "
    "gather scatter reduce allocate free release cast scale clip stash eliminate suppress silence "
    "account initialize initialise init reset resume retry stop start finish complete bring fold drop point"
)

# The verbs a title starts with: a phrase never ends on one either ("queue and add").
_COMMIT_VERBS = _inflected(
    "fix add remove support update use make enable disable allow improve refactor clean move rename handle set "
    "get avoid bump introduce implement change ensure follow revert apply keep let extend save skip pass drop "
    "replace point"
)


def _words(text: str) -> frozenset[str]:
    """The words of `text`, separated by spaces: a long word list written as text."""
    return frozenset(text.split())


# Words a phrase never ends on: it would be cut in the middle ("TE fused", "NCCL flight" of "NCCL flight
# recorder"), or end on what links it to more.
_FUNCTION = _words(
    "a an the of to in on for and or with without from by into onto via when while as at is are was were be "
    "being been has have had do does did can could should would will may might must not no it its this that "
    "these those than then so if but vs per all any some each both other same own new old against about "
    "above below"
)


GENERIC = (
    VERBS
    | STOP_WORDS
    | _FUNCTION
    | _words(
        "done down slower miscellaneous problem problems error errors failure failures fail fails failing "
        "crash crashes warnings typo typos path paths version versions api apis pr prs cd skill skills graph "
        "graphs training train trainer transformer model models types thing things stuff work works part "
        "parts value values name names file files folder folders dir directory directories module modules "
        "function functions method methods class classes object objects argument arguments arg args param "
        "params parameter parameters config configs configuration flag flags settings variable variables "
        "feature features functionality usage example examples sample samples script scripts tool tools util "
        "utils utility utilities helper helpers common general generic base basic core master branch branches "
        "weekly daily readme documentation comment comments unit functional integration tag tags commit "
        "commits mr request requests pull dependency dependencies dep package packages requirement "
        "requirements import imports message messages output outputs input inputs result results data info "
        "information detail details state status step steps stage stages level levels mode modes size sizes "
        "number numbers count counts time times next previous prior current latest legacy experimental "
        "temporary temp todo tbd hack workaround enhancement enhancements optimization optimizations "
        "optimisation performance speedup memory job jobs task tasks process processes entry entries line "
        "lines layer layers block blocks units item items list lists map maps key keys table tables index "
        "indices buffer buffers tensor tensors shape shapes dtype inside outside during through around again "
        "back behind beyond toward towards upon whether which what who whom whose where why how shall need "
        "needs needed nvidia github gitlab gpu gpus cpu cpus ui url urls id ids uuid json yaml http https cli "
        "oom nan nans inf lgtm faq sdk true false none null python"
    )
)

# Acronyms any repository writes that name nothing inside one (they pass `is_named` by their capitals).
GENERIC_NAMES = _words(
    "api apis pr prs ci cd ui url urls id ids uuid json yaml http https cli oom nan inf lgtm faq sdk todo "
    "wip tbd readme md nvidia github gitlab gpu gpus cpu cpus os io"
)

# What a title says was wrong with or done to a thing, after its name ("circular dependency usage",
# "checkpoint load path"): a phrase never ends on one of these.
_FILLER = _words(
    "usage use issue bug error failure problem support handling logic code change update fix improvement "
    "cleanup refactor path option flag case way thing stuff part version call step param arg argument "
    "config value example"
)
# Inside a phrase of three words, "mixture of experts": the only function words a name may hold.
_INNER = frozenset({"of", "and"})

_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_]*+(?:[.+\-][A-Za-z0-9_]++)*+")
# A title's parts no phrase crosses: punctuation, brackets, quotes.
_BREAK = re.compile(r"[,;:!?()\[\]{}<>`'\"|/=]+|\s[-–—]+\s|\.\s")
_VERSION = re.compile(r"v?\d+(?:\.\d+)*[a-z]?", re.IGNORECASE)
_CJK = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_CJK_LATIN = re.compile(rf"([{_CJK}])([A-Za-z0-9`])")
_LATIN_CJK = re.compile(rf"([A-Za-z0-9`%)])([{_CJK}])")


@dataclass(frozen=True)
class Term:
    key: str  # how terms are compared: each word by `titles.term_key`, joined by spaces
    text: str  # as the month writes it (the spelling with capitals inside a word first)
    named: bool  # holds a named term: `MoE`, `DeepSeek-V4`


@dataclass(frozen=True)
class Vocabulary:
    """The terms of a section (or month): what each title says of them, and how they are written."""

    terms: dict[str, Term] = field(default_factory=dict)
    generic: frozenset[str] = frozenset()  # the section's own generic words: its paths' top-level folders

    def found(self, title: str) -> tuple[Term, ...]:
        """The vocabulary's terms a title holds, in order of first appearance, each once."""
        seen: dict[str, Term] = {}
        for key in _candidates(title):
            term = self.terms.get(key)
            if term is not None and key not in seen:
                seen[key] = term
        return tuple(seen.values())

    def __contains__(self, text: str) -> bool:
        return _key(text.split()) in self.terms


def month_vocabulary(titles: Sequence[str], paths: Iterable[Sequence[str]] = ()) -> Vocabulary:
    """The vocabulary of a section's (or month's) titles, each change's paths confirming phrases."""
    path_lists = [tuple(p) for p in paths]
    generic = _packages(path_lists)
    in_paths = _path_phrases(path_lists)
    # Recurring means in different titles: a change and its cherry-pick to another branch say it once.
    titles_of: dict[str, set[str]] = defaultdict(set)
    spellings: dict[str, Counter[str]] = defaultdict(Counter)
    capitalised: Counter[str] = Counter()  # a plain word capitalised inside a title, per title
    lower: Counter[str] = Counter()
    for title in titles:
        said = _said(title)
        for key, written, inside in _occurrences(title):
            titles_of[key].add(said)
            spellings[key][written] += 1
            if " " not in key and not is_named(written) and inside:
                (capitalised if written[:1].isupper() else lower)[key] += 1
    terms: dict[str, Term] = {}
    for key, where in titles_of.items():
        words = key.split()
        if any(w in generic for w in words) and all(w in generic or w in GENERIC for w in words):
            continue
        if len(words) == 1:
            written = _spelling(spellings[key])
            plain_name = capitalised[key] >= MIN_TITLES and not lower[key] and key not in GENERIC
            identifier = "_" in written.strip("_") and len(where) >= MIN_TITLES
            if _named(written) or plain_name or identifier:
                terms[key] = Term(key, written, _named(written))
            continue
        if len(where) >= MIN_TITLES or (len(where) == 1 and key in in_paths):  # spelled only once kept
            written = _spelling(spellings[key])
            terms[key] = Term(key, written, any(_named(w) for w in written.split()))
    # A phrase no more frequent than a longer phrase holding it is that phrase's fragment ("TE cross").
    # Linear: each phrase offers its count to the shorter phrases inside it.
    longest: Counter[str] = Counter()
    for key in terms:
        words = key.split()
        for length in range(2, len(words)):
            for start in range(len(words) - length + 1):
                inner = " ".join(words[start : start + length])
                longest[inner] = max(longest[inner], len(titles_of[key]))
    for key in [k for k in terms if " " in k and longest[k] >= len(titles_of[k])]:
        del terms[key]
    return Vocabulary(terms, generic)


_SOURCE_ROOTS = frozenset({"src", "lib", "python", "packages", "source"})


def _packages(path_lists: Sequence[tuple[str, ...]]) -> frozenset[str]:
    """The top-level folders of the section's paths (below a source root, the next level too): the package
    itself (`megatron/`), tests, examples. They name the repository, not a part of it."""
    return frozenset().union(*(_layout(files)[0] for files in path_lists))


@lru_cache(maxsize=16_384)  # a change's files, read again at each report of its month
def _layout(files: tuple[str, ...]) -> tuple[frozenset[str], frozenset[str]]:
    """Of one change's files: their top-level folders (`_packages`) and the phrases their folder and file
    names write (`_path_phrases`)."""
    packages, phrases = set(), set()
    for path in files:
        parts = path.split("/")
        if len(parts) > 1:
            packages.add(term_key(parts[0]))
        if len(parts) > 2 and parts[0].lower() in _SOURCE_ROOTS:
            packages.add(term_key(parts[1]))
        for component in parts:
            stem = component.split(".", 1)[0]
            words = [w for w in re.split(r"[_\-]+", stem) if w]
            if 2 <= len(words) <= MAX_PHRASE and all(w.isalpha() for w in words):
                phrases.add(_key(words))
    return frozenset(packages), frozenset(phrases)


@lru_cache(maxsize=65_536)  # a month's titles are read again at each of its reports
def _occurrences(title: str) -> tuple[tuple[str, str, bool], ...]:
    """Every candidate term of a title: (key, as written, whether it stands inside the title rather than
    first). Single words, and runs of two to `MAX_PHRASE` words inside one part of the title that could be
    names (no commit verb first, no function word or participle last, no generic word alone)."""
    found: list[tuple[str, str, bool]] = []
    for part_index, part in enumerate(_BREAK.split(_clean(title))):
        words = [w.strip("_") for w in _WORD.findall(part)]
        words = [w for w in words if w]
        for start, word in enumerate(words):
            inside = part_index > 0 or start > 0
            if _single(word):
                found.append((term_key(word), word, inside))
            for length in range(2, MAX_PHRASE + 1):
                run = words[start : start + length]
                if len(run) == length and _phrase(run):
                    found.append((_key(run), " ".join(run), inside))
    return tuple(found)


def _candidates(title: str) -> list[str]:
    return [key for key, _, _ in _occurrences(title)]


_REVERT = re.compile(r"^\s*revert\b\W*", re.IGNORECASE)
_QUOTES_AND_NUMBERS = re.compile(r"[\"“”]|\(#\d+\)")


@lru_cache(maxsize=65_536)
def _clean(title: str) -> str:
    return display_title(title[:MAX_TITLE])


def _said(title: str) -> str:
    """What a title says, for counting the titles a phrase recurs in: a revert says what it reverts."""
    return " ".join(_QUOTES_AND_NUMBERS.sub(" ", _REVERT.sub("", _clean(title))).split()).casefold()


_FILE = re.compile(r"\.(?:md|rst|txt|py|yaml|yml|toml|json|cfg|ini|sh|lock)$", re.IGNORECASE)
# An identifier that ends in a dotted version after `_` or `-`: how release branches are named.
_RELEASE = re.compile(r"[A-Za-z][A-Za-z0-9]*+(?:[_-][A-Za-z0-9]++)*?[_-][rv]?\d++(?:\.\d++)++", re.IGNORECASE)


def _single(word: str) -> bool:
    key = term_key(word)
    # A name starts with a letter (not a date or a count: `06_06_2026`, `15min`) and is no generic file.
    if len(key) < 2 or not word[:1].isalpha() or _VERSION.fullmatch(word) or key in GENERIC_NAMES:
        return False
    if _RELEASE.fullmatch(word):  # a release branch (`core_r0.17.0`, `release_v1.2`): where, not what
        return False
    if _FILE.search(word):  # a file (`versions1.json`, `pretrain_gpt.py`): where a change is, not what
        return False
    if _named(word) or "_" in word:
        return True
    return key not in GENERIC and word.lower() not in GENERIC


def _named(word: str) -> bool:
    """A name by its spelling, and not a generic acronym, a generic word in capitals (`MINOR`), a version or a
    number."""
    key = term_key(word)
    return is_named(word) and not _VERSION.fullmatch(word) and key not in GENERIC_NAMES and key not in GENERIC


def _phrase(run: Sequence[str]) -> bool:
    lower = [w.lower() for w in run]
    first, last = lower[0], lower[-1]
    if _key(run) in GLOSSARY:
        return True  # a known term of the trade: "load balancing" starts with a verb and is a name
    if first in VERBS or first in _FUNCTION or _VERSION.fullmatch(first) or first in GENERIC_NAMES:
        return False
    # A version belongs to the name before it ("MFSDP v2"), never to a plain word ("Add v2").
    if _VERSION.fullmatch(last):
        return len(run) == 2 and _named(run[0])
    if not _named(run[-1]) and (
        last in _FUNCTION
        or term_key(last) in _FILLER
        or (last in _COMMIT_VERBS and not last.endswith("ing"))
        or (last.endswith("ed") and len(last) > 4)  # a participle waits for its noun: "TE fused"
    ):
        return False
    if any(w in _FUNCTION and (i in (0, len(run) - 1) or w not in _INNER) for i, w in enumerate(lower)):
        return False
    if any(_VERSION.fullmatch(w) for w in lower):
        return False
    # A name holds at least one word that names something: not all of it generic.
    return any(_named(w) or (w.lower() not in GENERIC and term_key(w) not in GENERIC) for w in run)


def _key(words: Sequence[str]) -> str:
    return " ".join(term_key(w) for w in words)


def _spelling(spellings: Counter[str]) -> str:
    # "MoE" over "moe" over "Moe": capitals inside a word are the author's spelling of a name; a capital
    # only at the start is usually a title's first word.
    def casing(text: str) -> int:
        if any(char.isupper() for word in text.split() for char in word[1:]):
            return 0
        return 1 if text == text.lower() else 2

    return min(spellings.items(), key=lambda item: (casing(item[0]), -item[1], item[0]))[0]


def _path_phrases(path_lists: Sequence[tuple[str, ...]]) -> frozenset[str]:
    """Phrases the code layout writes in snake_case or kebab-case: `prefix_caching/`, `cuda_graphs.py`."""
    return frozenset().union(*(_layout(files)[1] for files in path_lists))


# --- names ----------------------------------------------------------------------------------------


def is_name(text: str, generic: Iterable[str] = ()) -> bool:
    """Whether one part of a name ("MoE", "Prefix caching", "Mixture of Experts (MoE)") names something: a
    folder of the code, or not one generic word, no commit verb first, not the repository's owner or package
    (`generic`: words the caller knows name nothing here, such as the top-level folders)."""
    words = _WORD.findall(text)
    if not words:
        return False
    if "/" in text and " " not in text.strip():
        return True  # a folder of the code (`megatron/training`, from `area_name`) names one place in it
    local = {term_key(w) for w in generic}
    first = words[0].lower()
    if first in VERBS and not _named(words[0]):
        return False
    keys = [term_key(w) for w in words]
    if all(
        k in local or k in GENERIC_NAMES or (k in GENERIC and not _named(w)) for k, w in zip(keys, words, strict=True)
    ):
        return False
    if len(words) == 1:
        word = words[0]
        return (_named(word) or "_" in word or word[:1].isupper() or word.islower()) and keys[0] not in GENERIC
    return True


def theme_terms(members: Sequence[str], vocabulary: Vocabulary, limit: int = 2) -> tuple[str, ...]:
    """The vocabulary terms most of `members` (titles) hold, most supported first: at most `limit`, each in
    at least two titles (one when there is one title), no two sharing a word."""
    counts: Counter[str] = Counter(term.key for title in members for term in vocabulary.found(title))
    needed = 1 if len(members) == 1 else 2
    ranked = sorted(
        (key for key, count in counts.items() if count >= needed),
        key=lambda key: (-counts[key] * (1.5 if vocabulary.terms[key].named else 1.0), -len(key.split()), key),
    )
    chosen: list[str] = []
    for key in ranked:
        if not any(set(key.split()) & set(c.split()) for c in chosen):
            chosen.append(key)
        if len(chosen) == limit:
            break
    return tuple(vocabulary.terms[key].text for key in chosen)


def name(
    terms: Sequence[str], area: tuple[str, str] | None = None, files: Sequence[str] = ()
) -> tuple[str, str] | None:
    """A group's name in English and Chinese: the taxonomy's area when the caller found one for most of its
    changes (the caller decides, and passes it), else its one or two vocabulary terms ("MoE and DeepEP"),
    else the code layout's area of its files (`area_name`); None when nothing names it."""
    if area is not None:
        return area
    if terms:
        words = [capitalised(terms[0]), *terms[1:]]
        en = words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]
        zh = "、".join(chinese(term) for term in terms)  # as the titles write them: a capital says a name
        return en, spaced(zh)
    return area_name(files)


def area_name(files: Sequence[str]) -> tuple[str, str] | None:
    """The code layout's area of a group's files (`themes.layout_area_of`), or, when the layout would name
    it by one generic word ("Training", "Transformer"), its folder as the code writes it
    (`megatron/training`), which names one place in the project."""
    chosen = considered_files(files)
    area = layout_area_of(chosen)
    if area is None:
        return None
    en, zh = area
    if is_name(en):
        return en, spaced(zh)
    folder = _folder(chosen, en)
    return (folder, spaced(f"{folder} 模块")) if folder else None


def _folder(files: Sequence[str], named: str) -> str:
    """The deepest folder holding more than half of `files`, cut after the level the layout named."""
    prefix: list[str] = []
    under = [f.split("/")[:-1] for f in files]
    while True:
        counts = Counter(parts[len(prefix)] for parts in under if len(parts) > len(prefix))
        held = [part for part, count in counts.items() if 2 * count > len(files)]
        if not held:
            break
        prefix.append(held[0])
        under = [parts for parts in under if len(parts) >= len(prefix) and parts[len(prefix) - 1] == held[0]]
    wanted = named.lower().replace(" ", "_")
    for depth, part in enumerate(prefix):
        if part.lower() == wanted:
            return "/".join(prefix[: depth + 1])
    return "/".join(prefix)


def capitalised(term: str) -> str:
    """A name's first letter up ("Prefix caching"), but "mHC", "vLLM" and `pg_collection` as written."""
    first = term.split()[0]
    plain = first.replace("-", "").isalpha()
    return term[:1].upper() + term[1:] if first.islower() and plain else term


# --- Chinese ----------------------------------------------------------------------------------------

# Common engineering words and phrases, keyed as `titles.term_key` keys them (lower case, no plural `s`).
# Project terms (named terms, identifiers) are never translated.
GLOSSARY: dict[str, str] = {
    # phrases first: `chinese` matches the longest
    "pipeline parallel": "流水线并行",
    "pipeline parallelism": "流水线并行",
    "tensor parallel": "张量并行",
    "tensor parallelism": "张量并行",
    "context parallel": "上下文并行",
    "context parallelism": "上下文并行",
    "data parallel": "数据并行",
    "data parallelism": "数据并行",
    "expert parallel": "专家并行",
    "expert parallelism": "专家并行",
    "sequence parallel": "序列并行",
    "sequence parallelism": "序列并行",
    "cuda graph": "CUDA Graph",
    "data loader": "数据加载",
    "dataloader": "数据加载",
    "distributed checkpointing": "分布式检查点",
    "distributed optimizer": "分布式优化器",
    "prefix caching": "前缀缓存",
    "kv cache": "KV 缓存",
    "mixed precision": "混合精度",
    "mixture of expert": "混合专家",
    "load balancing": "负载均衡",
    "sequence packing": "序列打包",
    "activation recomputation": "激活重计算",
    "activation checkpointing": "激活检查点",
    "gradient accumulation": "梯度累积",
    "learning rate": "学习率",
    "host memory": "主机内存",
    "memory leak": "内存泄漏",
    "unit test": "单元测试",
    "functional test": "功能测试",
    "error handling": "错误处理",
    "token dispatcher": "Token 分发器",
    "dynamic inference": "动态推理",
    "static inference": "静态推理",
    "speculative decoding": "投机解码",
    "reinforcement learning": "强化学习",
    "fault tolerance": "容错",
    "rotary embedding": "旋转位置编码",
    "position embedding": "位置编码",
    "attention mask": "注意力掩码",
    "flash attention": "Flash Attention",
    "linear attention": "线性注意力",
    "sparse attention": "稀疏注意力",
    "grouped gemm": "Grouped GEMM",
    "all reduce": "All-Reduce",
    "all gather": "All-Gather",
    "reduce scatter": "Reduce-Scatter",
    "all to all": "All-to-All",
    "process group": "进程组",
    "random seed": "随机种子",
    "text generation": "文本生成",
    "multi token prediction": "多 Token 预测",
    # words
    "checkpoint": "检查点",
    "checkpointing": "检查点",
    "inference": "推理",
    "optimizer": "优化器",
    "optimiser": "优化器",
    "scheduler": "调度器",
    "scheduling": "调度",
    "parallel": "并行",
    "parallelism": "并行",
    "distributed": "分布式",
    "dependency": "依赖",
    "dependencie": "依赖",
    "documentation": "文档",
    "doc": "文档",
    "test": "测试",
    "testing": "测试",
    "benchmark": "基准测试",
    "benchmarking": "基准测试",
    "example": "示例",
    "tokenizer": "分词器",
    "tokenization": "分词",
    "dataset": "数据集",
    "data": "数据",
    "loader": "加载器",
    "loading": "加载",
    "saving": "保存",
    "conversion": "转换",
    "converter": "转换器",
    "export": "导出",
    "import": "导入",
    "memory": "内存",
    "cache": "缓存",
    "caching": "缓存",
    "prefix": "前缀",
    "kernel": "算子",
    "fused": "融合",
    "fusion": "融合",
    "attention": "注意力",
    "embedding": "嵌入",
    "layer": "层",
    "model": "模型",
    "training": "训练",
    "pretraining": "预训练",
    "finetuning": "微调",
    "fine-tuning": "微调",
    "evaluation": "评估",
    "precision": "精度",
    "quantization": "量化",
    "gradient": "梯度",
    "gradients": "梯度",
    "loss": "损失",
    "logging": "日志",
    "log": "日志",
    "metric": "指标",
    "profiling": "性能分析",
    "profiler": "性能分析器",
    "performance": "性能",
    "throughput": "吞吐",
    "latency": "延迟",
    "communication": "通信",
    "overlap": "重叠",
    "offloading": "卸载",
    "offload": "卸载",
    "recompute": "重计算",
    "recomputation": "重计算",
    "sharding": "分片",
    "shard": "分片",
    "buffer": "缓冲区",
    "router": "路由器",
    "routing": "路由",
    "expert": "专家",
    "dispatcher": "分发器",
    "dispatch": "分发",
    "pipeline": "流水线",
    "tensor": "张量",
    "sequence": "序列",
    "packing": "打包",
    "context": "上下文",
    "engine": "引擎",
    "server": "服务器",
    "serving": "服务化",
    "request": "请求",
    "batch": "批次",
    "batching": "批处理",
    "generation": "生成",
    "sampling": "采样",
    "decoding": "解码",
    "tokens": "Token",
    "token": "Token",
    "vocabulary": "词表",
    "configuration": "配置",
    "config": "配置",
    "argument": "参数",
    "parameter": "参数",
    "initialization": "初始化",
    "validation": "验证",
    "container": "容器",
    "docker": "Docker",
    "release": "发布",
    "installation": "安装",
    "build": "构建",
    "packaging": "打包",
    "security": "安全",
    "license": "许可证",
    "upgrade": "升级",
    "compatibility": "兼容性",
    "deprecation": "弃用",
    "refactoring": "重构",
    "cleanup": "清理",
    "storage": "存储",
    "filesystem": "文件系统",
    "async": "异步",
    "asynchronous": "异步",
    "synchronous": "同步",
    "dynamic": "动态",
    "static": "静态",
    "hybrid": "混合",
    "heterogeneous": "异构",
    "multimodal": "多模态",
    "vision": "视觉",
    "language": "语言",
    "audio": "音频",
    "speech": "语音",
    "recipe": "配方",
    "emerging": "新兴",
    "mixed": "混合",
    "sparse": "稀疏",
    "linear": "线性",
    "rotary": "旋转",
    "local": "本地",
    "global": "全局",
    "remote": "远程",
    "manager": "管理器",
    "coordinator": "协调器",
    "endpoint": "接口",
    "interface": "接口",
    "client": "客户端",
    "rollout": "Rollout",
    "reward": "奖励",
    "agent": "智能体",
    "environment": "环境",
    "sequence length": "序列长度",
    "batch size": "批大小",
    "micro batch": "微批次",
    "global batch": "全局批次",
    "state dict": "状态字典",
    "weight": "权重",
    "activation": "激活",
    "normalization": "归一化",
    "dropout": "Dropout",
    "mask": "掩码",
    "padding": "填充",
    "determinism": "确定性",
    "deterministic": "确定性",
    "reproducibility": "可复现性",
    "stability": "稳定性",
    "numerical": "数值",
    "accuracy": "精度",
    "correctness": "正确性",
    "hang": "卡死",
    "deadlock": "死锁",
    "timeout": "超时",
    "resiliency": "弹性",
    "elastic": "弹性",
    "fault": "故障",
    "straggler": "慢节点",
    "monitoring": "监控",
    "telemetry": "遥测",
    "visualization": "可视化",
    "upcycling": "Upcycling",
}


def chinese(term: str) -> str:
    """A term in Chinese: the glossary's words for its plain words when it knows all of them, named terms and
    identifiers verbatim; otherwise the term as written."""
    words = term.split()
    out: list[str] = []
    index = 0
    while index < len(words):
        for length in range(min(MAX_PHRASE, len(words) - index), 0, -1):
            run = words[index : index + length]
            known = GLOSSARY.get(_key(run)) if not (length == 1 and (_named(run[0]) or "_" in run[0])) else None
            if known is not None:
                out.append(known)
                index += length
                break
        else:
            word = words[index]
            # A capital the vocabulary kept is a proper noun ("Mamba"): the titles never wrote it in lower case.
            if not (_named(word) or "_" in word or word[:1].isupper()):
                return term  # a plain word the glossary does not know: the whole term stays as written
            out.append(word)
            index += 1
    return spaced(_joined(out))


def _joined(parts: Sequence[str]) -> str:
    """Chinese parts side by side, Latin ones apart: "Mamba 推理", "前缀缓存", "MoE DeepEP"."""
    text = ""
    for part in parts:
        if text and not _cjk(text[-1]) and not _cjk(part[0]):
            text += " "
        text += part
    return text


def _cjk(char: str) -> bool:
    return re.match(rf"[{_CJK}]", char) is not None


def spaced(text: str) -> str:
    """A space between CJK and Latin text ("MoE 混合专家模型", "分布式 Checkpoint"), as Chinese technical
    writing puts it; full-width punctuation takes none."""
    return _LATIN_CJK.sub(r"\1 \2", _CJK_LATIN.sub(r"\1 \2", text))


__all__ = [
    "GENERIC",
    "GENERIC_NAMES",
    "GLOSSARY",
    "VERBS",
    "Term",
    "Vocabulary",
    "area_name",
    "capitalised",
    "chinese",
    "is_name",
    "month_vocabulary",
    "name",
    "spaced",
    "theme_terms",
]
