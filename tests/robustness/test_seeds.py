"""Named seed streams: stable, distinct, validated."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tokenbook.seeds import as_seed_sequence, derive_seed, rng, seed_list


def test_streams_are_stable_and_distinct():
    assert derive_seed(0, "boot") == derive_seed(0, "boot")
    seeds = {derive_seed(r, s) for r in range(20) for s in ("boot", "train", "world")}
    assert len(seeds) == 60                       # no collisions among 60 streams
    assert derive_seed(0, "a", 1) != derive_seed(0, "a", 2)
    assert 0 <= derive_seed(123, "x") < 2 ** 31 - 1


def test_streams_do_not_depend_on_the_process():
    code = "from tokenbook.seeds import derive_seed; print(derive_seed(7, 'boot', 'lang'))"
    out = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={"PYTHONHASHSEED": h}).stdout for h in ("1", "2")}
    assert out == {f"{derive_seed(7, 'boot', 'lang')}\n"}


def test_bad_roots_and_lists():
    with pytest.raises(TypeError):
        derive_seed(1.5, "x")
    with pytest.raises(ValueError):
        derive_seed(-1, "x")
    with pytest.raises(ValueError):
        derive_seed(1)
    with pytest.raises(ValueError):
        seed_list(0)
    with pytest.raises(ValueError, match="repeats"):
        as_seed_sequence([1, 1])
    assert as_seed_sequence(3) == [0, 1, 2] and as_seed_sequence([4, 2]) == [4, 2]
    assert rng(0, "x").integers(1000) == rng(0, "x").integers(1000)


LIBRARY = Path(__file__).resolve().parents[2] / "lib" / "tokenbook"


def _seed_name(node: ast.AST) -> bool:
    """``seed``, ``root_seed``, ``art.seed``, ``int(seed)``: an expression naming a seed."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args:
        return node.func.id == "int" and _seed_name(node.args[0])
    name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", "")
    return "seed" in name.lower()


def seed_arithmetic(source: str) -> list[str]:
    """Every ``seed + 1``, ``seed * 1000 + i``, ``seed % 2**32`` … in ``source``: a derived seed
    made by arithmetic instead of :func:`derive_seed`."""
    hits = [node for node in ast.walk(ast.parse(source)) if isinstance(node, ast.BinOp)
            and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Mod, ast.BitXor))
            and (_seed_name(node.left) or _seed_name(node.right))]
    return [f"line {node.lineno}: {ast.unparse(node)}"
            for node in sorted(hits, key=lambda n: (n.lineno, n.col_offset))]


def test_the_library_derives_every_seed_one_way():
    """One seed derivation (issue #32): no module makes a seed by arithmetic on another, where
    neighbouring roots' streams collide (root 1's ``seed + 1`` is root 2's ``seed``)."""
    found = {str(p.relative_to(LIBRARY)): hits for p in sorted(LIBRARY.rglob("*.py"))
             if (hits := seed_arithmetic(p.read_text()))}
    assert not found, f"seed arithmetic; use tokenbook.seeds.derive_seed: {found}"


def test_the_seed_arithmetic_scan_finds_what_it_refuses():
    planted = ("a = seed + 1\nb = seed * 1000 + i\nc = f(seed=art.seed % 7)\n"
               "d = int(root_seed) * 3\nok = derive_seed(seed, 'x', i) + n_steps\n")
    assert [h.split(":")[0] for h in seed_arithmetic(planted)] == [
        "line 1", "line 2", "line 3", "line 4"]
