"""The eager tape: tensors, recorded nodes, the reverse sweep and the forward trace.

Every op with a tracked input records one :class:`Node` holding its primitive, parameters,
input tensors and output values (the residuals its rules reuse). Nodes point only
backwards, to their inputs, so a graph lives exactly as long as some tensor refers to it:
Python's reference counting frees a tape nobody holds, with no cycle for the garbage
collector. Node ids grow with creation, so sorting by id is a topological order.

Reverse mode is :func:`reverse_sweep`: cotangents pulled from outputs back through the
recorded nodes by their VJP rules. Forward mode is one mechanism, :class:`ForwardTrace`:
tangents pushed op by op through the ops' JVP rules, either by replaying recorded nodes
(the jvp of a recorded graph) or as a session runs its ops (the jvp of a pullback, taken
while the pullback runs).

The tape knows nothing of particular ops. It calls rules through the interface of
:mod:`tenferro_py.rules`, asks the session it is given to sum two cotangents
(``s.accumulate``), and makes structured values dense (:func:`tenferro_py.structure.dense`)
for rules that do not take them.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, Hashable, Iterable, Protocol, Sequence

import numpy as np

from .engine import Pending, resolve
from .errors import InvalidArgument
from .structure import dense
from .tensor import Aval, Tensor

_ids = itertools.count()


class Owner(Protocol):
    """What a tensor needs of its runtime: the stateful reverse sweep."""

    def accumulate_grads(self, out: "EagerTensor", seed: Any, engine: Any) -> None:
        """Add the pullback of out with seed into the grad slots of its reachable variables."""

    @property
    def recorder(self) -> Any:
        """What writes down the runtime's kernels (a :class:`~tenferro_py.replay.Recorder`), or None."""


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

    def __init__(self, prim: Any, params: dict, inputs: tuple, values: tuple, avals: tuple):
        self.id = next(_ids)
        self.prim = prim
        self.params = params
        self.inputs = inputs
        self.values = values
        self.avals = avals


class EagerTensor:
    """A value in one :class:`~tenferro_py.EagerRuntime`: tracked or constant.

    Tracked tensors are variables (made by ``variable_from``) or results of ops with a
    tracked input; constants carry no derivative. ``runtime``, ``aval`` (``shape``, ``dtype``,
    ``ndim``) and ``payload`` (the array, or on a wide engine its kernel's Pending output)
    are read-only by convention: an op makes a new tensor, it never changes one.
    """

    __slots__ = ("runtime", "payload", "aval", "shape", "dtype", "ndim", "_node", "_index")

    def __init__(self, rt: Owner, value: "np.ndarray | Pending", aval: Aval, node: Leaf | Node | None = None,
                 index: int = 0):
        self.runtime = rt
        self.payload = value
        self.aval = aval
        self.shape = aval.shape
        self.dtype = aval.dtype
        self.ndim = len(aval.shape)
        self._node = node
        self._index = index

    @property
    def is_tracked(self) -> bool:
        """True for variables and results that depend on one."""
        return self._node is not None

    @property
    def is_leaf(self) -> bool:
        """True for variables (tracked tensors with a grad slot)."""
        return isinstance(self._node, Leaf)

    def value(self) -> Tensor:
        """The host value (shares the immutable buffer); waits for its kernel if needed. While a
        program is recorded, a read into Python leaves it unreplayable (see ``runtime.observe``)."""
        recorder = self.runtime.recorder
        if recorder is not None:
            recorder.taint("a value read into Python")
        return Tensor.adopt(resolve(self.payload))

    def to_tensor(self, engine: Any) -> Tensor:
        """The host value (tenferro's ``to_tensor(&mut eng)``): a Tensor, immutable like a copy, that
        shares the buffer no kernel ever writes to instead of copying it."""
        return self.value()

    def item(self) -> float:
        """The value of a one-element tensor as a Python number."""
        return self.value().item()

    def grad(self) -> Tensor | None:
        """The grad slot of a variable; None when empty (or for a non-leaf)."""
        if isinstance(self._node, Leaf) and self._node.grad is not None:
            return Tensor.adopt(self._node.grad)
        return None

    def clear_grad(self) -> None:
        """Empty this variable's grad slot."""
        if isinstance(self._node, Leaf):
            self._node.grad = None

    def backward(self, engine: Any = None) -> None:
        """Accumulate d(self)/d(leaf) into every reachable variable's slot; self must be a scalar."""
        self.runtime.accumulate_grads(self, None, engine)

    def backward_with(self, seed: "Tensor | EagerTensor", engine: Any = None) -> None:
        """Accumulate the VJP of ``seed`` (self's shape and dtype) into reachable variables' slots."""
        self.runtime.accumulate_grads(self, seed, engine)

    def __repr__(self) -> str:
        kind = "variable" if self.is_leaf else "tracked" if self.is_tracked else "constant"
        return f"EagerTensor({kind}, shape={list(self.shape)}, dtype={self.dtype})"


