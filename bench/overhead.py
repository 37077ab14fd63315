#!/usr/bin/env python3
"""Side-by-side cost of the profiler: runs bench/alloc_pairs raw and under `gpumemtrace run` with each backend
(and CUPTI and the driver hooks without stacks, and CUPTI with its runtime-API callbacks forced on), interleaved,
several rounds, and prints the median ns per pair of each case, its spread, and the ratio to raw. Device timings
move by tens of percent between runs, so only interleaved medians are compared.

Usage: bench/overhead.py BUILD_DIR [rounds=5] [--simulate] [--with-sanitizer]
                         [--variants NAMES] [--env-variant LABEL=BASE:KEY=VALUE ...] [--baseline OTHER_BUILD_DIR]

Variants (one column each; raw always runs, first):
  on a GPU:        cupti, hooks, runtime, "cupti, no stacks", "hooks, no stacks", "cupti, runtime callbacks"
                   (GMT_CUPTI_RUNTIME_CALLBACKS=1), and compute-sanitizer with --with-sanitizer; only when named
                   in --variants: "hooks, verify" (run --verify: the hooks count and CUPTI records every event too,
                   the cost of the cross-check; no "before:" column, since older builds have no --verify)
  with --simulate: runtime, "runtime, no stacks" (the simulated runtime has no driver: only the runtime hooks
                   apply)

  --with-sanitizer   also `compute-sanitizer --leak-check full` (the peer; slow), on a GPU only
  --variants NAMES   run only these variants (and raw), in this order; comma-separated, and a name may hold
                     ", " itself: --variants hooks,"hooks, no stacks",cupti. Naming compute-sanitizer runs it
                     without --with-sanitizer. An unknown name is an error (exit 2).
  --env-variant LABEL=BASE:KEY=VALUE
                     (repeatable) adds the variant LABEL: BASE's command (a variant above, or an earlier
                     --env-variant) run with KEY=VALUE in its environment, e.g.
                     --env-variant "hooks, libunwind=hooks:GMT_UNWIND=libunwind". It always runs; with
                     --variants it takes the place its label has there, else it comes after the others.
  --baseline OTHER_BUILD_DIR
                     also runs each profiled variant (those --variants names, else all but raw and
                     compute-sanitizer) under OTHER_BUILD_DIR/bin/gpumemtrace as the column "before: NAME",
                     next to it in the same rounds. The bench binary is BUILD_DIR's in both, so only the
                     profiler differs; a last table gives each variant's median over its "before:" median.

Examples:
  bench/overhead.py /tmp/build 5 --with-sanitizer
  bench/overhead.py /tmp/build 5 --variants hooks,"hooks, no stacks",cupti --baseline /tmp/build-main
  bench/overhead.py /tmp/build 1 --simulate --baseline /tmp/build-main
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile


class Variant:
    """How to run one column: command(cli, trace) -> argv; raw_env: runs with the bench's own environment (the
    simulated runtime on its library path), not under gpumemtrace; profiled: runs under `gpumemtrace run`
    (so --baseline gives it a "before:" column)."""

    def __init__(self, command, raw_env=False, profiled=True):
        self.command = command
        self.raw_env = raw_env
        self.profiled = profiled


def run_once(command, env=None):
    out = subprocess.run(command, capture_output=True, text=True, check=True, env=env).stdout
    return {m.group(1): float(m.group(2)) for m in re.finditer(r"^(.*): ([0-9.]+) ns$", out, re.M)}


def builtin_variants(bench, simulate):
    """name -> Variant for every built-in column, in table order, and the names not available in this mode
    (name -> why)."""
    sim = ["--simulate"] if simulate else []

    def profiled(*options):
        return Variant(lambda cli, trace: [cli, "run", "-q", "--no-symbolize", *options, *sim, "-o", trace, "--",
                                           bench])

    gpu = {}
    for backend in ("cupti", "hooks", "runtime"):
        gpu[backend] = profiled("--backend", backend)
    gpu["cupti, no stacks"] = profiled("--backend", "cupti", "--no-stacks")
    gpu["hooks, no stacks"] = profiled("--backend", "hooks", "--no-stacks")
    # CUPTI's runtime-API callbacks kept on throughout (the behaviour before cupti/runtime_naming.h), to
    # see what switching them off saves in the same interleaved run.
    cupti = gpu["cupti"].command
    gpu["cupti, runtime callbacks"] = Variant(
        lambda cli, trace: ["env", "GMT_CUPTI_RUNTIME_CALLBACKS=1", *cupti(cli, trace)])
    verify = profiled("--backend", "hooks", "--verify").command
    gpu["hooks, verify"] = Variant(verify, profiled=False)
    sanitizer = shutil.which("compute-sanitizer") or "/usr/local/cuda/bin/compute-sanitizer"
    gpu["compute-sanitizer"] = Variant(lambda cli, trace: [sanitizer, "--leak-check", "full", bench],
                                       raw_env=True, profiled=False)

    variants = {"raw": Variant(lambda cli, trace: [bench], raw_env=True, profiled=False)}
    if simulate:  # the simulated runtime has no driver: only the runtime hooks apply
        variants["runtime"] = profiled()
        variants["runtime, no stacks"] = profiled("--no-stacks")
        unavailable = {name: "not available with --simulate (only the runtime hooks apply)" for name in gpu
                       if name not in variants}
    else:
        variants.update(gpu)
        unavailable = {}
    return variants, unavailable


# Built-in variants that run only when --variants names them.
ONLY_WHEN_NAMED = {"hooks, verify"}


def split_names(text, known):
    """Comma-separated names, where a known name may itself hold commas ("hooks, no stacks"): at each
    position, the longest run of comma-separated pieces that forms a known name is taken, else one piece."""
    pieces = text.split(",")
    names = []
    i = 0
    while i < len(pieces):
        for j in range(len(pieces), i, -1):
            candidate = ",".join(pieces[i:j]).strip()
            if candidate in known:
                names.append(candidate)
                i = j
                break
        else:
            if pieces[i].strip():
                names.append(pieces[i].strip())
            i += 1
    return names


def quoted(names):
    return ", ".join(f"'{name}'" for name in names)


ENV_VARIANT = re.compile(r"^(?P<label>.+?)=(?P<base>[^=:]+):(?P<key>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>.*)$",
                         re.S)


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="bench/overhead.py", description=__doc__.split("\n\n")[0],
        epilog="\n\n".join(__doc__.split("\n\n")[2:]), formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("build", metavar="BUILD_DIR", help="build whose bench/alloc_pairs and bin/gpumemtrace run")
    parser.add_argument("rounds", nargs="?", type=int, default=5, help="interleaved rounds (default: 5)")
    parser.add_argument("--simulate", action="store_true", help="simulated CUDA runtime (no GPU needed)")
    parser.add_argument("--with-sanitizer", action="store_true",
                        help="also compute-sanitizer --leak-check full (on a GPU only)")
    parser.add_argument("--variants", action="append", metavar="NAMES",
                        help="comma-separated variants to run (raw always runs); repeatable")
    parser.add_argument("--env-variant", action="append", default=[], metavar="LABEL=BASE:KEY=VALUE",
                        help="adds LABEL: variant BASE run with KEY=VALUE in its environment; repeatable")
    parser.add_argument("--baseline", metavar="OTHER_BUILD_DIR",
                        help='also each profiled variant under OTHER_BUILD_DIR/bin/gpumemtrace, as "before: NAME"')
    # Intermixed, so that `BUILD --simulate 3` reads 3 as the rounds as `BUILD 3 --simulate` does.
    args = parser.parse_intermixed_args(argv)
    if args.rounds < 1:
        parser.error(f"rounds must be at least 1, not {args.rounds}")
    return parser, args


def plan(parser, args, bench):
    """The columns to run, in table order: name -> (Variant, "new" or "before")."""
    builtin, unavailable = builtin_variants(bench, args.simulate)

    # --env-variant: BASE is a built-in (of this mode) or an earlier --env-variant.
    env_variants = {}
    for spec in args.env_variant:
        match = ENV_VARIANT.match(spec)
        if not match:
            parser.error(f"--env-variant {spec!r}: expected LABEL=BASE_VARIANT:ENVKEY=ENVVALUE, "
                         "e.g. \"hooks, libunwind=hooks:GMT_UNWIND=libunwind\"")
        label, base, key, value = (match.group("label").strip(), match.group("base").strip(), match.group("key"),
                                   match.group("value"))
        if label in builtin or label in unavailable or label in env_variants:
            parser.error(f"--env-variant {spec!r}: the label '{label}' is already a variant's name")
        if label.startswith("before: "):
            parser.error(f"--env-variant {spec!r}: a label may not start with 'before: '")
        known = {**builtin, **env_variants}
        if base in unavailable:
            parser.error(f"--env-variant {spec!r}: the base variant '{base}' is {unavailable[base]}")
        if base not in known:
            parser.error(f"--env-variant {spec!r}: unknown base variant '{base}'; known: {quoted(known)}")
        base_variant = known[base]
        env_variants[label] = Variant(
            lambda cli, trace, base_command=base_variant.command, assignment=f"{key}={value}":
            ["env", assignment, *base_command(cli, trace)],
            raw_env=base_variant.raw_env, profiled=base_variant.profiled)

    known = {**builtin, **env_variants}
    if args.variants:
        names = [name for text in args.variants for name in split_names(text, set(known) | set(unavailable))]
        for name in names:
            if name in unavailable:
                parser.error(f"--variants: '{name}' is {unavailable[name]}")
            if name not in known:
                parser.error(f"--variants: unknown variant '{name}'; known: {quoted(known)}")
        names = list(dict.fromkeys(["raw", *names]))  # raw first, each once
        names += [label for label in env_variants if label not in names]
        with_baseline = set(names)
    else:
        names = [name for name in builtin if (name != "compute-sanitizer" or args.with_sanitizer)
                 and name not in ONLY_WHEN_NAMED]
        names += list(env_variants)
        with_baseline = set(names)

    columns = {}
    for name in names:
        columns[name] = (known[name], "new")
        if args.baseline and known[name].profiled and name in with_baseline:
            columns[f"before: {name}"] = (known[name], "before")
    return columns


def main(argv=None):
    parser, args = parse_args(sys.argv[1:] if argv is None else argv)
    build = args.build
    bench = os.path.join(build, "bench", "alloc_pairs")
    cli = os.path.join(build, "bin", "gpumemtrace")
    for path in (bench, cli):
        if not os.access(path, os.X_OK):
            parser.error(f"{path} is not there (or not executable): is {build} a build directory?")
    clis = {"new": cli}
    if args.baseline:
        clis["before"] = os.path.join(args.baseline, "bin", "gpumemtrace")
        if not os.access(clis["before"], os.X_OK):
            parser.error(f"--baseline: {clis['before']} is not there (or not executable)")
    columns = plan(parser, args, bench)

    env = dict(os.environ)
    if args.simulate:
        env["LD_LIBRARY_PATH"] = os.path.join(build, "lib", "gpumemtrace", "sim")
        env["GMT_SIM_QUIET"] = "1"
    samples = {name: {} for name in columns}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for index, (name, (variant, which)) in enumerate(columns.items()):
                trace = os.path.join(tmp, f"round{r}-variant{index}.db")
                command = variant.command(clis[which], trace)
                try:
                    results = run_once(command, env=env if variant.raw_env else None)
                except subprocess.CalledProcessError as error:
                    sys.stderr.write(f"overhead.py: '{name}' failed (exit {error.returncode}) in round {r + 1}: "
                                     f"{' '.join(command)}\n{(error.stderr or '')[-4000:]}\n")
                    return 1
                for case, ns in results.items():
                    samples[name].setdefault(case, []).append(ns)

    width = max([26] + [len(name) for name in columns])
    cases = list(samples["raw"])
    case_width = max([38] + [len(case) for case in cases])
    print(f"{'case':{case_width}} " + " ".join(f"{name:>{width}}" for name in columns))
    for case in cases:
        raw = statistics.median(samples["raw"][case])
        cells = []
        for name in columns:
            values = samples[name].get(case)
            if not values:
                cells.append("-")
                continue
            median = statistics.median(values)
            spread = (max(values) - min(values)) / median * 100 if median else 0
            ratio = median / raw if raw else 0
            cells.append(f"{median:8.0f} ns ±{spread:3.0f}% {ratio:5.2f}x")
        print(f"{case:{case_width}} " + " ".join(f"{c:>{width}}" for c in cells))
    print(f"(median of {args.rounds} interleaved rounds; ±: (max-min)/median; x: ratio to raw)")

    pairs = [name for name in columns if f"before: {name}" in columns]
    if pairs:
        print()
        print(f"{'case (median / before: median)':{case_width}} " + " ".join(f"{name:>{width}}" for name in pairs))
        for case in cases:
            cells = []
            for name in pairs:
                now, before = samples[name].get(case), samples[f"before: {name}"].get(case)
                if not now or not before or not statistics.median(before):
                    cells.append("-")
                else:
                    cells.append(f"{statistics.median(now) / statistics.median(before):5.2f}x")
            print(f"{case:{case_width}} " + " ".join(f"{c:>{width}}" for c in cells))
        print(f"(BUILD_DIR's gpumemtrace over {args.baseline}'s, same bench binary; below 1: cheaper now)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
