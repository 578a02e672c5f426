#!/usr/bin/env python3
"""Checks that every #include in src/ and include/deepgrid/ goes to the same layer or one below,
and that public headers include only public headers (they are installed alone).

The layers are deepgrid's folders (src/<layer>/); a public header (include/deepgrid/) belongs
to the layer named in PUBLIC below. docs/architecture.md draws the same table. Prints one line
per include that runs upward and exits 1 if there is any; exits 0 with a summary otherwise.
"""
import pathlib
import re
import sys

# Each layer and the layers it may include besides itself (bottom to top).
MAY_INCLUDE = {
    "core": [],
    "model": ["core"],
    "kernels": ["core", "model"],
    "io": ["core"],
    "device": ["core"],
    "store": ["core", "model", "io"],
    "engines": ["core", "model", "kernels", "io", "device", "store"],
    "plan": ["core", "model", "kernels", "io", "device", "store", "engines"],
    "run": ["core", "model", "kernels", "io", "device", "store", "engines", "plan"],
    "viz": ["core", "model", "io", "store"],
    "mpi": ["core", "model", "kernels", "io", "device", "store", "engines", "plan", "run"],
    "python": ["core", "model", "kernels", "io", "device", "store", "engines", "plan", "run", "viz"],
    "cli": ["core", "model", "kernels", "io", "device", "store", "engines", "plan", "run", "viz", "mpi"],
}

# The public API (include/deepgrid/): each header's layer.
PUBLIC = {
    "status.h": "core", "geometry.h": "core", "dtype.h": "core", "boundary.h": "core",
    "progress.h": "core",
    "stencil.h": "model", "scheme.h": "model", "probes.h": "model", "init.h": "model",
    "kernel.h": "model",
    "direct_io.h": "io",
    "store.h": "store", "integrity.h": "store", "resume.h": "store", "plane_transfer.h": "store",
    "box_io.h": "store", "npy.h": "store", "traces_file.h": "store", "checksum.h": "store", "fsck.h": "store", "vtkhdf.h": "store",
    "machine.h": "plan", "run_options.h": "plan",
    "run.h": "run", "report.h": "run",
    "image.h": "viz",
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def layer_of_include(name):
    """The layer of an include as written ("deepgrid/run.h", "engines/wavefront.h")."""
    head, _, rest = name.partition("/")
    if head == "deepgrid":
        return PUBLIC.get(rest, "?public")
    return head if head in MAY_INCLUDE else None


def main():
    root = pathlib.Path(__file__).resolve().parent.parent
    problems, checked = [], 0
    public_dir = root / "include" / "deepgrid"
    unknown = sorted(p.name for p in public_dir.glob("*.h") if p.name not in PUBLIC)
    problems += [f"include/deepgrid/{n}: a public header without a layer in "
                 f"scripts/check_layers.py" for n in unknown]
    files = [(p, PUBLIC.get(p.name)) for p in public_dir.glob("*.h")]
    for p in sorted((root / "src").rglob("*")):
        if p.suffix in (".h", ".cc"):
            layer = p.relative_to(root / "src").parts[0]
            if layer not in MAY_INCLUDE:
                problems.append(f"{p.relative_to(root)}: not in a layer's folder")
                continue
            files.append((p, layer))
    for path, layer in files:
        if layer is None:
            continue
        for name in INCLUDE.findall(path.read_text()):
            target = layer_of_include(name)
            checked += 1
            if path.parent == public_dir and not name.startswith("deepgrid/"):
                problems.append(f"{path.relative_to(root)}: a public header includes {name}, "
                                f"which is not installed (include only deepgrid/ headers)")
                continue
            if target is None or target == layer:
                continue
            if target.startswith("?") or target not in MAY_INCLUDE[layer]:
                problems.append(f"{path.relative_to(root)} ({layer}) includes {name} ({target})")
    for line in problems:
        print(line)
    if problems:
        print(f"{len(problems)} include(s) against the layering (scripts/check_layers.py)")
        return 1
    print(f"layering: {checked} includes in {len(files)} files, none upward")
    return 0


if __name__ == "__main__":
    sys.exit(main())