def op_outputs(rt: Owner, prim: Any, params: dict, inputs: tuple, values: tuple, avals: tuple,
               record: bool) -> tuple[EagerTensor, ...]:
    """An op's outputs as tensors of ``rt``: tracked, with a node on the tape, when ``record`` and
    an input is tracked; else constants."""
    node = None
    if record:
        for x in inputs:
            if x._node is not None:
                node = Node(prim, params, inputs, values, avals)
                break
    if len(values) == 1:
        return (EagerTensor(rt, values[0], avals[0], node),)
    return tuple([EagerTensor(rt, v, a, node, i) for i, (v, a) in enumerate(zip(values, avals))])


def output_tensors(rt: Owner, node: Node) -> tuple[EagerTensor, ...]:
    """The outputs of a recorded node, as tracked tensors (the rules' view of residuals)."""
    return tuple(EagerTensor(rt, v, a, node, i) for i, (v, a) in enumerate(zip(node.values, node.avals)))


def tensor_key(x: EagerTensor) -> Hashable:
    """What identifies a tensor to the sweeps: a tracked one's node (or leaf) and output index; a
    constant itself (a key that keeps it alive, so its identity is not reused)."""
    return (x._node, x._index) if x._node is not None else x


def ancestors(roots: Iterable[EagerTensor]) -> list[Node]:
    """Recorded nodes that the roots depend on, in topological order."""
    seen: dict[int, Node] = {}
    todo = list(roots)
    while todo:
        node = todo.pop()._node
        if type(node) is Node and node.id not in seen:
            seen[node.id] = node
            todo.extend(node.inputs)
    return [seen[i] for i in sorted(seen)]


def reaching(keys: Iterable[Hashable], nodes: Sequence[Node], outs: Sequence[EagerTensor]) -> set:
    """Those of ``keys`` that some of ``outs`` depends on (``nodes``: the outputs' ancestors)."""
    wanted = set(keys)
    found = {tensor_key(o) for o in outs} & wanted
    for node in nodes:
        found.update(k for k in map(tensor_key, node.inputs) if k in wanted)
    return found


def reverse_sweep(s: Any, rules: Any, roots: Sequence[tuple[EagerTensor, Any]],
                  wrt: Sequence[EagerTensor] | None) -> tuple[dict, set]:
    """Propagate cotangents from (output, cotangent) pairs back to ``wrt``.

    With ``wrt`` None, every reachable variable is a target. A target may be an
    intermediate, even one downstream of another target: its cotangent is all that flows
    into it. Returns the cotangent per reached target key (absent means a symbolic zero;
    it may be structured) and the set of target keys that reach some root.
    """
    targets = None if wrt is None else {tensor_key(w) for w in wrt if w._node is not None}

    def is_target(x: EagerTensor) -> bool:
        if targets is None:
            return type(x._node) is Leaf
        return x._node is not None and tensor_key(x) in targets

    nodes = ancestors(out for out, _ in roots)
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
        cts[tensor_key(out)] = s.accumulate(cts.get(tensor_key(out)), ct)
    for node in reversed(nodes):
        if node.id not in live:
            continue
        keys = [(node, i) for i in range(len(node.values))]
        out_cts = [cts.get(k) if k in met else cts.pop(k, None) for k in keys]
        if all(c is None for c in out_cts):
            continue
        rule = rules.rule(node.prim, "vjp")
        if rule.dense_only:
            out_cts = [dense(s, c) for c in out_cts]
        needs = tuple(is_target(x) or (type(x._node) is Node and x._node.id in live) for x in node.inputs)
        in_cts = rule.vjp(s, out_cts, node.inputs, output_tensors(s.runtime, node), needs, **node.params)
        for x, need, ct in zip(node.inputs, needs, in_cts):
            if need and ct is not None:
                key = tensor_key(x)
                cts[key] = s.accumulate(cts.get(key), ct)
    return {k: cts[k] for k in met if k in cts}, met


