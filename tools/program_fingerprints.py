"""Write every family's programs as text, to show that a change to the builders left them as
they were.

usage: python tools/program_fingerprints.py OUT_DIR [--seeds N] [--peer DIR] [--family NAME]
       python tools/program_fingerprints.py --compare OLD_DIR NEW_DIR

The first form builds, through the family protocol only (``Family.build_program``), the
program of every kind the family builds for

* every shipped instance (``instances/*.json``),
* ``--seeds`` random instances per family (``Family.random_instance``),
* two instances of 40 layers of each of the families' scale cases (``Family.scale_cases``),
* the peer benchmark's layer graphs and its smallest operator graph (``--peer``, the
  ``dnn-partitioning`` folder; the maxload family's format),

(``--family``: of that family only), each also under the family's other problems and each
value of its instance options (maxload's contiguity rule), under every objective the
family has, with no start plan and with the family's start plan, and writes one file per program: its variables
(name, type, bounds), rows (coefficients in order, sense, right-hand side, kind, name),
objective and constant for a ``LinearProgram``, the model's protobuf text for a CP-SAT
model, the program's hint, encoded start, stated units, tolerances and stats, and the
decoded hint as plan JSON; then each exact backend's ``--export-model`` file of it
(``milp-highs``: LP, ``cpsat``: protobuf text). The second form compares two such folders
file by file and exits 1 on any difference.

Run it with ``PYTHONHASHSEED=0`` both times, so that any set iteration is the same in both.
To compare a branch with the commit it started from (about 4 minutes and 1.2 GB per run
with the peer files; ``--family NAME`` for one family's part), from the repository root::

    root=$PWD
    git worktree add /tmp/fp-base BASE_COMMIT      # the code before the change
    cp tools/program_fingerprints.py /tmp/fp-base/tools/
    (cd /tmp/fp-base && PYTHONHASHSEED=0 PYTHONPATH=$PWD python tools/program_fingerprints.py \
        /tmp/fp-old --peer $root/../shared/peer-instances/dnn-partitioning)
    PYTHONHASHSEED=0 PYTHONPATH=$PWD python tools/program_fingerprints.py /tmp/fp-new
    python tools/program_fingerprints.py --compare /tmp/fp-old /tmp/fp-new
    git worktree remove /tmp/fp-base

(the tool of the new commit runs on the old code: it reaches the programs only through
the family protocol, and reads the instances of the folder it is in). ``--peer`` defaults
to ``../shared/peer-instances/dnn-partitioning`` next to the repository root; where it is
missing the peer instances are left out.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def linear_text(lp) -> list[str]:
    out = [f"var {i} {v.name!r} binary={v.binary} lb={v.lb!r} ub={v.ub!r} implied_integer={v.implied_integer} "
           f"unit={v.unit!r}" for i, v in enumerate(lp.variables)]
    out += [f"row {i} {r.name!r} {r.kind} optional={r.optional} {r.sense} {r.rhs!r} : "
            + " ".join(f"{k}:{c!r}" for k, c in r.coeffs.items()) for i, r in enumerate(lp.rows)]
    out.append("objective " + " ".join(f"{k}:{c!r}" for k, c in lp.objective.items()))
    out.append(f"objective_constant {lp.objective_constant!r}")
    return out


def program_text(fam, inst, program, start) -> str:
    out = [f"kind {program.kind}", f"unit_ms {program.unit_ms!r}", f"offset_ms {program.offset_ms!r}",
           f"tolerance_ms {program.tolerance_ms!r}", f"bound_tolerance_ms {program.bound_tolerance_ms!r}",
           f"presolve {program.presolve}", f"stats {json.dumps(program.stats, sort_keys=True, default=repr)}",
           f"hint {None if program.hint is None else [repr(x) for x in program.hint]}"]
    if program.encode is not None and start is not None:
        out.append(f"encoded start {[repr(x) for x in program.encode(start)]}")
    if program.hint is not None:
        plan = program.decode(program.hint)
        out.append("decoded hint " + (json.dumps(fam.plan_to_dict(inst, plan), sort_keys=True) if plan is not None
                                      else "None"))
    if program.kind == "linear":
        out += linear_text(program.model)
    else:
        out.append(str(program.model.Proto()))
    return "\n".join(out) + "\n"


def exports(program) -> dict[str, str]:
    """Each exact backend's ``--export-model`` text of ``program``."""
    from splitopt.backends.registry import get_backend

    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for backend, suffix in (("milp-highs", "lp"), ("cpsat", "txt")):
            if program.kind != "linear" and backend != "cpsat":
                continue
            path = Path(tmp) / f"model.{suffix}"
            try:
                get_backend(backend).export(program, path)
                out[f"{backend}.{suffix}"] = path.read_text()
            except Exception as e:  # a program this backend does not take (the error is the fingerprint)
                out[f"{backend}.{suffix}"] = f"{type(e).__name__}: {e}\n"

    return out


