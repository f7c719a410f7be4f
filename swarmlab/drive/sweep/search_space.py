"""Search spaces from params.yaml, resolved against one model and one dataset.

Layout: ``sweep.spaces.<task>.<key>.<name>: <spec>`` where ``<key>`` is a model name, a glob pattern
over model names (``swarmformer*``) or ``default``. Model ``M`` gets the space under the key equal
to ``M``, else under the first pattern matching ``M``, else ``default``.

``<name>`` is a field of the engine's ``TrainConfig`` (batch_size, lr, weight_decay, ...) or a field of
the model's config dataclass (d_model, seq_len, dropout, ...). A model's own space must only name
fields it has; the ``default`` space is generic: names the model lacks are dropped, so any registered
model that fits the task can be swept without code changes.

``<spec>``::

    [a, b, c]                 categorical (a single element is a constant)
    {loguniform: [lo, hi]}    float on a log scale (write 5.0e-5: YAML reads 5e-5 as a string)
    {uniform: [lo, hi]}       float
    {int: [lo, hi]}           integer, both ends included
    a scalar                  constant

Constraints between categorical model fields (SwarmFormer: seq_len divisible by cluster_size) are the
config dataclass's own validation: every combination is built, and fields whose valid combinations do
not factorise are searched jointly, as one categorical over the valid tuples (``cluster_size|seq_len``
with values ``"8|64"``), so the searcher never proposes an invalid model.

Nothing here imports Ray: ``ResolvedSpace.tune_space()`` builds Tune domains on demand.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import itertools
import math
from dataclasses import dataclass, field

from swarmlab.errors import SwarmlabError

DISTRIBUTIONS = ("loguniform", "uniform", "int")
DATA_FIELDS = ("vocab_size", "num_classes")  # set by the data and the task, never searched
MAX_COMBINATIONS = 200_000  # categorical model-field combinations checked one by one
JOINT_SEP = "|"


@dataclass
class Dim:
    """One searched dimension: a Tune config key and its distribution."""

    name: str  # key in the Tune config (``cluster_size|seq_len`` for a joint dimension)
    kind: str  # choice, joint, loguniform, uniform, int
    values: list = field(default_factory=list)  # choice values, or joint codes
    low: float | int | None = None
    high: float | int | None = None
    fields: tuple[str, ...] = ()  # the fields a joint dimension sets
    decode: dict = field(default_factory=dict)  # joint code -> {field: value}

    def describe(self) -> str:
        if self.kind == "choice":
            return f"{self.name} in {{{', '.join(map(str, self.values))}}}"
        if self.kind == "joint":
            return f"({', '.join(self.fields)}) in {len(self.values)} valid tuples"
        return f"{self.name} ~ {self.kind}[{self.low}, {self.high}]"


@dataclass
class ResolvedSpace:
    """A space for one model: what to sample, what is fixed, and where each value goes."""

    model: str
    source: str  # the params.yaml key it came from, e.g. sweep.spaces.imdb.swarmformer*
    dims: list[Dim]
    fixed: dict  # constants from the space
    train_keys: frozenset[str]  # names that go to TrainConfig
    model_keys: frozenset[str]  # names that go to the model's config
    model_base: dict  # model overrides every trial starts from (train.model_overrides it accepts)
    dropped: list[str] = field(default_factory=list)  # generic names this model does not have
    notes: list[str] = field(default_factory=list)  # values that fit no valid combination

    def tune_space(self) -> dict:
        """The Tune ``param_space``: one domain per searched dimension (constants are not sent)."""
        from ray import tune  # ray: heavy, and only a sweep or a run on Ray needs it

        out = {}
        for d in self.dims:
            if d.kind in ("choice", "joint"):
                out[d.name] = tune.choice(list(d.values))
            elif d.kind == "loguniform":
                out[d.name] = tune.loguniform(d.low, d.high)
            elif d.kind == "uniform":
                out[d.name] = tune.uniform(d.low, d.high)
            else:  # int, both ends included
                out[d.name] = tune.randint(d.low, d.high + 1)
        return out

    def decode(self, config: dict) -> dict:
        """A Tune config -> ``{name: value}`` for every searched and fixed name (joint dims expanded)."""
        out = {}
        for d in self.dims:
            value = config[d.name]
            if d.kind == "joint":
                out.update(d.decode[value])
            elif d.kind == "int":
                out[d.name] = int(value)
            elif d.kind in ("loguniform", "uniform"):
                out[d.name] = float(value)
            else:
                out[d.name] = value
        out.update(self.fixed)
        return out

    def split(self, values: dict) -> tuple[dict, dict]:
        """``(train overrides, model overrides)`` of decoded values."""
        train = {k: v for k, v in values.items() if k in self.train_keys}
        model = {k: v for k, v in values.items() if k in self.model_keys}
        return train, model

    def describe(self) -> str:
        parts = [d.describe() for d in self.dims] + [f"{k}={v}" for k, v in self.fixed.items()]
        return f"{self.model} ({self.source}): " + "; ".join(parts)


def parse_spec(where: str, spec) -> tuple[str, object]:
    """``(kind, payload)``: ``("const", v)``, ``("choice", [..])`` or ``(distribution, (lo, hi))``."""
    if isinstance(spec, list):
        if not spec:
            raise SwarmlabError(f"{where} is an empty list: give at least one value")
        if len({repr(v) for v in spec}) != len(spec):
            raise SwarmlabError(f"{where} lists a value twice: {spec!r}")
        if any(isinstance(v, (list, dict)) or v is None for v in spec):
            raise SwarmlabError(f"{where}: choices must be plain values, got {spec!r}")
        return ("const", spec[0]) if len(spec) == 1 else ("choice", list(spec))
    if isinstance(spec, dict):
        if len(spec) != 1 or next(iter(spec)) not in DISTRIBUTIONS:
            raise SwarmlabError(
                f"{where}: a distribution is one of {{loguniform|uniform|int: [low, high]}}, got {spec!r}"
            )
        kind, bounds = next(iter(spec.items()))
        numeric = (
            isinstance(bounds, list)
            and len(bounds) == 2
            and all(isinstance(b, (int, float)) and not isinstance(b, bool) for b in bounds)
        )
        if not numeric:
            raise SwarmlabError(
                f"{where}.{kind} needs [low, high] as two numbers, got {bounds!r} "
                f"(write 5.0e-5, not 5e-5: YAML reads the latter as a string)"
            )
        low, high = bounds
        if not all(math.isfinite(b) for b in bounds):
            raise SwarmlabError(f"{where}.{kind}: bounds must be finite numbers, got {bounds!r}")
        if not low < high:
            raise SwarmlabError(
                f"{where}.{kind}: low {low} must be below high {high} (a constant is a one-element list)"
            )
        if kind == "loguniform" and low <= 0:
            raise SwarmlabError(f"{where}.loguniform: low must be > 0, got {low}")
        if kind == "int" and not (isinstance(low, int) and isinstance(high, int)):
            raise SwarmlabError(f"{where}.int: bounds must be integers, got {bounds!r}")
        return kind, (low, high)
    if spec is None:
        raise SwarmlabError(f"{where} is empty: give a value, a list of choices or a distribution")
    return "const", spec


def space_entry(spaces: dict, task: str, model: str) -> tuple[str, dict, bool]:
    """``(key, spec mapping, generic)`` of the space model ``model`` gets for ``task``."""
    task_spaces = spaces.get(task)
    if not isinstance(task_spaces, dict) or not task_spaces:
        raise SwarmlabError(
            f"sweep.spaces has no search spaces for task {task!r}: add sweep.spaces.{task} "
            f"with at least a `default` space (see docs/sweeps.md)"
        )
    if model in task_spaces:
        key = model
    else:
        key = next((k for k in task_spaces if k != "default" and fnmatch.fnmatchcase(model, k)), None)
        key = key or ("default" if "default" in task_spaces else None)
    if key is None:
        raise SwarmlabError(f"sweep.spaces.{task} has no space for model {model!r} and no `default` space: add one")
    spec = task_spaces[key]
    if not isinstance(spec, dict) or not spec:
        raise SwarmlabError(f"sweep.spaces.{task}.{key} must map names to choices or distributions")
    return key, spec, key == "default"


def _check(where: str, fn, values: dict):
    try:
        return fn(values)
    except (TypeError, ValueError) as exc:
        raise SwarmlabError(f"{where}: {exc}") from None


def _groups(names: list[str], valid: list[dict]) -> list[list[str]]:
    """Partition ``names`` so that ``valid`` is the product of its projections on the groups."""
    parent = {n: n for n in names}

    def root(n):
        while parent[n] != n:
            n = parent[n]
        return n

    for a, b in itertools.combinations(names, 2):
        pair = {(c[a], c[b]) for c in valid}
        if len(pair) != len({c[a] for c in valid}) * len({c[b] for c in valid}):
            parent[root(b)] = root(a)
    groups: dict[str, list[str]] = {}
    for n in names:
        groups.setdefault(root(n), []).append(n)
    out = list(groups.values())
    size = math.prod(len({tuple(c[n] for n in g) for c in valid}) for g in out)
    if size != len(valid):  # a constraint among three or more fields that no pair shows: search them jointly
        dependent = [n for g in out if len(g) > 1 for n in g] or names
        out = [g for g in out if not set(g) & set(dependent)] + [[n for n in names if n in dependent]]
        size = math.prod(len({tuple(c[n] for n in g) for c in valid}) for g in out)
        if size != len(valid):
            out = [list(names)]
    order = {n: i for i, n in enumerate(names)}
    return sorted((sorted(g, key=order.get) for g in out), key=lambda g: order[g[0]])


def resolve_space(
    spaces: dict,
    task: str,
    model: str,
    *,
    model_cfg,
    train_fields: set[str] | frozenset[str],
    check_train=None,
    data_seq_len: int | None = None,
    model_overrides: dict | None = None,
) -> ResolvedSpace:
    """Resolve the params.yaml space of ``model`` for ``task`` and check that it admits valid trials.

    Args:
        model_cfg: the model's config dataclass instance (from a model built with the data's vocabulary).
        train_fields: names that go to the engine's TrainConfig.
        check_train: ``fn(overrides)`` that raises ValueError/TypeError for invalid training values.
        data_seq_len: tokens per example in the data; every searched ``seq_len`` must fit in it.
        model_overrides: ``train.model_overrides``; fields the model has are the base of every trial.
    """
    if not dataclasses.is_dataclass(model_cfg):
        raise SwarmlabError(
            f"model {model!r} exposes no config dataclass as `model.cfg`: the sweep cannot see its fields"
        )
    key, specs, generic = space_entry(spaces, task, model)
    where_base = f"sweep.spaces.{task}.{key}"
    model_fields = {f.name for f in dataclasses.fields(model_cfg)}
    base = {k: v for k, v in (model_overrides or {}).items() if k in model_fields}
    base_cfg = _check(f"train.model_overrides for {model}", lambda kw: dataclasses.replace(model_cfg, **kw), base)

    parsed: dict[str, tuple[str, object]] = {}
    dropped, train_keys, model_keys = [], set(), set()
    for name, spec in specs.items():
        where = f"{where_base}.{name}"
        if name in DATA_FIELDS:
            raise SwarmlabError(f"{where}: {name} comes from the data and the task, it cannot be searched")
        if name in model_fields:
            model_keys.add(name)
        elif name in train_fields:
            train_keys.add(name)
        elif generic:
            dropped.append(name)
            continue
        else:
            raise SwarmlabError(
                f"{where}: {model} has no config field {name!r} and the training config has none either; "
                f"model fields: {', '.join(sorted(model_fields - set(DATA_FIELDS)))}; "
                f"training fields: {', '.join(sorted(train_fields))}"
            )
        parsed[name] = parse_spec(where, spec)
    if not any(kind != "const" for kind, _ in parsed.values()):
        raise SwarmlabError(
            f"{where_base} searches nothing for {model}: give at least one list of choices or a distribution"
        )

    if data_seq_len is not None and "seq_len" in model_fields:
        kind, payload = parsed.get("seq_len", ("const", base_cfg.seq_len))
        offered = payload if kind == "choice" else [payload[1]] if kind == "int" else [payload]
        too_long = [v for v in offered if isinstance(v, int) and v > data_seq_len]
        if too_long:
            raise SwarmlabError(
                f"{where_base}: {model} would train at seq_len {', '.join(map(str, too_long))} but the data was tokenized "
                f"to {data_seq_len} tokens: raise tokenize.seq_len to {max(too_long)} and rerun the tokenize stage, "
                f"or keep seq_len <= {data_seq_len} in the space"
            )

    fixed = {n: p for n, (k, p) in parsed.items() if k == "const"}
    dims: list[Dim] = []
    notes: list[str] = []

    # training values: every choice and both bounds must make a valid TrainConfig
    if check_train is not None:
        train_fixed = {n: v for n, v in fixed.items() if n in train_keys}
        _check(where_base, check_train, train_fixed)
        for n in train_keys:
            kind, payload = parsed[n]
            for v in payload if kind == "choice" else payload if kind != "const" else ():
                _check(f"{where_base}.{n}={v}", check_train, {**train_fixed, n: v})

    # model values: constants, then every combination of the categorical fields
    model_fixed = {n: v for n, v in fixed.items() if n in model_keys}
    cfg0 = _check(where_base, lambda kw: dataclasses.replace(base_cfg, **kw), model_fixed)
    cat = [n for n in parsed if n in model_keys and parsed[n][0] == "choice"]
    cont = [n for n in parsed if n in model_keys and parsed[n][0] in DISTRIBUTIONS]
    n_combos = math.prod(len(parsed[n][1]) for n in cat)
    if n_combos > MAX_COMBINATIONS:
        raise SwarmlabError(
            f"{where_base}: {n_combos:,} combinations of {', '.join(cat)} are too many to check; "
            f"narrow the categorical choices"
        )
    valid, first_error = [], None
    low_cont = {n: parsed[n][1][0] for n in cont}
    for values in itertools.product(*(parsed[n][1] for n in cat)):
        combo = dict(zip(cat, values))
        try:
            dataclasses.replace(cfg0, **combo, **low_cont)
            valid.append(combo)
        except (TypeError, ValueError) as exc:
            first_error = first_error or (combo, exc)
    if not valid:
        combo, exc = first_error
        shown = ", ".join(f"{k}={v}" for k, v in combo.items()) or "the fixed values"
        raise SwarmlabError(
            f"{where_base} admits no valid configuration of {model}: every combination fails, e.g. {shown}: {exc}"
        )
    for n in cont:  # continuous model fields: both bounds must be valid with some valid combination
        lo, hi = parsed[n][1]
        for v in (lo, hi):
            _check(f"{where_base}.{n}={v}", lambda kw: dataclasses.replace(cfg0, **kw), {**valid[0], **low_cont, n: v})

    for group in _groups(cat, valid) if cat else []:
        tuples = list(dict.fromkeys(tuple(c[n] for n in group) for c in valid))  # space order, deduplicated
        for i, n in enumerate(group):
            unused = [v for v in parsed[n][1] if v not in {t[i] for t in tuples}]
            if unused:
                notes.append(f"{n}={', '.join(map(str, unused))} fits no valid combination: not searched")
        if len(group) == 1:
            values = [t[0] for t in tuples]
            if len(values) == 1:
                fixed[group[0]] = values[0]
            else:
                dims.append(Dim(group[0], "choice", values))
        else:
            codes = {JOINT_SEP.join(map(str, t)): dict(zip(group, t)) for t in tuples}
            dims.append(Dim(JOINT_SEP.join(group), "joint", list(codes), fields=tuple(group), decode=codes))
    for n, (kind, payload) in parsed.items():
        if n in train_keys and kind == "choice":
            dims.append(Dim(n, "choice", list(payload)))
        elif kind in DISTRIBUTIONS:
            dims.append(Dim(n, kind, low=payload[0], high=payload[1]))
    if not dims:
        raise SwarmlabError(f"{where_base} leaves nothing to search for {model} once invalid combinations are removed")
    return ResolvedSpace(
        model=model,
        source=where_base,
        dims=dims,
        fixed=fixed,
        train_keys=frozenset(train_keys),
        model_keys=frozenset(model_keys),
        model_base=base,
        dropped=dropped,
        notes=notes,
    )
