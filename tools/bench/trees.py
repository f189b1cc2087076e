"""A benchmark's baseline: another commit's mmlog unpacked beside this tree, and a function run on either.

A case runs in a fresh interpreter whose `mmlog` is the tree's (PYTHONPATH: the tree, then this
repository for `tools`), started in an empty directory so that the working directory puts no
other mmlog first; the child says which mmlog it imported, and a case that ran the wrong code is
an error, not a figure.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def export_tree(ref: str, into: Path) -> tuple[Path, str]:
    """The mmlog package of `ref` (a git ref of this repository), unpacked in `into`; and its commit."""
    commit = subprocess.run(["git", "rev-parse", "--short", ref], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout.strip()
    archive = subprocess.run(["git", "archive", commit, "mmlog"], cwd=ROOT, capture_output=True, check=True).stdout
    tree = into / f"baseline-{commit}"
    tree.mkdir()
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(tree, filter="data")
    return tree, commit


def head() -> str:
    """This tree's commit, short."""
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                          text=True).stdout.strip()


def in_turn(baseline: str | None, rounds: int, into: Path) -> tuple[dict, list]:
    """A baseline's tree (exported into `into`) and this one, to run in turn: the labels {"before": "before:
    <commit>", "after": "after: <commit>"} ("before" only with a baseline) and the (round, case, tree) of
    `rounds` rounds, the order swapped every round (so neither tree always runs first)."""
    labels = {"after": f"after: {head()}"}
    trees = [("after", None)]
    if baseline:
        tree, commit = export_tree(baseline, into)
        labels["before"] = f"before: {commit}"
        trees.insert(0, ("before", tree))
    return labels, [(r, case, tree) for r in range(rounds) for case, tree in (trees if r % 2 == 0 else trees[::-1])]


@contextlib.contextmanager
def taking_turns(baseline: str | None, rounds: int, prefix: str):
    """`in_turn` with the baseline's tree exported into a temporary directory (named from `prefix`) that
    lives as long as the `with` block which runs the cases."""
    with tempfile.TemporaryDirectory(prefix=prefix) as scratch:
        yield in_turn(baseline, rounds, Path(scratch))


def spread(values: list[float], fmt: str) -> str:
    """A table cell for one case's rounds: "median (min–max)", each in `fmt`."""
    return f"{statistics.median(values):{fmt}} ({min(values):{fmt}}–{max(values):{fmt}})"


def run_in(tree: Path | None, module: str, call: str):
    """`module.call` (e.g. ``child(1000, 6)``) in a fresh interpreter on `tree`'s mmlog (None: this tree's);
    its result, which must be JSON."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(str(p) for p in (tree, ROOT) if p is not None))
    code = f"import json, mmlog, {module} as m; print(mmlog.__file__); print(json.dumps(m.{call}))"
    with tempfile.TemporaryDirectory(prefix="bench-case-") as cwd:
        out = subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"the {tree or 'current'} case failed:\n{out.stderr[-3000:]}")
    where, result = out.stdout.strip().splitlines()[-2:]
    if tree is not None and not where.startswith(str(tree)):
        raise RuntimeError(f"the baseline case imported {where}, not {tree}")
    return json.loads(result)
