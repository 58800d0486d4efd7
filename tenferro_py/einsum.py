"""einsum: subscripts parsed and checked once, contraction planned by opt_einsum.

Subscripts follow numpy.einsum's rules: any letters as indices (str.isalpha, more than 52
of them too), an ellipsis broadcast NumPy-style, a size-1 index broadcast against a longer one,
NumPy's implicit output. Parsing spells them once in index symbols where none of that is
left (an ellipsis becomes its axes, a broadcast size-1 axis an index of its own), so the
planning, the kernels and the rules below see plain subscripts, and ASCII subscripts that
use none of it come back as written. Only numpy.einsum itself is handed a–z, A–Z.

Plans are cached per (subscripts, shapes); the kernels are :mod:`tenferro_py.contraction`'s. An
einsum of more than two operands is recorded as the pairwise contractions of its opt_einsum path,
each intermediate in the axis order opt_einsum gives it (an order chosen to suit its consumer would
change the sums' order, and the examples' last bits, for a few per cent), so the reverse sweep follows the forward's tree and reuses its
intermediates, which the tape holds (and the independent pairs may run side by side), instead of
recontracting all other operands for each one; every primitive has one or two operands. The JVP
sums one einsum per operand with its tangent in place; the VJP of an operand is the einsum of the
output cotangent with the other operand, broadcast over indices only that operand has, and put
back on the diagonal where the operand repeats an index (a trace). When both operands of a step
need a cotangent, the output's cotangent is first reordered once (one copy) into the order both
contractions read in place (:func:`~tenferro_py.contraction.cotangent_order`).

On structured operands (:mod:`tenferro_py.structure`) a factored matrix enters as its
two factors, and a block inside zeros restricts every operand to the range of the indices
it covers: the contraction then costs what the block costs, and the result is a block
where those indices remain.
"""

from __future__ import annotations

import collections
import functools
import itertools
import math
import string
from typing import Callable, Collection, Iterator, Sequence

import numpy as np
import opt_einsum

from . import contraction
from .errors import DTypeMismatch, InvalidArgument, ShapeMismatch
from .ops.elementwise import cj
from .ops.structural import SliceConfig
from .rules import RuleSet
from .structure import Embedded, Product, dense, embedded
from .tensor import Aval, Tensor

_RULES = RuleSet()


def semantic_ad_rules() -> RuleSet:
    """The einsum family's AD rules, to merge into an AdContext (a new set on each call)."""
    return _RULES.copy()


def parse(subscripts: object, shapes: Sequence[tuple[int, ...]]) -> tuple[tuple[str, ...], str]:
    """Checked (input subscripts, output subscript) in index symbols, by numpy.einsum's rules (cached).

    Subscripts of ASCII letters without an ellipsis or a broadcast come back as written.
    """
    if not isinstance(subscripts, str):
        raise InvalidArgument("einsum", "subscripts as a str such as 'ij,jk->ik'", repr(subscripts))
    return _parse(subscripts, tuple(shapes))


ELLIPSIS = "..."


def _symbols() -> Iterator[str]:
    """Index symbols in order: a-z, A-Z (numpy.einsum's), then the letters from U+00C0 up.

    Every symbol is a letter (str.isalpha), so subscripts written in symbols parse again
    (the rules' own einsums) and mean the same.
    """
    return (c for c in itertools.chain(string.ascii_letters, map(chr, itertools.count(0xC0))) if c.isalpha())


def _fresh_symbols(used: Collection[str]) -> Iterator[str]:
    return (c for c in _symbols() if c not in used)


def _tokens(term: str, where: str, subscripts: str) -> tuple[str, ...]:
    """The indices of one operand's (or the output's) subscript in order, an ellipsis as one token."""
    head, ellipsis, tail = term.partition(ELLIPSIS)
    if ELLIPSIS in tail:
        raise InvalidArgument("einsum", f"at most one ellipsis '...' in {where}", repr(term))
    for c in head + tail:
        if c == ".":
            raise InvalidArgument("einsum", f"'.' only as part of an ellipsis '...' in {where}", repr(term))
        if not c.isalpha():
            raise InvalidArgument("einsum", "indices that are letters, with ',', '->', '...' and spaces",
                                  f"{c!r} in {subscripts!r}")
    return (*head, ELLIPSIS, *tail) if ellipsis else tuple(head)


