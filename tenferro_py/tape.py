"""The eager tape: tensors, recorded nodes, and the reverse and forward sweeps.

Every op with a tracked input records one :class:`Node` holding its primitive,
parameters, input tensors and output values (the residuals its rules reuse).
Nodes point only backwards, to their inputs, so a graph lives exactly as long
as some tensor refers to it: Python's reference counting frees a tape nobody
holds, with no cycle for the garbage collector. Node ids grow with creation,
so sorting by id is a topological order.

The tape knows nothing of particular ops: it calls rules through the
interface of :mod:`tenferro_py.rules`.
"""

from __future__ import annotations

import functools
import itertools
import math
from typing import TYPE_CHECKING, Any, Container, Iterable, NamedTuple, Sequence

import numpy as np

from .engine import Pending, resolve
from .errors import InvalidArgument, Unsupported
from .tensor import Aval, Tensor

if TYPE_CHECKING:
    from .engine import CpuEngine
    from .rules import Primitive, RuleSet
    from .runtime import EagerRuntime
    from .session import EagerSession

_ids = itertools.count()


class Leaf:
    """A tracked leaf (a variable): the origin of derivatives, owner of a grad slot."""

    __slots__ = ("id", "shape", "dtype", "grad", "__weakref__")

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype) -> None:
        self.id = next(_ids)
        self.shape = shape
        self.dtype = dtype
        self.grad: np.ndarray | None = None


class Node:
    """One recorded op: primitive, parameters, inputs and output values."""

    __slots__ = ("id", "prim", "params", "inputs", "values", "avals", "__weakref__")

    def __init__(self, prim: "Primitive", params: dict, inputs: tuple, values: tuple, avals: tuple):
        self.id = next(_ids)
        self.prim = prim
        self.params = params
        self.inputs = inputs
        self.values = values
        self.avals = avals


class EagerTensor:
    """A value in one :class:`~tenferro_py.EagerRuntime`: tracked or constant.

    Tracked tensors are variables (made by ``variable_from``) or results of ops
    with a tracked input; constants carry no derivative.
    """

    __slots__ = ("_rt", "_value", "_aval", "_node", "_index")

    def __init__(
        self,
        rt: "EagerRuntime",
        value: "np.ndarray | Pending",
        aval: Aval,
        node: Leaf | Node | None = None,
        index: int = 0,
    ):
        self._rt = rt
        self._value = value  # the array, or its kernel's Pending output on a wide engine
        self._aval = aval
        self._node = node
        self._index = index

    @property
    def shape(self) -> tuple[int, ...]:
        return self._aval.shape

    @property
    def dtype(self) -> np.dtype:
        return self._aval.dtype

    @property
    def ndim(self) -> int:
        return len(self._aval.shape)

    @property
    def aval(self) -> Aval:
        return self._aval

    @property
    def runtime(self) -> "EagerRuntime":
        return self._rt

    @property
    def is_tracked(self) -> bool:
        """True for variables and results that depend on one."""
        return self._node is not None

    @property
    def is_leaf(self) -> bool:
        """True for variables (tracked tensors with a grad slot)."""
        return isinstance(self._node, Leaf)

    def value(self) -> Tensor:
        """The host value (shares the immutable buffer); waits for its kernel if needed."""
        return Tensor(resolve(self._value))

    def to_tensor(self, engine: "CpuEngine") -> Tensor:
        """A host copy of the value (tenferro's ``to_tensor(&mut eng)``)."""
        return Tensor(np.array(resolve(self._value)))

    def item(self) -> float:
        """The value of a one-element tensor as a Python number."""
        return self.value().item()

    def grad(self) -> Tensor | None:
        """The grad slot of a variable; None when empty (or for a non-leaf)."""
        if isinstance(self._node, Leaf) and self._node.grad is not None:
            return Tensor(self._node.grad)
        return None

    def clear_grad(self) -> None:
        """Empty this variable's grad slot."""
        if isinstance(self._node, Leaf):
            self._node.grad = None

    def backward(self, engine: "CpuEngine | None" = None) -> None:
        """Accumulate d(self)/d(leaf) into every reachable variable's slot; self must be a scalar."""
        self._rt._backward(self, None, engine)

    def backward_with(self, seed: "Tensor | EagerTensor", engine: "CpuEngine | None" = None) -> None:
        """Accumulate the VJP of ``seed`` (self's shape and dtype) into reachable variables' slots."""
        self._rt._backward(self, seed, engine)

    def __repr__(self) -> str:
        kind = "variable" if self.is_leaf else "tracked" if self.is_tracked else "constant"
        return f"EagerTensor({kind}, shape={list(self.shape)}, dtype={self.dtype})"


