"""The GPU kit's wheels: what the device run imports that the device image lacks, for CPython 3.12.

    python benchmarks/gpu/wheels.py                 # into benchmarks/gpu/wheels/ (ignored by git)
    python benchmarks/gpu/wheels.py --no-atari      # never consider envpool
    python benchmarks/gpu/wheels.py --check-only    # check the wheels already there, download nothing

Run it where the package index is reachable. It starts from the project's own requirements
(`pyproject.toml`) and what the run needs beside them (`RUN_NEEDS`: flashbax, for the
PureJaxRL-style reference loop and the PER comparison), and downloads (`pip download --no-deps
--only-binary=:all:` for CPython 3.12 on manylinux x86-64) each requirement that the image
(`image.txt`) lacks, then theirs, until every requirement is met. Each wheel's requirements are
then checked against the kit and the image (versions where the image's are known), the total
carried size (the wheels plus the working tree that travels with them) is printed against the
64 MiB limit, and `wheels/kit.json` records it all for the run to report. Atari (envpool and its
ROM assets) goes in only if it fits: its sizes are read from the index before anything is
downloaded; otherwise the kit says why, and the run's `atari` section repeats it.

Exit status: 0 when the kit is complete and fits, 1 otherwise (each problem printed).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
LIMIT_MIB = 64  # what the device tool carries: the working tree and the wheels together
PYTHON = (3, 12)
# The device's platform, for requirement markers.
MARKERS = {
    "python_version": "3.12", "python_full_version": "3.12.3", "implementation_name": "cpython",
    "platform_python_implementation": "CPython", "sys_platform": "linux",
    "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix", "extra": "",
}  # fmt: skip
PLATFORMS = [f"manylinux_2_{n}_x86_64" for n in range(39, 16, -1)] + [
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
]
RUN_NEEDS = ("flashbax",)  # imported by the run beyond the project's requirements (`bench` extra)
ATARI = "envpool"
MANIFEST = "kit.json"


def canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


# ---- reading ----------------------------------------------------------------------------------
def read_image(path: str = os.path.join(HERE, "image.txt")) -> dict[str, str | None]:
    """The image's packages: canonical name -> version (None where it was not read)."""
    out: dict[str, str | None] = {}
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                name, _, version = line.partition("==")
                out[canon(name)] = version.strip() or None
    return out


def read_manifest(folder: str) -> dict | None:
    """`folder/kit.json` as `main` wrote it, or None where there is none."""
    try:
        with open(os.path.join(folder, MANIFEST)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def wheel_metadata(path: str) -> dict:
    """A wheel's name, version, Requires-Python and Requires-Dist lines (from its METADATA)."""
    with zipfile.ZipFile(path) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        text = z.read(meta).decode("utf-8", "replace")
    head = text.split("\n\n", 1)[0]
    fields: dict[str, list[str]] = {}
    for line in head.splitlines():
        key, sep, value = line.partition(":")
        if sep and not line.startswith((" ", "\t")):
            fields.setdefault(key.strip(), []).append(value.strip())
    return {
        "name": canon(fields["Name"][0]),
        "version": fields["Version"][0],
        "requires_python": (fields.get("Requires-Python") or [None])[0],
        "requires": fields.get("Requires-Dist", []),
    }


def wheel_modules(path: str) -> list[str]:
    """The top-level modules a wheel installs (what `import` can name)."""
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
    out = set()
    for n in names:
        top = n.split("/", 1)[0]
        if top.endswith((".dist-info", ".data")):
            continue
        if "/" in n:
            if n.endswith((".py", ".so")) and top.isidentifier():
                out.add(top)
        elif n.endswith(".py") and n[:-3].isidentifier():
            out.add(n[:-3])
    return sorted(out)


def project_requirements(pyproject: str = os.path.join(ROOT, "pyproject.toml")) -> list[str]:
    """The project's dependencies, and `RUN_NEEDS` with the versions its extras ask for."""
    import tomllib

    with open(pyproject, "rb") as f:
        project = tomllib.load(f)["project"]
    extras = [r for group in project.get("optional-dependencies", {}).values() for r in group]
    needs = []
    for name in RUN_NEEDS:
        pinned = [
            r for r in extras if canon(re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0]) == canon(name)
        ]
        needs.append(pinned[0] if pinned else name)
    return list(project["dependencies"]) + needs


