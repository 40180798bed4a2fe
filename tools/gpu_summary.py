"""Issue 35's tables from one run of ``bash tools/gpu_step_check.sh device``: the folder it wrote
(gpu_out, unpacked from its gpu_out.tar.gz, with new/, base/, candidates/<name>/, parts/,
f32-highest/ and autotune-0/, each a gpu_results.json of ``run_hlo.py``), as the Markdown that
benchmarks/GPU.md takes (``tools/docs_tables.py``'s ``gpu`` section, from docs/results/gpu-h200).

    python tools/gpu_summary.py gpu_out > gpu_tables.md

* The current step: each method's median ms per iteration, its ratio to softmax's, its compile
  time and its largest difference from TensorFlow's own step, against the issue's targets
  (lsm / softmax ≤ 1.0 at the two large sizes, ≤ 1.3 at the two small ones; compile ≤ 2×).
* The base revision and each candidate against the current step.
* float32 with TF32 off (``operand_precision=highest`` on every product) against float32 as
  exported by default.
* The large sizes compiled without XLA's autotuning, against the same modules autotuned.
* The parts of the closed-form step (``tools/step_parts.py``), timed on their own.

A module the run skipped (its time limit) or failed is shown as such, and one missing at a size
that others have as "not run".
"""

import argparse
import json
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

LARGE = [(4096, 500, 10, 64), (4096, 1000, 10, 784)]
SMALL = [(200, 100, 6, 36), (1000, 200, 10, 64)]
ORDER = SMALL + LARGE
METHODS = ["lsm", "lsm-negative-multinomial", "softmax"]
# Methods whose step draws random numbers: jaxlib's draws are not TensorFlow's, so there is no
# reference to compare with.
RANDOM = {"softmax"}


def load(folder: Path) -> Dict[Tuple[str, Tuple[int, ...], str], dict]:
    """(method, size, dtype) -> the module's result, from ``folder``/gpu_results.json."""
    path = folder / "gpu_results.json"
    return _indexed(json.loads(path.read_text())["results"]) if path.exists() else {}


def _indexed(results: List[dict]) -> Dict[Tuple[str, Tuple[int, ...], str], dict]:
    """(method, size, dtype) -> result, for one run's list of module results."""
    # From the key: older manifests (the base's) record a parameter's name as the method.
    return {parse_key(result["key"]): result for result in results}


def parse_key(key: str) -> Tuple[str, Tuple[int, ...], str]:
    """``lsm_B200_M100_C6_D36_float64`` -> ("lsm", (200, 100, 6, 36), "float64")."""
    head, dtype = key.rsplit("_", 1)
    parts = head.split("_")
    size = tuple(int(p[1:]) for p in parts[-4:])
    return "_".join(parts[:-4]), size, dtype


def median(result: Optional[dict]) -> Optional[float]:
    return None if not result or "median_ms" not in result else result["median_ms"]


def cell(result: Optional[dict], field: str = "median_ms", digits: int = 2) -> str:
    if result is None:
        return "not run"
    if "skipped" in result:
        return "skipped (time)"
    if "error" in result:
        return "error"
    value = result.get(field)
    return "–" if value is None else f"{value:.{digits}f}"


def ratio(numerator: Optional[float], denominator: Optional[float]) -> str:
    return "–" if numerator is None or not denominator else f"{numerator / denominator:.2f}"


def error_cell(result: Optional[dict], method: str) -> str:
    if method in RANDOM:
        return "random"
    value = (result or {}).get("max_rel_err_vs_tf")
    text = "–" if value is None else f"{value:.0e}"
    if (
        result
        and "median_ms" in result
        and not (result.get("finite") and result.get("finite_after"))
    ):
        text += " NON-FINITE"
    return text


def short(dtype: str) -> str:
    return "f" + dtype[len("float") :]


def size_text(size: Sequence[int]) -> str:
    return "({}, {}, {}, {})".format(*size)


def sizes_of(table: Dict) -> List[Tuple[int, ...]]:
    found = {key[1] for key in table}
    return sorted(found, key=lambda s: (ORDER.index(s) if s in ORDER else len(ORDER), s))


def verdict(size: Tuple[int, ...], value: Optional[float], compile_ratio: Optional[float]) -> str:
    target = 1.0 if size in LARGE else 1.3 if size in SMALL else None
    if target is None or value is None:
        return "–"
    met = value <= target and (compile_ratio is None or compile_ratio <= 2.0)
    return ("met" if met else "missed") + f" (≤ {target}, compile ≤ 2)"


