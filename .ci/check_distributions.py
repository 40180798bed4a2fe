"""The wheel and the sdist carry what a user's install needs: the bundled datasets, py.typed and the licence;
the wheel carries none of the benchmark studies (benchmarks/: the HLO export, the scaling, the stability suite)."""
import sys
import tarfile
import zipfile
from pathlib import Path

NEEDED = ["gpflow_augmented/py.typed"] + [
    f"gpflow_augmented/datasets/data/{name}.npz" for name in ("vehicle", "segment", "satimage")
]

dist = Path(sys.argv[1])
wheels, sdists = sorted(dist.glob("*.whl")), sorted(dist.glob("*.tar.gz"))
if len(wheels) != 1 or len(sdists) != 1:
    sys.exit(f"expected one wheel and one sdist in {dist}, found {wheels + sdists}")
# The licence sits at the sdist's root and in the wheel's <name>-<version>.dist-info/licenses/.
wheel_dist_info = "-".join(wheels[0].name.split("-")[:2]) + ".dist-info"
contents = {
    wheels[0].name: (set(zipfile.ZipFile(wheels[0]).namelist()),
                     NEEDED + [f"{wheel_dist_info}/licenses/LICENSE"]),
    sdists[0].name: ({"/".join(n.split("/")[1:]) for n in tarfile.open(sdists[0]).getnames()},
                     NEEDED + ["LICENSE"]),
}
for name, (files, needed) in contents.items():
    missing = [f for f in needed if f not in files]
    if missing:
        sys.exit(f"{name} lacks {', '.join(missing)}")
harness = sorted(f for f in contents[wheels[0].name][0]
                 if f.startswith(("benchmarks/", "tools/", "tests/")) or "hlo" in f)
if harness:
    sys.exit(f"{wheels[0].name} carries the harness: {', '.join(harness[:5])}")
print(f"{', '.join(contents)}: datasets, py.typed and LICENSE present; the wheel has no harness")