@functools.lru_cache(maxsize=4096)
def _parse(subscripts: str, shapes: tuple[tuple[int, ...], ...]) -> tuple[tuple[str, ...], str]:
    """Plain subscripts (ASCII letters, an output, no ellipsis, spaces or broadcast, sizes that agree)
    are checked here and come back as written; anything else goes the whole way."""
    lhs, arrow, out = subscripts.partition("->")
    terms, size = lhs.split(","), {}
    if (arrow and subscripts.isascii() and len(terms) == len(shapes) and len(set(out)) == len(out)
            and all(sub.isalpha() or not sub for sub in (*terms, out))
            and all(len(sub) == len(shape) and all(size.setdefault(c, n) == n for c, n in zip(sub, shape))
                    for sub, shape in zip(terms, shapes))
            and set(out) <= size.keys()):
        return tuple(terms), out
    return _spelled(*_read(subscripts, shapes), shapes)


def _read(
    subscripts: str, shapes: tuple[tuple[int, ...], ...]
) -> tuple[list[tuple[str, ...]], list[int], tuple[str, ...]]:
    """The subscripts as written, checked against the operands' ranks: (per operand its indices,
    an ellipsis as one token; per operand how many axes its ellipsis stands for; the output's
    indices, NumPy's implicit output where there is no '->': the broadcast axes, then the
    letters that appear once, sorted)."""
    op = "einsum"
    lhs, arrow, rhs = subscripts.replace(" ", "").partition("->")
    if "->" in rhs:
        raise InvalidArgument(op, "at most one '->'", repr(subscripts))
    written = lhs.split(",")
    if len(written) != len(shapes):
        raise InvalidArgument(op, f"{len(written)} operands for {subscripts!r}", f"{len(shapes)}")
    terms = [_tokens(term, f"operand {k}", subscripts) for k, term in enumerate(written)]
    ranks = []
    for k, (term, shape) in enumerate(zip(terms, shapes)):
        letters = len(term) - (ELLIPSIS in term)
        if len(shape) < letters or (ELLIPSIS not in term and len(shape) != letters):
            rank = f"at least {letters}" if ELLIPSIS in term else f"{letters}"
            raise ShapeMismatch(op, f"operand {k} of rank {rank} ({written[k]!r})", f"shape {list(shape)}")
        ranks.append(len(shape) - letters)
    with_ellipsis = any(ELLIPSIS in term for term in terms)
    counts = collections.Counter(c for term in terms for c in term if c != ELLIPSIS)
    if not arrow:
        return terms, ranks, (ELLIPSIS,) * with_ellipsis + tuple(sorted(c for c, n in counts.items() if n == 1))
    out = _tokens(rhs, "the output", subscripts)
    if ELLIPSIS not in out and max(ranks):
        raise InvalidArgument(op, f"an ellipsis '...' in the output (the ellipses broadcast to rank {max(ranks)})",
                              repr(rhs))
    letters_out = [c for c in out if c != ELLIPSIS]
    if len(set(letters_out)) != len(letters_out) or not set(letters_out) <= set(counts):
        raise InvalidArgument(op, "output indices that are distinct and appear in the inputs", repr(rhs))
    return terms, ranks, out


def _spelled(terms: list[tuple[str, ...]], ranks: list[int], out: tuple[str, ...],
             shapes: tuple[tuple[int, ...], ...]) -> tuple[tuple[str, ...], str]:
    """The subscripts in index symbols, every index of one size in every operand that has it.

    ASCII letters stand for themselves; any other letter, each axis the ellipses broadcast
    over (aligned right, as NumPy's broadcasting) and each size-1 axis broadcast against a
    longer one get a symbol of their own. A broadcast size-1 axis is renamed within its
    operand, so it is summed there alone: the value numpy.einsum gives, and a VJP that sums
    over the broadcast.
    """
    letters = dict.fromkeys(c for term in terms for c in term if c != ELLIPSIS)
    kept = {c for c in letters if c in string.ascii_letters}
    fresh = _fresh_symbols(kept)
    symbol = {c: c if c in kept else next(fresh) for c in letters}
    rank = max(ranks)
    broadcast_axes = [next(fresh) for _ in range(rank)]
    names = {symbol[c]: f"index {c!r}" for c in letters}
    names |= {e: f"ellipsis axis {i}" for i, e in enumerate(broadcast_axes)}

    def spelled(term: tuple[str, ...], ellipsis_rank: int) -> str:
        ellipsis = "".join(broadcast_axes[rank - ellipsis_rank :])
        return "".join(ellipsis if c == ELLIPSIS else symbol[c] for c in term)

    inputs = [spelled(term, r) for term, r in zip(terms, ranks)]
    size: dict[str, int] = {}  # each symbol's broadcast size
    for k, (sub, shape) in enumerate(zip(inputs, shapes)):
        own: dict[str, int] = {}
        for c, n in zip(sub, shape):
            if own.setdefault(c, n) != n:
                raise ShapeMismatch("einsum", f"{names[c]} of one size within operand {k} ({own[c]})", f"{n}")
        for c, n in own.items():
            if size.setdefault(c, n) == 1:
                size[c] = n
            elif n not in (1, size[c]):
                raise ShapeMismatch("einsum", f"{names[c]} of one size ({size[c]}) or 1 in every operand",
                                    f"{n} in operand {k}")
    for k, (sub, shape) in enumerate(zip(inputs, shapes)):
        broadcast = {c: next(fresh) for c in dict.fromkeys(c for c, n in zip(sub, shape) if n == 1 and size[c] != 1)}
        inputs[k] = "".join(broadcast.get(c, c) for c in sub)
    return tuple(inputs), spelled(out, rank)