def output_tensors(rt: "EagerRuntime", node: Node) -> tuple[EagerTensor, ...]:
    """The outputs of a recorded node, as tracked tensors (the rules' view of residuals)."""
    return tuple(EagerTensor(rt, v, a, node, i) for i, (v, a) in enumerate(zip(node.values, node.avals)))


class Embedded(NamedTuple):
    """A cotangent that is zero except for ``block`` at ``starts`` (stride ``strides``).

    A slice's VJP returns one, so that rules which know this structure (the
    SVD's) skip the zeros; other rules see it made dense.
    """

    block: EagerTensor
    shape: tuple[int, ...]
    starts: tuple[int, ...]
    strides: tuple[int, ...]


class Product(NamedTuple):
    """A matrix tangent kept as the product ``left @ right``, not multiplied out.

    The SVD's JVP gives dU = U·J and dVᴴ = J'·Vᴴ so: what reads them (the SVD's own
    VJP, under forward-over-reverse) mostly contracts them to thin matrices, which
    then costs O(m K k) instead of the O(m K²) of forming them. Rules that know
    this structure (einsum, slice, transpose, conj) carry it; others get it multiplied out.
    """

    left: EagerTensor
    right: EagerTensor


def tensor_key(x: EagerTensor) -> tuple[Any, int]:
    """What identifies a tracked tensor on the tape: its node (or leaf) and output index."""
    return (x._node, x._index)


def _ancestors(roots: Iterable[EagerTensor]) -> list[Node]:
    """Recorded nodes that the roots depend on, in topological order."""
    seen: dict[int, Node] = {}
    todo = list(roots)
    while todo:
        node = todo.pop()._node
        if type(node) is Node and node.id not in seen:
            seen[node.id] = node
            todo.extend(node.inputs)
    return [seen[i] for i in sorted(seen)]


def densify(s: "EagerSession", x: "EagerTensor | Embedded | Product") -> EagerTensor:
    """An Embedded cotangent or a Product tangent as an ordinary tensor."""
    if isinstance(x, Embedded):
        return s.pad(x.block, x.shape, x.starts, x.strides)
    if isinstance(x, Product):
        return s.einsum([x.left, x.right], "ij,jk->ik")
    return x


def accumulate(s: "EagerSession", a: Any, b: Any) -> Any:
    """Sum of two tangents or cotangents, keeping symbolic zeros and like Embedded blocks sparse."""
    if a is None:
        return b
    if b is None:
        return a
    if type(a) is Embedded and type(b) is Embedded and a[1:] == b[1:] and a.block.shape == b.block.shape:
        return Embedded(s.add(a.block, b.block), a.shape, a.starts, a.strides)
    return s.add(densify(s, a), densify(s, b))


def rule_for(rules: "RuleSet", prim: "Primitive", transform: str) -> Any:
    """The rules of ``prim``, or Unsupported naming it and the transform that needed them."""
    rule = rules.get(prim.name)
    if rule is None:
        raise Unsupported(transform, f"an AD rule for {prim.name!r} in the runtime's AdContext", "none")
    return rule