class TangentMemo:
    """The tangents one jvp computed, kept for later jvps along the same seeds.

    Forward over reverse differentiates a step's pullback, whose ops read the step's forward
    values: their tangents are what the step's own jvp already computed. Given to a first
    jvp (``memo=``), a memo keeps the tangent of every tensor between that jvp's seeds and its
    output; a later jvp given it takes those tangents instead of recomputing them. The later
    jvp must have every seed of the first with the same tangent; its other seeds must be newer
    than the memo's tensors (else their tangents could differ), which is checked.
    """

    __slots__ = ("_seeds", "_tangents", "_nodes")

    def __init__(self) -> None:
        self._seeds: dict | None = None  # seed key -> the tangent's value (array or Pending)
        self._tangents: dict = {}
        self._nodes: set[Node] = set()

    @property
    def filled(self) -> bool:
        """True once a jvp has filled it."""
        return self._seeds is not None

    def check(self, op: str, seeds: Sequence[tuple[EagerTensor, EagerTensor]]) -> None:
        """InvalidArgument unless a filled memo holds for a jvp along ``seeds``."""
        given = {tensor_key(w): t.payload for w, t in seeds}
        if self._seeds is not None and any(given.get(key) is not value for key, value in self._seeds.items()):
            raise InvalidArgument(
                op, "a memo filled along seeds that this jvp also has, with the same tangents", "other seeds"
            )

    def fill(self, seeds: Sequence[tuple[EagerTensor, EagerTensor]], trace: "ForwardTrace", nodes: Sequence[Node]) -> None:
        """Keep ``trace``'s tangents of the tensors of ``nodes``: the jvp along ``seeds`` that filled it."""
        self._seeds = {tensor_key(w): t.payload for w, t in seeds}
        self._tangents = dict(trace._tangents)
        self._nodes = set(nodes)


class ForwardTrace:
    """The tangents of one forward-mode derivative, by tensor: the library's one forward mechanism.

    :meth:`push` takes one op, with its inputs and outputs, and sets its outputs' tangents from
    its inputs' by the op's JVP rule, whose ops are emitted into the session given. Two
    drivers push ops: :meth:`replay` pushes recorded nodes (the jvp of a recorded graph), and
    a runtime with this trace active pushes every op its sessions run, as they run it (the
    jvp of a pullback taken while the pullback runs; see ``EagerRuntime.vjp_jvp``). Tangents
    may be structured values (the SVD's factored dU); they are kept as they are.

    A ``memo`` filled earlier lends its tangents of tensors older than every seed of this
    trace that it does not have.
    """

    __slots__ = ("_rules", "_tangents", "_memo", "_lend_below")

    def __init__(self, rules: Any, memo: TangentMemo | None = None, seeded: Sequence[EagerTensor] = ()):
        """An empty trace; ``seeded``: the tensors to be seeded (a memo lends only what is older than those it lacks)."""
        self._rules = rules
        self._tangents: dict = {}
        self._memo = memo if memo is not None and memo.filled else None
        self._lend_below = math.inf
        if self._memo is not None:
            known = self._memo._seeds or {}
            self._lend_below = min((w._node.id for w in seeded if w._node is not None and tensor_key(w) not in known),
                                   default=math.inf)

    def _lent(self, node: Any) -> bool:
        return self._memo is not None and node in self._memo._nodes and node.id < self._lend_below

    def tangent(self, x: EagerTensor) -> Any:
        """x's tangent: an EagerTensor, a structured value, or None for zero."""
        key = tensor_key(x)
        found = self._tangents.get(key)
        if found is None and self._memo is not None and self._lent(x._node):
            found = self._memo._tangents.get(key)
        return found

    def alias(self, new: EagerTensor, old: EagerTensor) -> None:
        """``new`` holds ``old``'s value (a fresh leaf made from it): it has ``old``'s tangent too."""
        found = self.tangent(old)
        if found is not None:
            self._tangents[tensor_key(new)] = found

    def seed(self, s: Any, x: EagerTensor, tangent: Any) -> None:
        """Add ``tangent`` to x's tangent."""
        key = tensor_key(x)
        self._tangents[key] = s.accumulate(self._tangents.get(key), tangent)

    def push(self, s: Any, prim: Any, params: dict, inputs: Sequence[EagerTensor], outputs: Sequence[EagerTensor]) -> None:
        """The tangents of one op's outputs from those of its inputs, by its JVP rule (emitted into ``s``)."""
        tangents = [self.tangent(x) for x in inputs]
        if all(t is None for t in tangents):
            return
        rule = self._rules.rule(prim, "jvp")
        if rule.dense_only:
            tangents = [dense(s, t) for t in tangents]
        for o, t in zip(outputs, rule.jvp(s, tangents, tuple(inputs), tuple(outputs), **params)):
            if t is not None:
                self.seed(s, o, t)

    def replay(self, s: Any, nodes: Sequence[Node]) -> None:
        """Push recorded nodes, in their (topological) order; those a memo lends are skipped."""
        for node in nodes:
            if not self._lent(node):
                self.push(s, node.prim, node.params, node.inputs, output_tensors(s.runtime, node))