@functools.lru_cache(maxsize=4096)
def plan(inputs: tuple[str, ...], output: str, shapes: tuple[tuple[int, ...], ...]) -> Callable[..., np.ndarray]:
    """How to evaluate these subscripts for these shapes (cached per subscripts and shapes).

    One or two operands go to :func:`tenferro_py.contraction.kind` (a batched matrix product, a
    broadcast multiply, a reordered copy), and what it leaves (a trace, an index summed inside one
    operand) to ``numpy.einsum``; three or more operands to opt_einsum's planned contraction.
    """
    if len(inputs) > 2:
        return opt_einsum.contract_expression(",".join(inputs) + "->" + output, *shapes, optimize="auto")
    kernel = contraction.kind(inputs, output)
    return kernel(inputs, output, shapes) if kernel is not None else _numpy_einsum(inputs, output)


def _numpy_einsum(inputs: tuple[str, ...], output: str) -> Callable[..., np.ndarray]:
    """numpy.einsum of these subscripts, their symbols spelled as numpy.einsum's letters a-z, A-Z."""
    symbols = dict.fromkeys("".join(inputs) + output)
    if len(symbols) > len(string.ascii_letters):
        raise InvalidArgument("einsum", f"at most {len(string.ascii_letters)} distinct indices in one step that "
                              "numpy.einsum computes (one operand, or two with a trace)", f"{len(symbols)}")
    ascii_of: dict[str, str | int | None] = dict(zip(symbols, string.ascii_letters))
    spec = (",".join(inputs) + "->" + output).translate(str.maketrans(ascii_of))
    return lambda *arrays: np.einsum(spec, *arrays)


AUTO = ("auto", None)


def check_optimize(optimize: object, count: int) -> tuple:
    """numpy.einsum's ``optimize`` for ``count`` operands, as a plan request (kind, argument): an
    opt_einsum strategy and its memory limit (True is 'greedy', as in NumPy; a (strategy, limit)
    pair limits the intermediates' size, as in NumPy), or an explicit path ("path", steps): NumPy's
    ['einsum_path', (i, j), ...] or a bare list of steps, each a tuple of positions in the list of
    operands left, checked; False (NumPy's unoptimised einsum) is the one step of all operands; or a
    planner ("planner", it): any callable of opt_einsum's PathOptimizer protocol, ``planner(inputs,
    output, size_dict, memory_limit) -> path`` (opt_einsum's optimisers and path functions,
    cotengra's HyperOptimizer and ReusableHyperOptimizer), asked once per subscripts and shapes."""
    expected = ("optimize: False, True, a strategy name ('greedy', 'optimal' or another of opt_einsum's), a "
                "(strategy, memory limit) pair, a path ['einsum_path', (i, j), ...], or a path optimiser "
                "(opt_einsum's or cotengra's)")

    def strategy(name: object) -> bool:
        try:
            return isinstance(name, str) and name != "einsum_path" and bool(opt_einsum.paths.get_path_fn(name))
        except KeyError:
            return False

    if optimize is False:
        return ("path", (tuple(range(count)),))
    if optimize is True:
        return ("greedy", None)
    if strategy(optimize):
        return (optimize, None)
    if callable(optimize):
        return ("planner", optimize)
    if not isinstance(optimize, (list, tuple)):
        raise InvalidArgument("einsum", expected, repr(optimize))
    if len(optimize) == 2 and strategy(optimize[0]):
        limit = optimize[1]
        if not isinstance(limit, (int, np.integer)) or isinstance(limit, bool) or limit < 1:
            raise InvalidArgument("einsum", "a memory limit: an int >= 1 (the largest intermediate's size)",
                                  repr(limit))
        return (optimize[0], int(limit))
    steps = list(optimize[1:]) if optimize and optimize[0] == "einsum_path" else list(optimize)
    left = count
    for step in steps:
        if (not isinstance(step, (list, tuple)) or not step or len(set(step)) != len(step)
                or not all(isinstance(i, (int, np.integer)) and 0 <= i < left for i in step)):
            raise InvalidArgument("einsum", f"a path whose steps are tuples of distinct positions among the {left} "
                                            "operands left", f"step {step!r} of {optimize!r}")
        left -= len(step) - 1
    if left != 1:
        raise InvalidArgument("einsum", f"a path that contracts all {count} operands into one",
                              f"{left} left after {optimize!r}")
    return ("path", tuple(tuple(int(i) for i in step) for step in steps))