def current_step(new: Dict) -> List[str]:
    lines = [
        "| (B, M, C, D) | dtype | "
        + " | ".join(f"`{m}` ms" for m in METHODS)
        + " | lsm / softmax | lsm-negative-multinomial / softmax | compile s "
        + " / ".join(METHODS)
        + " | largest difference from TF, "
        + " / ".join(METHODS)
        + " | target (lsm) |"
    ]
    lines.append("|---" * (lines[0].count("|") - 1) + "|")
    for size in sizes_of(new):
        for dtype in ("float64", "float32"):
            rows = {m: new.get((m, size, dtype)) for m in METHODS}
            if not any(rows.values()):
                continue
            soft = median(rows["softmax"])
            lsm = median(rows["lsm"])
            compiles = [cell(rows[m], "compile_s", 1) for m in METHODS]
            compile_ratio = None
            if (rows["lsm"] or {}).get("compile_s") and (rows["softmax"] or {}).get("compile_s"):
                compile_ratio = rows["lsm"]["compile_s"] / rows["softmax"]["compile_s"]
            lines.append(
                f"| {size_text(size)} | {short(dtype)} | "
                + " | ".join(cell(rows[m]) for m in METHODS)
                + f" | {ratio(lsm, soft)} | {ratio(median(rows['lsm-negative-multinomial']), soft)}"
                + f" | {' / '.join(compiles)} | "
                + " / ".join(error_cell(rows[m], m) for m in METHODS)
                + f" | {verdict(size, lsm / soft if lsm and soft else None, compile_ratio)} |"
            )
    return lines


def against_current(new: Dict, other: Dict, label: str) -> List[str]:
    lines = [
        f"| method | (B, M, C, D) | dtype | current ms | {label} ms | {label} / current "
        f"| {label} / current softmax | compile s, current / {label} "
        f"| {label}'s largest difference from TF |",
        "|---" * 9 + "|",
    ]

    def order(item):  # type: ignore[no-untyped-def]
        method, size, dtype = item[0]
        return (
            METHODS.index(method) if method in METHODS else len(METHODS),
            ORDER.index(size) if size in ORDER else len(ORDER),
            dtype,
        )

    for (method, size, dtype), result in sorted(other.items(), key=order):
        mine = new.get((method, size, dtype))
        current, soft = median(mine), median(new.get(("softmax", size, dtype)))
        lines.append(
            f"| {method} | {size_text(size)} | {short(dtype)} | {cell(mine)} | {cell(result)} "
            f"| {ratio(median(result), current)} | {ratio(median(result), soft)} "
            f"| {cell(mine, 'compile_s', 1)} / {cell(result, 'compile_s', 1)} "
            f"| {error_cell(result, method)} |"
        )
    return lines


def parts_table(parts: Dict, new: Dict) -> List[str]:
    # The parts in tools/step_parts.py's order, which its manifest and the run keep.
    names = list(dict.fromkeys(method for method, _, _ in parts))
    lines = [
        "| (B, M, C, D) | dtype | "
        + " | ".join(f"`{p}`" for p in names)
        + " | the loop's predicate (with backoff − without) | lsm − softmax (whole iteration) |",
        "|---" * (4 + len(names)) + "|",
    ]
    for size in sizes_of(parts):
        for dtype in ("float64", "float32"):
            rows = {p: parts.get((p, size, dtype)) for p in names}
            if not any(rows.values()):
                continue
            loop = None
            with_loop = median(rows.get("natural-step-with-backoff"))
            without = median(rows.get("natural-step"))
            if with_loop is not None and without is not None:
                loop = f"{with_loop - without:.3f}"
            lsm, soft = (
                median(new.get(("lsm", size, dtype))),
                median(new.get(("softmax", size, dtype))),
            )
            gap = "–" if lsm is None or soft is None else f"{lsm - soft:.2f}"
            lines.append(
                f"| {size_text(size)} | {short(dtype)} | "
                + " | ".join(cell(rows[p], digits=3) for p in names)
                + f" | {loop or '–'} | {gap} |"
            )
    return lines


def report(out: Path) -> str:
    """The tables of one device run's folder ``out`` (new/, base/, candidates/<name>/, parts/,
    f32-highest/, autotune-0/; any but new/ may be missing), as Markdown."""
    results = out / "new" / "gpu_results.json"
    if not results.exists():
        raise FileNotFoundError(f"{out}: no new/gpu_results.json, so no device run's results")
    run = json.loads(results.read_text())
    new = _indexed(run["results"])
    device = run.get("nvidia_smi") or run.get("device_kind") or "unknown device"
    lines = [
        f"Device: {device} (jax {run.get('jax')}). Median ms per call, after {run.get('warmup')} "
        f"warm-ups, of {run.get('repeats')} timed calls.",
        "",
        "### The current step",
        "",
        *current_step(new),
    ]
    sections = [("base", out / "base", "base")]
    sections += [
        (f"candidate `{folder.name}`", folder, folder.name)
        for folder in sorted((out / "candidates").glob("*"))
        if folder.is_dir()
    ]
    sections.append(("float32 with TF32 off", out / "f32-highest", "TF32 off"))
    sections.append(
        ("without autotuning (`--xla_gpu_autotune_level=0`)", out / "autotune-0", "untuned")
    )
    for title, folder, label in sections:
        other = load(folder)
        if other:
            lines += ["", f"### {title}", "", *against_current(new, other, label)]
    parts = load(out / "parts")
    if parts:
        lines += ["", "### The closed-form step's parts, timed on their own", ""]
        lines += parts_table(parts, new)
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("out", type=Path, help="the device run's results folder (gpu_out)")
    print(report(parser.parse_args().out), end="")


if __name__ == "__main__":
    main()
