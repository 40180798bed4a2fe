"""The tables the docs embed from a report's summaries, kept equal to the report's output.

A generated table sits between two markers, which name the committed summaries and the report's
section (``gpflow-augmented report SUMMARIES --section NAME`` prints the same), or a study's
results and ``matched``, ``exact``, ``confidence``, ``large_data`` or ``stability`` (the tables
``python -m benchmarks matched``, ``confidence``, ``large-data`` and ``stability`` write; a study
run as several commands names each one's results, with commas between them), ``settings``, the
runs ``tools/default_settings_on_validation.py`` writes, or ``gpu``, a device run's folder as
``tools/gpu_summary.py`` reads it::

    <!-- report: docs/results/kddcup-20s/summaries.json nll -->
    | dataset | seeds | lsm | softmax |
    ...
    <!-- end report -->

    python tools/docs_tables.py            # rewrite every such table from its summaries
    python tools/docs_tables.py --check    # exit 1, naming what differs (the tests run it)
"""

import argparse
import json
import re
import sys
from pathlib import Path

from gpflow_augmented.comparison.report import report_section

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the studies' package, benchmarks/, beside this folder
sys.path.insert(0, str(ROOT / "tools"))  # the tools beside this one, as a script run here sees them
BLOCK = re.compile(
    r"(<!-- report: (?P<source>\S+) (?P<section>\w+) -->\n)(?P<table>.*?)(<!-- end report -->)",
    re.DOTALL,
)


def refreshed(text: str, root: Path) -> str:
    """``text`` with every generated table made again from its summaries (paths from ``root``)."""

    def make(match: re.Match) -> str:
        if match["section"] == "gpu":  # a device run's folder of gpu_results.json files
            from gpu_summary import report

            return match[1] + report(root / match["source"]) + match[5]
        return match[1] + _table(_results(match["source"], root), match["section"]) + match[5]

    return BLOCK.sub(make, text)


def _results(source: str, root: Path) -> dict:
    """One results file, or a study's files named with commas between them (its runs, one a
    command), their rows one after another."""
    parts = [json.loads((root / path).read_text()) for path in source.split(",")]
    parts = [{"rows": part} if isinstance(part, list) else part for part in parts]
    if len(parts) == 1:
        return parts[0]
    return {"rows": [row for part in parts for row in part["rows"]]}


def _table(results: dict, section: str) -> str:
    if section == "matched":
        from benchmarks.matched import matched_report

        return matched_report(results["rows"]) + "\n"
    if section == "exact":
        from benchmarks.matched import exact_report

        return exact_report(results["rows"]) + "\n"
    if section == "confidence":
        from benchmarks.confidence import confidence_report

        return confidence_report(results["rows"]) + "\n"
    if section == "stability":
        from benchmarks.stability import stability_table

        return stability_table(results["cells"])
    if section == "settings":
        from default_settings_on_validation import settings_table

        return settings_table(results["rows"])
    if section == "large_data":
        from benchmarks.large_data import large_data_report

        return large_data_report(results)
    return report_section(results, section)


def documents(root: Path) -> list:
    found = [
        root / "README.md",
        *sorted((root / "docs").rglob("*.md")),
        root / "benchmarks" / "GPU.md",
    ]
    return [path for path in found if path.exists()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 on a drift")
    parser.add_argument("--root", type=Path, default=ROOT, help=argparse.SUPPRESS)
    args = parser.parse_args()
    drifted, found = [], 0
    for path in documents(args.root):
        text = path.read_text()
        found += len(BLOCK.findall(text))
        new = refreshed(text, args.root)
        if new != text:
            drifted.append(path.relative_to(args.root))
            if not args.check:
                path.write_text(new)
    verb = "differ from their summaries" if args.check else "rewritten"
    print(
        f"{found} generated tables; {len(drifted)} documents {verb}: "
        + ", ".join(map(str, drifted))
    )
    return 1 if args.check and drifted else 0


if __name__ == "__main__":
    sys.exit(main())