def planned(planner: Callable, inputs: tuple[str, ...], output: str, shapes: tuple[tuple[int, ...], ...]) -> tuple:
    """The path a planner (opt_einsum's PathOptimizer protocol) gives for these subscripts, checked
    as an explicit path is."""
    size_dict = {c: n for sub, shape in zip(inputs, shapes) for c, n in zip(sub, shape)}
    try:
        path = planner([frozenset(sub) for sub in inputs], frozenset(output), size_dict, None)
    except Exception as err:
        raise InvalidArgument("einsum", "a path optimiser that plans these subscripts",
                              f"{type(planner).__name__} raising {type(err).__name__}: {err}") from err
    if not isinstance(path, (list, tuple)):
        raise InvalidArgument("einsum", "a path optimiser returning a path, a list of tuples of positions",
                              f"{type(planner).__name__} returning {path!r}")
    return check_optimize(list(path), len(inputs))


@functools.lru_cache(maxsize=4096)
def pairwise_steps(
    inputs: tuple[str, ...], output: str, shapes: tuple[tuple[int, ...], ...], optimize: tuple = AUTO
) -> tuple[tuple[tuple[int, ...], tuple[str, ...], str], ...]:
    """The steps of the path ``optimize`` asks for (:func:`check_optimize`; opt_einsum's 'auto' by
    default) as (positions to pop, their subscripts, result subscript), cached.

    Each step pops the operands at ``positions`` (in that order) from the list of
    remaining operands and appends their contraction.
    """
    kind, argument = optimize
    if kind == "planner":
        kind, argument = planned(argument, inputs, output, shapes)
    path = [tuple(step) for step in argument] if kind == "path" else kind
    _, info = opt_einsum.contract_path(",".join(inputs) + "->" + output, *shapes, shapes=True, optimize=path,
                                       memory_limit=None if kind == "path" else argument)
    steps = []
    for positions, _, spec, _, _ in info.contraction_list:
        lhs, rhs = spec.split("->")
        steps.append((tuple(positions), tuple(lhs.split(",")), rhs))
    return tuple(steps)


def numpy_path(subscripts: object, shapes: Sequence[tuple[int, ...]], optimize: object) -> list:
    """numpy.einsum's explicit path ['einsum_path', (i, j), ...] for the request ``optimize``
    (:func:`check_optimize`), planned and cached as a session's einsum is: for a planner object,
    which numpy.einsum does not take."""
    inputs, output = parse(subscripts, shapes)
    if len(shapes) <= 2:
        return ["einsum_path", tuple(range(len(shapes)))]
    steps = pairwise_steps(inputs, output, tuple(map(tuple, shapes)), check_optimize(optimize, len(shapes)))
    return ["einsum_path", *(positions for positions, _, _ in steps)]


def _abstract(*avals: Aval, inputs, output) -> tuple[Aval]:
    dtypes = {a.dtype for a in avals}
    if len(dtypes) > 1:
        raise DTypeMismatch("einsum", "operands of one dtype", sorted(map(str, dtypes)))
    sizes = {c: n for sub, a in zip(inputs, avals) for c, n in zip(sub, a.shape)}
    return (Aval(tuple(sizes[c] for c in output), avals[0].dtype),)


def _impl(*arrays, inputs, output):
    return (plan(inputs, output, tuple(a.shape for a in arrays))(*arrays),)


def _specialized(shapes, inputs, output):
    """The kernel for these shapes, planned once (a replay's, tenferro_py.replay)."""
    planned_kernel = plan(inputs, output, shapes)
    return lambda *arrays: (planned_kernel(*arrays),)


_impl.specialized = _specialized


def _jvp(s, tangents, primals, outputs, inputs, output):
    """One einsum per tangent, in place of its operand."""
    spec = ",".join(inputs) + "->" + output
    total = None
    for i, t in enumerate(tangents):
        if t is not None:
            total = s.accumulate(total, s.einsum(list(primals[:i]) + [t] + list(primals[i + 1 :]), spec))
    return (total,)