# ---- checking ---------------------------------------------------------------------------------
def check(wheels: list[dict], image: dict, requirements: list[str]) -> tuple[list[dict], list[str]]:
    """Every requirement (the project's, then each wheel's) against the kit and the image.

    Returns a row per requirement (who asks, what, met by what) and the problems: an unmet or
    wrongly versioned requirement, a wheel whose Requires-Python excludes 3.12, or two wheels of
    one package."""
    from packaging.requirements import Requirement
    from packaging.specifiers import SpecifierSet

    kit = {}
    problems = []
    for w in wheels:
        if w["name"] in kit:
            problems.append(
                f"two wheels of {w['name']}: {kit[w['name']]['version']} and {w['version']}"
            )
        kit[w["name"]] = w
        rp = w.get("requires_python")
        if rp and not SpecifierSet(rp).contains(".".join(map(str, PYTHON)) + ".3"):
            problems.append(f"{w['name']} {w['version']} needs Python {rp}, the image has 3.12")
    rows = []
    asks = [("the project", r) for r in requirements]
    asks += [(f"{w['name']} {w['version']}", r) for w in wheels for r in w["requires"]]
    for who, text in asks:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate(MARKERS):
            continue  # an extra, or another platform's
        name = canon(req.name)
        spec = req.specifier
        if name in kit:
            ok = spec.contains(kit[name]["version"], prereleases=True)
            met = f"kit {kit[name]['version']}"
        elif name in image:
            version = image[name]
            ok = version is None or spec.contains(version, prereleases=True)
            met = f"image {version}" if version else "image (version not read: assumed)"
        else:
            ok, met = False, "missing"
        rows.append({"by": who, "requirement": text.split(";")[0].strip(), "met_by": met, "ok": ok})
        if not ok:
            problems.append(f"{who} requires {text.split(';')[0].strip()}: {met}")
    return rows, problems


def tree_bytes(root: str = ROOT) -> int:
    """The bytes of the working tree the device tool carries: tracked files and untracked ones
    that git does not ignore."""
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root, capture_output=True, check=True,
    ).stdout  # fmt: skip
    total = 0
    for rel in out.decode().split("\0"):
        path = os.path.join(root, rel)
        if rel and os.path.isfile(path):
            total += os.path.getsize(path)
    return total


# ---- downloading ------------------------------------------------------------------------------
def _compatible(filename: str) -> bool:
    from packaging import tags
    from packaging.utils import parse_wheel_filename

    if not filename.endswith(".whl"):
        return False
    wanted = set(tags.cpython_tags(PYTHON, abis=["cp312", "abi3", "none"], platforms=PLATFORMS))
    wanted |= set(tags.compatible_tags(PYTHON, "cp312", platforms=PLATFORMS))
    return bool(parse_wheel_filename(filename)[3] & wanted)


def index_size(requirement: str, index: str = "https://pypi.org/simple") -> tuple[str, int]:
    """The wheel pip would take for `requirement` (newest compatible), and its bytes, from the
    index's JSON (PEP 691/700), downloading nothing."""
    from packaging.requirements import Requirement
    from packaging.utils import parse_wheel_filename

    req = Requirement(requirement)
    url = f"{index.rstrip('/')}/{canon(req.name)}/"
    ask = urllib.request.Request(url, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(ask, timeout=60) as r:
        files = json.load(r)["files"]
    best = None
    for f in files:
        if f.get("yanked") or not _compatible(f["filename"]):
            continue
        version = parse_wheel_filename(f["filename"])[1]
        if req.specifier.contains(version) and (best is None or version > best[0]):
            best = (version, f["filename"], int(f["size"]))
    if best is None:
        raise LookupError(f"no CPython 3.12 x86-64 wheel of {requirement} on {index}")
    return best[1], best[2]


def download(requirement: str, dest: str) -> str:
    """`pip download` one wheel (no dependencies) for the device; its path."""
    before = set(os.listdir(dest))
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
           "--python-version", "3.12", "--implementation", "cp", "-d", dest]  # fmt: skip
    for p in PLATFORMS:
        cmd += ["--platform", p]
    subprocess.run(cmd + [requirement], check=True)
    new = sorted(set(os.listdir(dest)) - before)
    if len(new) != 1:
        raise RuntimeError(f"pip download {requirement!r} added {new}")
    return os.path.join(dest, new[0])