def cases(seeds: int, peer: Path | None, only: str | None = None):
    """(label, instance) for every instance named in the module docstring (of family
    ``only`` alone where it is given)."""
    from splitopt.api import load_instance
    from splitopt.families.registry import family_of, families

    for path in sorted((ROOT / "instances").glob("*.json")):
        inst = load_instance(path)
        if only is None or family_of(inst).name == only:
            yield f"shipped-{path.stem}", inst
    for fam in families():
        if only is not None and fam.name != only:
            continue
        for seed in range(seeds):
            yield f"random-{fam.name}-s{seed}", fam.random_instance(seed)
        for case in fam.scale_cases():
            for seed in range(2):
                yield f"scale-{case.stem}-s{seed}", fam.instance_from_data(case.make(40, seed))
    if peer is not None and only in (None, "maxload"):
        files = sorted(peer.glob("*-inputs/LayerGraphs/*.json")) + sorted(peer.glob("*-inputs/OperatorGraphs/bert_l-3_*.json"))
        for path in files:
            yield f"peer-{path.parent.parent.name}-{path.parent.name}-{path.stem}", load_instance(path)


def variants(fam, inst):
    """(label, instance): ``inst`` under each of its family's other problems (a splitopt
    instance) and each value of the family's instance options (``Family.instance_options``)."""
    yield "", inst
    if fam.core_instance:
        for problem in fam.problems:
            if problem != inst.problem:
                yield f"-{problem}", inst.with_settings(problem=problem)
    for name, values in fam.instance_options.items():
        for value in values:
            yield f"-{name}-{value}", fam.with_option(inst, name, value, name)


def write(out: Path, seeds: int, peer: Path | None, only: str | None = None) -> None:
    from splitopt.families.registry import family_of

    out.mkdir(parents=True, exist_ok=True)
    count = 0
    for label, base in cases(seeds, peer, only):
        fam = family_of(base)
        for variant, inst in variants(fam, base):
            count += write_programs(out, f"{label}{variant}", fam, inst)
        print(f"{label}: done", flush=True)
    print(f"programs written: {count}")


def write_programs(out: Path, label: str, fam, base) -> int:
    """Write every program of ``base`` under every objective; how many."""
    from splitopt.core.errors import NotApplicable

    count = 0
    for objective in fam.objectives:
        try:
            inst = base if objective == base.objective else fam.with_objective(base, objective)
        except Exception as e:  # an objective this instance does not take
            (out / f"{label}-{objective}.skipped").write_text(f"{type(e).__name__}: {e}\n")
            continue
        start = fam.start_plan(inst)
        for kind in fam.program_kinds:
            for with_start in (False, True):
                if with_start and start is None:
                    continue
                name = f"{label}-{objective}-{kind}-{'start' if with_start else 'nostart'}"
                try:
                    program = fam.build_program(inst, kind, start if with_start else None)
                except NotApplicable as e:  # a program this instance has none of (the refusal is the fingerprint)
                    (out / f"{name}.refused").write_text(f"{e}\n")
                    continue
                (out / f"{name}.program").write_text(program_text(fam, inst, program, start))
                for suffix, text in exports(program).items():
                    (out / f"{name}.{suffix}").write_text(text)
                count += 1
    return count


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def compare(old: Path, new: Path) -> int:
    """Every file of ``new`` against the file of that name in ``old`` (``old`` may hold more:
    a run of one family against a run of all)."""
    b = {p.name: p for p in new.iterdir()}
    a = {p.name: p for p in old.iterdir() if p.name in b or not b}
    only_old, only_new = sorted(set(a) - set(b)), sorted(set(b) - set(a))
    differ = sorted(n for n in set(a) & set(b) if digest(a[n]) != digest(b[n]))
    for n in only_old:
        print(f"only in {old}: {n}")
    for n in only_new:
        print(f"only in {new}: {n}")
    for n in differ:
        print(f"differs: {n}")
    print(f"files compared: {len(set(a) & set(b))}, identical: {len(set(a) & set(b)) - len(differ)}, "
          f"differ: {len(differ)}, missing: {len(only_old) + len(only_new)}")
    return 1 if differ or only_old or only_new else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", nargs="?", type=Path)
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--peer", type=Path, default=ROOT.parent / "shared" / "peer-instances" / "dnn-partitioning")
    parser.add_argument("--family", help="only this family's instances")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("OLD", "NEW"))
    args = parser.parse_args()
    if args.compare:
        return compare(*args.compare)
    if args.out is None:
        parser.error("give OUT_DIR or --compare OLD NEW")
    write(args.out, args.seeds, args.peer if args.peer.is_dir() else None, args.family)
    return 0


if __name__ == "__main__":
    sys.exit(main())