def reverse_sweep(
    s: "EagerSession",
    rules: "RuleSet",
    roots: Sequence[tuple[EagerTensor, EagerTensor]],
    wrt: Sequence[EagerTensor] | None,
) -> tuple[dict, set]:
    """Propagate cotangents from (output, cotangent) pairs back to ``wrt``.

    With ``wrt`` None, every reachable variable is a target. A target may be an
    intermediate, even one downstream of another target: its cotangent is all
    that flows into it. Returns the cotangent per reached target key (absent
    means a symbolic zero) and the set of target keys that reach some root.
    """
    targets = None if wrt is None else {tensor_key(w) for w in wrt if w._node is not None}

    def is_target(x: EagerTensor) -> bool:
        if targets is None:
            return type(x._node) is Leaf
        return x._node is not None and tensor_key(x) in targets

    nodes = _ancestors(out for out, _ in roots)
    # Only nodes downstream of a target carry cotangents worth computing.
    live: set[int] = set()
    met = {tensor_key(out) for out, _ in roots if is_target(out)}
    for node in nodes:
        for x in node.inputs:
            if is_target(x):
                met.add(tensor_key(x))
                live.add(node.id)
            elif type(x._node) is Node and x._node.id in live:
                live.add(node.id)
    cts: dict = {}
    for out, ct in roots:
        cts[tensor_key(out)] = accumulate(s, cts.get(tensor_key(out)), ct)
    for node in reversed(nodes):
        if node.id not in live:
            continue
        keys = [(node, i) for i in range(len(node.values))]
        out_cts = [cts.get(k) if k in met else cts.pop(k, None) for k in keys]
        if all(c is None for c in out_cts):
            continue
        rule = rule_for(rules, node.prim, "vjp")
        if not rule.embedded_cotangents:
            out_cts = [None if c is None else densify(s, c) for c in out_cts]
        needs = tuple(is_target(x) or (type(x._node) is Node and x._node.id in live) for x in node.inputs)
        in_cts = rule.vjp(s, out_cts, node.inputs, output_tensors(s.runtime, node), needs, **node.params)
        for x, need, ct in zip(node.inputs, needs, in_cts):
            if need and ct is not None:
                key = tensor_key(x)
                cts[key] = accumulate(s, cts.get(key), ct)
    return {k: cts[k] for k in met if k in cts}, met