def gather(requirements: list[str], image: dict, dest: str) -> list[dict]:
    """Download every requirement the image does not meet, and theirs, until none is left."""
    from packaging.requirements import Requirement
    from packaging.specifiers import SpecifierSet

    specs: dict[str, SpecifierSet] = {}
    kit: dict[str, dict] = {}
    queue = list(requirements)
    while queue:
        req = Requirement(queue.pop(0))
        if req.marker is not None and not req.marker.evaluate(MARKERS):
            continue
        name = canon(req.name)
        if name in image and name not in kit:
            continue
        specs[name] = specs.get(name, SpecifierSet()) & req.specifier
        if name in kit and specs[name].contains(kit[name]["version"], prereleases=True):
            continue
        if name in kit:  # a later requirer wants another version
            os.remove(kit[name]["path"])
        print(f"  downloading {name}{specs[name]}", flush=True)
        path = download(f"{name}{specs[name]}", dest)
        kit[name] = {**wheel_metadata(path), "path": path}
        queue += kit[name]["requires"]
    return list(kit.values())


def atari_fits(image: dict, room: int) -> tuple[bool, str, list[str]]:
    """Whether envpool and the requirements of its that the image lacks fit in `room` bytes
    (sizes from the index, nothing downloaded); the reason, and the requirements to add."""
    from packaging.requirements import Requirement

    name, size = index_size(ATARI)
    parts = [(name, size)]
    needs = []
    for r in _requires_of_index_wheel(name):
        req = Requirement(r)
        if (req.marker is None or req.marker.evaluate(MARKERS)) and canon(req.name) not in image:
            parts.append(index_size(r))
            needs.append(r)
    total = sum(s for _, s in parts)
    listing = ", ".join(f"{n} {s / 2**20:.1f} MiB" for n, s in parts)
    if total > room:
        return (
            False,
            (
                f"envpool and what it needs beyond the image take {total / 2**20:.0f} MiB "
                f"({listing}), over the {room / 2**20:.0f} MiB left of the {LIMIT_MIB} MiB the device "
                "carries"
            ),
            [],
        )
    return True, f"envpool fits: {listing}", [ATARI, *needs]


def _requires_of_index_wheel(filename: str, index: str = "https://pypi.org") -> list[str]:
    """A wheel's Requires-Dist from the index's JSON API, downloading no wheel."""
    from packaging.utils import parse_wheel_filename

    name, version = parse_wheel_filename(filename)[:2]
    try:
        with urllib.request.urlopen(f"{index}/pypi/{name}/{version}/json", timeout=60) as r:
            return json.load(r)["info"].get("requires_dist") or []
    except urllib.error.HTTPError:  # some indexes answer for the newest release only
        with urllib.request.urlopen(f"{index}/pypi/{name}/json", timeout=60) as r:
            return json.load(r)["info"].get("requires_dist") or []


# ---- the command ------------------------------------------------------------------------------
def report(
    wheels: list[dict], rows: list[dict], problems: list[str], tree: int, atari: dict
) -> dict:
    kit_bytes = sum(os.path.getsize(w["path"]) for w in wheels)
    return {
        "python": ".".join(map(str, PYTHON)),
        "platforms": PLATFORMS[:1] + ["..."] + PLATFORMS[-2:],
        "wheels": [
            {k: w[k] for k in ("name", "version", "requires_python")}
            | {
                "file": os.path.basename(w["path"]),
                "bytes": os.path.getsize(w["path"]),
                "modules": wheel_modules(w["path"]),
            }  # fmt: skip
            for w in wheels
        ],
        "requirements": rows,
        "problems": problems,
        "wheels_bytes": kit_bytes,
        "tree_bytes": tree,
        "carried_bytes": kit_bytes + tree,
        "limit_bytes": LIMIT_MIB * 2**20,
        "atari": atari,
    }


