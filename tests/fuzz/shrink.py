"""Shrinking a failing generated definition (issue 37): drop UNION ALL branches, output
columns, WHERE/ON/HAVING conjuncts and joined tables while it still fails, then keep the small
one as a regression case (tests/fuzz/regressions.json, run by the generated-views test).

Works on the parsed SQL (sqlglot, Spark dialect); ``fails`` decides (on Spark: build it, run the
DML rounds, compare), so every candidate costs a check: the steps try the big cuts first.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import sqlglot
from sqlglot import exp

from tests.fuzz.generator import Definition

REGRESSIONS = Path(__file__).with_name("regressions.json")


def shrink(definition: Definition, fails: Callable[[Definition], bool], budget: int = 200) -> Definition:
    """The smallest definition reached from ``definition`` by single cuts that all still fail
    (``fails`` is called at most ``budget`` times)."""
    current, tries = definition, 0
    progress = True
    while progress and tries < budget:
        progress = False
        for candidate in _cuts(current):
            tries += 1
            if fails(candidate):
                current, progress = candidate, True
                break
            if tries >= budget:
                break
    return current


def _cuts(definition: Definition) -> Iterator[Definition]:
    """Definitions one cut smaller than ``definition``, the biggest cuts first."""
    tree = _parse(definition.template)
    branches = _branches(tree)
    if len(branches) > 1:
        for index in range(len(branches)):
            kept = [b for i, b in enumerate(branches) if i != index]
            yield _with(definition, _union(kept))
    for index, branch in enumerate(branches):
        for smaller in _branch_cuts(branch):
            yield _with(definition, _union([smaller if i == index else b for i, b in enumerate(branches)]))


def _branch_cuts(select: exp.Select) -> Iterator[exp.Select]:
    joins = select.args.get("joins") or []
    for index in reversed(range(len(joins))):  # a joined table no other clause reads
        alias = joins[index].this.alias_or_name
        others = select.copy()
        others.args["joins"].pop(index)
        if alias not in {c.table for c in others.find_all(exp.Column)}:
            yield others
    outputs = select.expressions
    if len(outputs) > 1:
        for index in range(len(outputs)):
            smaller = select.copy()
            removed = smaller.expressions.pop(index)
            group = smaller.args.get("group")
            if group is not None:  # a group key goes from GROUP BY too (a key not selected is refused)
                group.set("expressions", [e for e in group.expressions if e != removed.unalias()])
                if not group.expressions:
                    continue  # a global aggregate would be another view; keep the key
            yield smaller
    for clause in ("where", "having"):
        condition = select.args.get(clause)
        if condition is None:
            continue
        conjuncts = list(condition.this.flatten()) if isinstance(condition.this, exp.And) else [condition.this]
        for index in range(len(conjuncts)):
            smaller = select.copy()
            kept = [c.copy() for i, c in enumerate(conjuncts) if i != index]
            smaller.set(clause, None if not kept else exp.Where(this=exp.and_(*kept)) if clause == "where"
                        else exp.Having(this=exp.and_(*kept)))
            yield smaller
    for index, join in enumerate(joins):  # an ON condition's filters, its equality kept
        on = join.args.get("on")
        if isinstance(on, exp.And):
            conjuncts = list(on.flatten())
            for cut in range(1, len(conjuncts)):
                smaller = select.copy()
                smaller.args["joins"][index].set("on", exp.and_(*[c.copy() for i, c in enumerate(conjuncts) if i != cut]))
                yield smaller


def _parse(template: str) -> exp.Expression:
    return sqlglot.parse_one(template.replace("{", "__t_").replace("}", "__"), read="spark")


def _branches(tree: exp.Expression) -> list[exp.Select]:
    if isinstance(tree, exp.Union):
        return _branches(tree.left) + _branches(tree.right)
    return [tree]


def _union(branches: list[exp.Select]) -> exp.Expression:
    tree = branches[0].copy()
    for branch in branches[1:]:
        tree = exp.Union(this=tree, expression=branch.copy(), distinct=False)
    return tree


def _with(definition: Definition, tree: exp.Expression) -> Definition:
    sql = tree.sql(dialect="spark")
    template = _untemplate(sql)
    return Definition(definition.name, template, definition.refused, definition.features)


def _untemplate(sql: str) -> str:
    """The rendered tree's table placeholders back as ``{name}``."""
    out, rest = [], sql
    while "__t_" in rest:
        head, _, tail = rest.partition("__t_")
        name, _, rest = tail.partition("__")
        out.append(f"{head}{{{name}}}")
    return "".join(out) + rest


def regressions() -> list[Definition]:
    """The shrunk failing definitions kept as regression cases."""
    if not REGRESSIONS.exists():
        return []
    return [Definition(case["name"], case["template"], None, tuple(case.get("features", ())))
            for case in json.loads(REGRESSIONS.read_text())]


def keep_regression(definition: Definition, found: str) -> None:
    """Add a shrunk definition to the regression cases (``found``: the seed and what failed)."""
    cases = json.loads(REGRESSIONS.read_text()) if REGRESSIONS.exists() else []
    cases.append({"name": f"r{len(cases) + 1:03d}", "template": definition.template,
                  "features": list(definition.features), "found": found})
    REGRESSIONS.write_text(json.dumps(cases, indent=2) + "\n")