def _structured(s, *operands, inputs, output):
    """Factored matrices as their two factors; blocks inside zeros restrict the indices they cover."""
    fresh = _fresh_symbols(set("".join(inputs) + output))
    ops, subs = [], []
    for x, sub in zip(operands, inputs):
        if type(x) is Product and len(set(sub)) == 2:
            inner = next(fresh)
            ops += [x.left, x.right]
            subs += [sub[0] + inner, inner + sub[1]]
        elif type(x) is Embedded and x.contiguous and len(set(sub)) == len(sub):
            ops.append(x)
            subs.append(sub)
        else:
            ops.append(dense(s, x))
            subs.append(sub)
    size = {c: n for x, sub in zip(ops, subs) for c, n in zip(sub, x.shape)}
    ranges = {c: (0, n) for c, n in size.items()}
    for x, sub in zip(ops, subs):
        if type(x) is Embedded:
            for c, (lo, hi) in zip(sub, x.box()):
                ranges[c] = (max(lo, ranges[c][0]), max(max(lo, ranges[c][0]), min(hi, ranges[c][1])))
    restricted = []
    for x, sub in zip(ops, subs):
        starts = x.starts if type(x) is Embedded else (0,) * len(sub)
        x = x.block if type(x) is Embedded else x
        lo = [ranges[c][0] - st for c, st in zip(sub, starts)]
        hi = [ranges[c][1] - st for c, st in zip(sub, starts)]
        if lo != [0] * len(sub) or hi != list(x.shape):
            x = s.slice(x, SliceConfig(lo, hi))
        restricted.append(x)
    result = s.einsum(restricted, ",".join(subs) + "->" + output)
    return (embedded(result, tuple(size[c] for c in output), tuple(ranges[c] for c in output)),)


def operand_cotangent(s, ct, primals, inputs, output, i):
    """Cotangent of operand ``i``: contract ct with the (conjugated) others, then broadcast and diagonalize."""
    target = inputs[i]
    unique = "".join(dict.fromkeys(target))
    others = [(cj(s, x), sub) for j, (x, sub) in enumerate(zip(primals, inputs)) if j != i] + [(ct, output)]
    available = set("".join(sub for _, sub in others))
    present = "".join(c for c in unique if c in available)
    g = s.einsum([x for x, _ in others], ",".join(sub for _, sub in others) + "->" + present)
    if present != unique:
        size = dict(zip(target, primals[i].shape))
        g = s.broadcast_in_dim(g, [size[c] for c in unique], [unique.index(c) for c in present])
    if unique != target:
        # Repeated index (trace): g sits on the diagonal, g[x] * delta(x, x').
        fresh = _fresh_symbols(target)
        out, deltas = "", []
        for pos, c in enumerate(target):
            if c in target[:pos]:
                c2 = next(fresh)
                deltas.append((c + c2, primals[i].shape[pos]))
                out += c2
            else:
                out += c
        eyes = [s.constant_from(Tensor.adopt(np.eye(n, dtype=ct.dtype))) for _, n in deltas]
        g = s.einsum([g, *eyes], ",".join([unique] + [d for d, _ in deltas]) + "->" + out)
    return g


def _vjp(s, cotangents, primals, outputs, needs, inputs, output):
    """Each needed operand's cotangent; an operand that repeats another (the same tensor under the same
    subscripts, as in a norm x·x) has the same one, computed once."""
    (ct,) = cotangents
    if len(primals) == 2 and all(needs) and not (primals[0] is primals[1] and inputs[0] == inputs[1]):
        order = contraction.cotangent_order(inputs, output, (primals[0].shape, primals[1].shape))
        if order is not None:  # one copy of ct that both contractions read in place
            ct, output = s.einsum([ct], f"{output}->{order}"), order
    found: dict = {}
    result = []
    for i, need in enumerate(needs):
        if not need:
            result.append(None)
            continue
        twin = (primals[i], inputs[i])
        for (x, sub), g in found.items():
            if x is twin[0] and sub == twin[1]:
                result.append(g)
                break
        else:
            found[twin] = operand_cotangent(s, ct, primals, inputs, output, i)
            result.append(found[twin])
    return tuple(result)


def _cost(in_avals, out_avals, params) -> float:
    """Multiply-adds of a direct contraction: the product of every index's size."""
    sizes = {c: n for sub, a in zip(params["inputs"], in_avals) for c, n in zip(sub, a.shape)}
    return float(math.prod(sizes.values()))


einsum_p = _RULES.define("einsum", _abstract, _impl, _jvp, _vjp, cost=_cost, structured=_structured)