def render(kit: dict) -> str:
    """The kit in Markdown: its wheels, what met each requirement, Atari, the carried size."""
    lines = [
        "# The GPU kit's wheels",
        "",
        f"Produced by `python benchmarks/gpu/wheels.py`: what the device image (`image.txt`) lacks "
        f"for CPython {kit['python']} on manylinux x86-64, each wheel's requirements checked.",
        "",
        "| wheel | MiB | modules |",
        "|---|---:|---|",
    ]
    lines += [f"| `{w['file']}` | {w['bytes'] / 2**20:.2f} | {', '.join(w['modules'])} |"
              for w in kit["wheels"]]  # fmt: skip
    lines += ["", "| asked by | requirement | met by |", "|---|---|---|"]
    lines += [f"| {r['by']} | `{r['requirement']}` | {r['met_by']}{'' if r['ok'] else ' **NOT MET**'} |"
              for r in kit["requirements"]]  # fmt: skip
    lines += [
        "",
        f"Atari: {'in' if kit['atari']['included'] else 'left out'}: {kit['atari']['reason']}.",
        "",
        f"Carried: wheels {kit['wheels_bytes'] / 2**20:.2f} MiB + working tree "
        f"{kit['tree_bytes'] / 2**20:.2f} MiB = **{kit['carried_bytes'] / 2**20:.2f} MiB** of "
        f"{kit['limit_bytes'] / 2**20:.0f} MiB.",
        "",
        "Problems: " + ("; ".join(kit["problems"]) if kit["problems"] else "none."),
    ]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").strip().splitlines()[0])
    p.add_argument("--dest", default=os.path.join(HERE, "wheels"), help="the wheels' folder")
    p.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results", "gpu"),
                   help="folder for kit.json and kit.md, the record (default: %(default)s)")  # fmt: skip
    p.add_argument("--no-atari", action="store_true", help="leave envpool out without asking")
    p.add_argument(
        "--check-only", action="store_true", help="check the wheels in --dest as they are"
    )
    args = p.parse_args(argv)
    os.makedirs(args.dest, exist_ok=True)
    image = read_image()
    requirements = project_requirements()
    if args.check_only:
        paths = sorted(
            os.path.join(args.dest, f) for f in os.listdir(args.dest) if f.endswith(".whl")
        )
        wheels = [{**wheel_metadata(x), "path": x} for x in paths]
        atari = (read_manifest(args.dest) or {}).get(
            "atari", {"included": False, "reason": "not asked"}
        )
    else:
        for f in os.listdir(args.dest):  # a kit is made whole each time: no stale versions
            if f.endswith(".whl"):
                os.remove(os.path.join(args.dest, f))
        print(f"wheels.py: what the image lacks, into {args.dest}", flush=True)
        wheels = gather(requirements, image, args.dest)
        atari = {"included": False, "reason": "left out by --no-atari"}
        if not args.no_atari:
            room = (
                LIMIT_MIB * 2**20 - tree_bytes() - sum(os.path.getsize(w["path"]) for w in wheels)
            )
            try:
                fits, why, extra = atari_fits(image, room)
            except (OSError, LookupError, StopIteration, ValueError) as e:
                fits, why, extra = False, f"its size could not be read from the index: {e}", []
            atari = {"included": fits, "reason": why}
            if fits:
                wheels = gather(requirements + extra, image, args.dest)
    rows, problems = check(wheels, image, requirements + ([ATARI] if atari["included"] else []))
    tree = tree_bytes()
    kit = report(wheels, rows, problems, tree, atari)
    if kit["carried_bytes"] > kit["limit_bytes"]:
        problems.append(f"carried {kit['carried_bytes'] / 2**20:.1f} MiB, over {LIMIT_MIB} MiB")
    kit["problems"] = problems
    with open(os.path.join(args.dest, MANIFEST), "w") as f:
        json.dump(kit, f, indent=2)
    os.makedirs(args.out, exist_ok=True)
    for name, body in ((MANIFEST, json.dumps(kit, indent=2)), ("kit.md", render(kit))):
        with open(os.path.join(args.out, name + ".tmp"), "w") as f:
            f.write(body)
        os.replace(os.path.join(args.out, name + ".tmp"), os.path.join(args.out, name))
    print(f"\n{'wheel':<48} {'MiB':>6}")
    for w in kit["wheels"]:
        print(f"{w['file']:<48} {w['bytes'] / 2**20:>6.2f}")
    assumed = sum(1 for r in rows if "assumed" in r["met_by"])
    met = sum(1 for r in rows if r["ok"])
    print(f"\nrequirements: {len(rows)} checked, {met} met "
          f"({assumed} by image packages whose version was not read)")  # fmt: skip
    print(f"Atari: {'in' if atari['included'] else 'left out'}: {atari['reason']}")
    print(f"carried: wheels {kit['wheels_bytes'] / 2**20:.2f} MiB + working tree "
          f"{tree / 2**20:.2f} MiB = {kit['carried_bytes'] / 2**20:.2f} MiB of {LIMIT_MIB} MiB")  # fmt: skip
    for line in problems:
        print(f"PROBLEM: {line}")
    print(f"wrote {os.path.join(args.dest, MANIFEST)} and {os.path.join(args.out, 'kit.md')}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
