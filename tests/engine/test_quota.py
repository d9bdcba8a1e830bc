"""The quota tree: min/max semantics of missing keys, ancestors, accounting, and tree rules."""

from __future__ import annotations

from scheduler.engine.quota import QuotaTree, effective_min, tree_problems
from scheduler.engine.reasons import MaxReached, QuotaFull
from scheduler.engine.resources import fits, within_max
from scheduler.engine.types import CPU, Node, Quota

A100 = "gpu:A100"


def test_missing_key_is_zero_in_min_and_uncapped_in_max():
    assert not fits({CPU: 1}, {A100: 8})
    assert fits({A100: 8}, {A100: 8, CPU: 4})
    assert within_max({CPU: 10**9}, {}, {A100: 8})
    assert not within_max({A100: 9}, {}, {A100: 8})


def _tree():
    return QuotaTree(
        [
            Quota("root", None),
            Quota("dept", "root", {A100: 8}, max={A100: 12}),
            Quota("team-a", "dept", {A100: 4}),
            Quota("team-b", "dept", {A100: 4}),
        ],
        [Node("n1", "A100", 8, 0, 0), Node("n2", "A100", 8, 0, 0)],
    )


def test_root_without_min_is_guaranteed_the_pool():
    tree = _tree()
    assert tree.get("root").min == {A100: 16}
    assert effective_min(Quota("root", None, {A100: 4}), []) == {A100: 4}


def test_fit_checks_every_ancestor_and_reports_the_first_short_one():
    tree = _tree()
    tree.charge("team-a", {A100: 4}, in_quota=True)
    tree.charge("dept", {A100: 2}, in_quota=True)
    assert tree.min_shortfall("team-b", {A100: 2}) is None
    assert tree.min_shortfall("team-b", {A100: 3}) == QuotaFull("dept", A100, 3, 2, 8)
    assert str(tree.min_shortfall("team-b", {A100: 3})) == "quota dept full: needs 3 A100, 2 left of 8"


def test_max_counts_everything_the_subtree_uses():
    tree = _tree()
    tree.charge("team-a", {A100: 10}, in_quota=False)  # borrowing: counts for max, not for min
    assert tree.min_shortfall("team-b", {A100: 4}) is None
    assert tree.max_shortfall("team-b", {A100: 4}) == MaxReached("dept", A100, 4, 2, 12)
    tree.release("team-a", {A100: 10})
    assert tree.shortfall("team-b", {A100: 4}) is None


def test_promotion_moves_use_into_the_guarantee():
    tree = _tree()
    tree.charge("team-a", {A100: 4}, in_quota=False)
    tree.promote("team-a", {A100: 4})
    assert tree.get("dept").inq == {A100: 4} and tree.get("dept").used == {A100: 4}


def test_tree_problems():
    nodes = [Node("n1", "A100", 8, 0, 0)]
    assert tree_problems([Quota("root", None), Quota("a", "root", {A100: 8})], nodes) == []
    problems = tree_problems(
        [
            Quota("root", None),
            Quota("a", "root", {A100: 6}),
            Quota("b", "root", {A100: 6}, max={A100: 4}),
            Quota("c", "nope"),
            Quota("d", "root", pool="lingjun"),
        ],
        nodes,
    )
    assert ("c", "parent", "unknown quota 'nope'") in problems
    assert ("b", "min", "min 6 A100 is over max 4 A100") in problems
    assert any(name == "d" and field == "resource_type" for name, field, _ in problems)
    assert any(field == "min" and "children of root" in message for _, field, message in problems)


def test_a_starvation_hold_takes_only_the_free_guarantee_and_gives_it_back():
    tree = _tree()
    tree.charge("team-a", {A100: 1}, in_quota=True)
    assert tree.could_fit("team-a", {A100: 4}) and not tree.could_fit("team-a", {A100: 5})
    tree.holders = {"g1": ("team-a", {A100: 4})}
    tree.hold_for("s1")  # not a holder: nothing happens
    assert tree.get("team-a").room == {A100: 3}
    tree.hold_for("g1")  # 3 of team-a's 4 are free: the hold never goes below zero
    tree.hold_for("g1")  # once per cycle
    assert tree.holding == {"g1": ("team-a", {A100: 3})}
    assert tree.get("team-a").room == {A100: 0} and tree.get("dept").room == {A100: 4}  # team-b's 4 stay whole
    assert tree.min_shortfall("team-b", {A100: 4}) is None
    assert str(tree.min_shortfall("team-a", {A100: 1})) == (
        "quota team-a full: needs 1 A100, 0 left of 4 (3 kept for earlier jobs that have waited too long)")
    assert tree.get("team-a").used == {A100: 1}  # a hold uses nothing: max is not touched
    tree.end_holds()
    assert tree.holding == {} and tree.get("team-a").room == {A100: 3} and tree.get("dept").room == {A100: 7}
    assert str(tree.min_shortfall("team-a", {A100: 4})) == "quota team-a full: needs 4 A100, 3 left of 4"