@functools.lru_cache(maxsize=1024)
def whole_box(shape: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    """The box of a whole tensor (one object per shape, so that hulls with it are cheap)."""
    return tuple((0, n) for n in shape)


def _hull(a: tuple | None, b: tuple) -> tuple:
    """The smallest box holding boxes a and b."""
    if a is None or a is b:
        return b
    return tuple((min(lo, lo2), max(hi, hi2)) for (lo, hi), (lo2, hi2) in zip(a, b))


def _demanded(rules: "RuleSet", nodes: list[Node], outs: Sequence[EagerTensor], lent: Container[Node]) -> dict:
    """Which box of each tensor the outputs' tangents depend on (absent: none of it).

    Nodes whose tangents are ``lent`` (by a memo) need none of their inputs.
    """
    extents = {tensor_key(o): whole_box(o.shape) for o in outs}
    for node in reversed(nodes):
        if node in lent:
            continue
        out_ext = [extents.get((node, i)) for i in range(len(node.values))]
        if all(e is None for e in out_ext):
            continue
        rule = rules.get(node.prim.name)
        if rule is not None and rule.demand is not None:
            in_ext = tuple(rule.demand(out_ext, node.inputs, **node.params))
        else:
            in_ext = tuple(whole_box(x.shape) for x in node.inputs)
        for x, e in zip(node.inputs, in_ext):
            if e is not None and x._node is not None:
                extents[tensor_key(x)] = _hull(extents.get(tensor_key(x)), e)
    return extents


class TangentMemo:
    """The tangents one jvp computed, kept for later jvps along the same seeds.

    Forward over reverse differentiates a step's recorded pullback, whose ops read
    the step's forward values: their tangents are what the step's own jvp already
    computed. Given to a first jvp (``memo=``), a memo is filled with the whole
    tangent of every tensor between that jvp's seeds and its output; a later jvp
    given it takes those tangents instead of recomputing them. It must have every
    seed of the first with the same tangent; its other seeds must be newer than
    the memo's tensors (else their tangents could differ), which is checked.
    """

    __slots__ = ("_seeds", "_tangents")

    def __init__(self) -> None:
        self._seeds: dict | None = None  # seed key -> the tangent's value (array or Pending)
        self._tangents: dict[Node, tuple] = {}

    @property
    def filled(self) -> bool:
        """True once a jvp has filled it."""
        return self._seeds is not None

    def _fill(self, seeds: Sequence[tuple[EagerTensor, EagerTensor]], tans: dict, visited: list[Node]) -> None:
        self._seeds = {tensor_key(w): t._value for w, t in seeds}
        self._tangents = {node: tuple(tans.get((node, i)) for i in range(len(node.values))) for node in visited}

    def check(self, op: str, seeds: Sequence[tuple[EagerTensor, EagerTensor]]) -> None:
        """InvalidArgument unless a filled memo holds for a jvp along ``seeds``."""
        given = {tensor_key(w): t._value for w, t in seeds}
        if self._seeds is not None and any(given.get(key) is not value for key, value in self._seeds.items()):
            raise InvalidArgument(
                op, "a memo filled along seeds that this jvp also has, with the same tangents", "other seeds"
            )

    def _valid_below(self, seeds: Sequence[tuple[EagerTensor, EagerTensor]]) -> float:
        """The node id below which the stored tangents hold for ``seeds`` (checked): the oldest new seed's."""
        assert self._seeds is not None
        return min((tensor_key(w)[0].id for w, _ in seeds if tensor_key(w) not in self._seeds), default=math.inf)


def forward_sweep(
    s: "EagerSession",
    rules: "RuleSet",
    outs: Sequence[EagerTensor],
    seeds: Sequence[tuple[EagerTensor, EagerTensor]],
    memo: TangentMemo | None = None,
) -> tuple[list, set]:
    """Push tangents from (input, tangent) pairs forward to ``outs``.

    Returns the tangent of each output (None for a symbolic zero) and the set of
    seed keys that reach some output; see :func:`push_tangents`.
    """
    tans, met = push_tangents(s, rules, outs, seeds, memo)
    results = [tans.get(tensor_key(o)) for o in outs]
    return [None if t is None else densify(s, t) for t in results], met


def call_jvp(s: "EagerSession", rule: Any, tangents: Sequence, primals: Sequence, outputs: Sequence,
             extents: Sequence, params: dict) -> tuple:
    """One op's output tangents by its JVP rule, told the demanded extents if it asks for them."""
    if rule.jvp_extents:
        return rule.jvp(s, tangents, primals, outputs, extents, **params)
    return rule.jvp(s, tangents, primals, outputs, **params)


def push_tangents(
    s: "EagerSession",
    rules: "RuleSet",
    outs: Sequence[EagerTensor],
    seeds: Sequence[tuple[EagerTensor, EagerTensor]],
    memo: TangentMemo | None = None,
    whole: bool = False,
) -> tuple[dict, set]:
    """The tangents of the tensors between ``seeds`` and ``outs``, by tensor key (absent: zero).

    Seeds of one tensor add up, and a seeded intermediate also receives what
    flows into it from seeded ancestors (the transpose of :func:`reverse_sweep`).
    Only what the outputs depend on is computed: unused outputs get no
    tangent, and rules that can (the SVD's) compute only the demanded box,
    unless ``whole``. An empty ``memo`` is filled with the whole tangent of
    every tensor on the way; a filled one supplies the tangents it holds (see
    :class:`TangentMemo`). Tangents that are a :class:`Product` are multiplied
    out once, for the first rule that does not take them as they are. Also
    returns the set of seed keys that reach some output.
    """
    tans: dict = {}
    for w, seed in seeds:
        tans[tensor_key(w)] = accumulate(s, tans.get(tensor_key(w)), seed)
    nodes = _ancestors(outs)
    filling = memo is not None and not memo.filled
    lent: dict[Node, tuple] = {}
    if memo is not None and memo.filled:
        valid_below = memo._valid_below(seeds)
        lent = {node: t for node, t in memo._tangents.items() if node.id < valid_below}
    whole = whole or filling
    extents = {} if whole else _demanded(rules, nodes, outs, lent)
    met = {tensor_key(o) for o in outs if tensor_key(o) in tans}
    for node in nodes:
        if node in lent:
            for i, t in enumerate(lent[node]):
                if t is not None:
                    tans[(node, i)] = t
            met.update(tensor_key(x) for x in node.inputs if tensor_key(x) in tans)
            continue
        out_ext: list[tuple | None]
        if whole:
            out_ext = [whole_box(a.shape) for a in node.avals]
        else:
            out_ext = [extents.get((node, i)) for i in range(len(node.values))]
        if all(e is None for e in out_ext):
            continue
        in_tans: list[Any] = [tans.get(tensor_key(x)) for x in node.inputs]
        if all(t is None for t in in_tans):
            continue
        rule = rule_for(rules, node.prim, "jvp")
        for i, (x, t) in enumerate(zip(node.inputs, in_tans)):
            if t is not None:
                met.add(tensor_key(x))
                if type(t) is Product and not rule.factored_tangents:
                    in_tans[i] = tans[tensor_key(x)] = densify(s, t)
        out_tans = call_jvp(s, rule, in_tans, node.inputs, output_tensors(s.runtime, node), out_ext, node.params)
        for i, t in enumerate(out_tans):
            if t is not None and out_ext[i] is not None:
                tans[(node, i)] = accumulate(s, tans.get((node, i)), t)
    if memo is not None and filling:
        memo._fill(seeds, tans, nodes)
    return tans, met
