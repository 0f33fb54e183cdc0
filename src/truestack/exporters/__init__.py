"""Output formats: one module per format, each `export(profile) -> bytes`.

Modules are imported lazily so a format's optional dependency (protobuf for
pprof) is only needed when that format is asked for, and so reading the
format table costs nothing.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing: `record` reads this table at start-up
if TYPE_CHECKING:
    from ..model import Profile


class Format:
    """One output format: its name for -f, the module that writes it, its file extensions."""

    __slots__ = ("description", "extensions", "module", "name")

    def __init__(self, name: str, module: str, extensions: tuple[str, ...], description: str) -> None:
        self.name = name
        self.module = module
        self.extensions = extensions  # first one is the default when naming output files
        self.description = description

    def __repr__(self) -> str:
        return f"Format({self.name!r}, {self.module!r}, {self.extensions!r})"


FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        Format("flamegraph", "flamegraph", (".html", ".htm"), "interactive flame graph, one self-contained HTML file"),
        Format("svg", "svg", (".svg",), "flame graph as one SVG (py-spy, flamegraph.pl): hover, click to zoom"),
        Format("firefox", "firefox", (".firefox.json", ".gecko.json"), "Firefox Profiler (profiler.firefox.com)"),
        # Plain `.json` is speedscope's: the JSON format most viewers open (Firefox's needs its own extension).
        Format("speedscope", "speedscope", (".speedscope.json", ".json"), "speedscope (speedscope.app)"),
        Format("pprof", "pprof", (".pb.gz", ".pprof"), "pprof profile.proto, gzipped"),
        Format("collapsed", "collapsed", (".collapsed", ".folded"), "collapsed stacks (flamegraph.pl, inferno)"),
        Format("pstats", "pstats_export", (".pstats", ".prof"), "pstats for snakeviz / pstats.Stats"),
        Format("table", "table", (".txt",), "text method table"),
        Format("tree", "tree", (".tree.txt",), "call tree as indented text (pyinstrument's console view)"),
        Format("truestack", "native_format", (".tsp",), "truestack's own saved profile (for `truestack report`)"),
    )
}


class UnknownFormat(ValueError):
    pass


def format_names() -> list[str]:
    return list(FORMATS)


def output_format(path: str, fmt: str | None = None) -> str:
    """The one rule of the CLI and the API: `fmt` if given, else the format the
    file name's extension implies; anything else is an UnknownFormat error."""
    if fmt is not None:
        if fmt not in FORMATS:
            raise UnknownFormat(f"unknown format {fmt!r} (choose from: {', '.join(FORMATS)})")
        return fmt
    found = format_for_path(path)
    if found is None:
        known = ", ".join(ext for f in FORMATS.values() for ext in f.extensions)
        raise UnknownFormat(f"cannot tell the format of {path!r} from its extension (known: {known}); give one with -f")
    return found


def format_for_path(path: str) -> str | None:
    """The format a file name implies, or None (longest extension wins)."""
    lowered = path.lower()
    best: tuple[int, str] | None = None
    for fmt in FORMATS.values():
        for ext in fmt.extensions:
            if lowered.endswith(ext) and (best is None or len(ext) > best[0]):
                best = (len(ext), fmt.name)
    return best[1] if best else None


def export(profile: Profile, fmt: str, options: object = None) -> bytes:
    """The profile in format `fmt`; `options` (e.g. tree.TreeOptions) go to the formats that take them."""
    if fmt not in FORMATS:
        raise UnknownFormat(f"unknown format {fmt!r} (choose from: {', '.join(FORMATS)})")
    module = importlib.import_module(f"{__name__}.{FORMATS[fmt].module}")
    data: bytes = module.export(profile) if options is None else module.export(profile, options)
    return data
