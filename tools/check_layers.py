#!/usr/bin/env python3
"""Fails when an #include in include/ or src/ crosses a layer.

The layers (HACKING.md, "Layering") and what each may include:

    base  <-  concurrency  <-  pipeline
    base  <-  io
    base  <-  media
    base  <-  cuda
    pipeline, io, media, cuda  <-  ops

A file belongs to the layer of its directory: include/feedline/<layer>/ or
src/<layer>/ (include/feedline/detail/ is the pipeline's template machinery).
Checked for every file under include/ and src/:

- a public header "feedline/<layer>/..." only from the same or a lower layer;
- a private header of src/<layer>/ only from src/<layer>/ itself (never from
  a public header);
- no nanobind or Python.h;
- FFmpeg (libav*, libsw*), turbojpeg, libjpeg and libpng headers only under
  src/media/; libdeflate only under src/io/ (ZIP) and src/media/ (PNG);
  zlib nowhere.

Usage: check_layers.py [ROOT]   (ROOT: the repository, by default this one)
Prints one line per crossing, "path:line: message", and exits with 1 if any.
"""

from __future__ import annotations

import pathlib
import re
import sys

# Each layer and the layers it may include (itself included).
ALLOWED: dict[str, set[str]] = {
    "base": {"base"},
    "concurrency": {"base", "concurrency"},
    "pipeline": {"base", "concurrency", "pipeline"},
    "io": {"base", "io"},
    "media": {"base", "media"},
    "cuda": {"base", "cuda"},
    "ops": {"base", "concurrency", "pipeline", "io", "media", "cuda", "ops"},
}
# Directories of include/feedline/ that belong to another layer.
ALIASES = {"detail": "pipeline"}

# (pattern of a system include, the directories it is confined to, what it is)
CONFINED = [
    (re.compile(r"^(libav[a-z]*|libsw[a-z]*)/"), ("src/media/",), "FFmpeg"),
    (re.compile(r"^(turbojpeg|jpeglib|jconfig|jmorecfg)\.h$"), ("src/media/",), "libjpeg-turbo"),
    (re.compile(r"^png(conf)?\.h$"), ("src/media/",), "libpng"),
    # Deflate is libdeflate's (ZIP members, the PNG writer); zlib is not used.
    (re.compile(r"^zlib\.h$"), (), "zlib"),
    (re.compile(r"^libdeflate\.h$"), ("src/io/", "src/media/"), "libdeflate"),
]
PYTHON = re.compile(r"^(Python\.h$|nanobind/)")

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
SUFFIXES = {".h", ".hh", ".hpp", ".cc", ".cpp", ".cu", ".cuh", ".inc"}


def layer_of(rel: pathlib.PurePosixPath) -> str | None:
    """The layer of a file, from its path relative to the repository."""
    parts = rel.parts
    if len(parts) >= 4 and parts[:2] == ("include", "feedline"):
        name = parts[2]
    elif len(parts) >= 3 and parts[0] == "src":
        name = parts[1]
    else:
        return None
    return ALIASES.get(name, name)


def check_file(root: pathlib.Path, path: pathlib.Path) -> list[str]:
    rel = pathlib.PurePosixPath(path.relative_to(root).as_posix())
    layer = layer_of(rel)
    public = rel.parts[0] == "include"
    errors = []

    def error(lineno: int, message: str) -> None:
        errors.append(f"{rel}:{lineno}: {message}")

    if layer is None:
        error(1, "file outside any layer directory (include/feedline/<layer>/ or src/<layer>/)")
        return errors
    if layer not in ALLOWED:
        error(1, f"unknown layer '{layer}' (add it to tools/check_layers.py and HACKING.md)")
        return errors

    text = path.read_text(encoding="utf-8", errors="replace")
    for lineno, line in enumerate(text.splitlines(), 1):
        m = INCLUDE.match(line)
        if not m:
            continue
        quoted, target = m.group(1) == '"', m.group(2)
        if PYTHON.match(target):
            error(lineno, f"includes {target}: Python belongs in python/bindings/ only")
            continue
        confined = next(((d, what) for p, d, what in CONFINED if p.match(target)), None)
        if confined is not None:
            where, what = confined
            if not str(rel).startswith(where):
                allowed = f"allowed only under {' and '.join(where)}" if where else "not used in any layer"
                error(lineno, f"includes {what} header {target}: {allowed}")
            continue
        if target.startswith("feedline/"):
            parts = target.split("/")
            dep = ALIASES.get(parts[1], parts[1]) if len(parts) > 2 else None
            if dep not in ALLOWED:
                error(lineno, f"includes {target}, which is in no layer")
            elif dep not in ALLOWED[layer]:
                error(lineno, f"layer '{layer}' includes {target} of layer '{dep}'")
            continue
        if not quoted:
            continue  # the standard library and other system headers
        # A private header: relative to src/ or to the including file.
        for base in (root / "src", path.parent):
            candidate = base / target
            if candidate.is_file():
                dep_rel = pathlib.PurePosixPath(candidate.resolve().relative_to(root.resolve()).as_posix())
                dep_layer = layer_of(dep_rel)
                if public:
                    error(lineno, f"public header includes private header {dep_rel}")
                elif dep_rel.parts[0] != "src" or dep_layer != layer:
                    error(lineno, f"layer '{layer}' includes {dep_rel}, private to '{dep_layer}'")
                break
        else:
            error(lineno, f'includes "{target}", which is no file of include/ or src/')
    return errors


def check_tree(root: pathlib.Path) -> list[str]:
    errors: list[str] = []
    for top in ("include", "src"):
        for path in sorted((root / top).rglob("*")):
            if path.is_file() and path.suffix in SUFFIXES:
                errors += check_file(root, path)
    return errors


def main(argv: list[str]) -> int:
    root = pathlib.Path(argv[1] if len(argv) > 1 else pathlib.Path(__file__).resolve().parents[1])
    errors = check_tree(root)
    for e in errors:
        print(e)
    if errors:
        print(f"check_layers: {len(errors)} include(s) cross a layer (see HACKING.md, Layering)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
