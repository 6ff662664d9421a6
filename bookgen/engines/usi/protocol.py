"""The USI protocol as text: parsed engine lines and the commands' fields.

``info`` lines are parsed into :class:`InfoLine`, tolerant of unknown or
malformed tokens; ``bestmove`` and ``option`` declarations have their own
parsers; :class:`UsiSearch` is what one ``go`` produced. Nothing here talks
to a process: the client is :mod:`bookgen.engines.usi.client`.

Mate scores: ``score mate N`` is taken as reported (the sign says who mates;
``mate 0`` or a negative N means the side to move is mated). Engines such as
gpsusi report mates as a huge ``score cp`` instead (1148897 for a mate in 1,
about -870000 for a hopeless position); ``|cp| >= mate_cp_threshold``
(default 100000) is read as a mate whose distance is estimated from the PV
length (``InfoLine.mate_estimated`` is then true).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from bookgen.values import MATE_VALUE

__all__ = [
    "DEFAULT_MATE_CP_THRESHOLD", "InfoLine", "UsiOption", "UsiSearch", "decode_output",
    "go_limits", "parse_bestmove", "parse_info", "parse_int", "parse_option", "printable",
]

DEFAULT_MATE_CP_THRESHOLD = 100_000
_MAX_MATE_PLIES = 999


# --------------------------------------------------------------------------
# parsed protocol lines


@dataclass
class UsiOption:
    """One ``option name ... type ...`` declaration."""

    name: str
    type: str
    default: str | None = None
    min: int | None = None
    max: int | None = None
    vars: list[str] = field(default_factory=list)


@dataclass
class InfoLine:
    """One ``info`` line; fields the engine did not send (or garbled) are None.

    ``cp``/``mate`` are from the side to move's point of view; at most one is
    set. ``bound`` is ``"lower"`` or ``"upper"`` for fail-high/low lines.
    ``multipv`` defaults to 1. ``pv`` keeps the engine's tokens as they are
    (including ``pass``).
    """

    raw: str
    depth: int | None = None
    seldepth: int | None = None
    multipv: int = 1
    cp: int | None = None
    mate: int | None = None
    mate_estimated: bool = False
    bound: str | None = None
    nodes: int | None = None
    nps: int | None = None
    time: int | None = None
    hashfull: int | None = None
    currmove: str | None = None
    string: str | None = None
    pv: list[str] = field(default_factory=list)

    @property
    def has_score(self) -> bool:
        return self.cp is not None or self.mate is not None

    @property
    def is_mate(self) -> bool:
        return self.mate is not None

    @property
    def mate_win(self) -> bool | None:
        """True when the side to move mates, False when it is mated, None without mate."""
        if self.mate is None:
            return None
        return self.mate > 0

    @property
    def score(self) -> int | None:
        """The score as centipawns, mates mapped to +-(MATE_VALUE - plies).

        Ordinary scores are clipped to +-(MATE_VALUE - 1000) so that they
        always rank below mates; a quicker mate ranks above a slower one.
        """
        if self.mate is not None:
            plies = min(abs(self.mate), _MAX_MATE_PLIES)
            return MATE_VALUE - plies if self.mate > 0 else -MATE_VALUE + plies
        if self.cp is not None:
            limit = MATE_VALUE - _MAX_MATE_PLIES - 1
            return max(-limit, min(limit, self.cp))
        return None


_INT_FIELDS = {"depth", "seldepth", "nodes", "nps", "time", "hashfull", "multipv"}
# Keywords whose value runs to the end of the line.
_REST_FIELDS = {"pv", "string", "refutation", "currline"}
_INFO_KEYWORDS = _INT_FIELDS | _REST_FIELDS | {
    "score", "currmove", "currmovenumber", "cpuload", "tbhits", "sbhits", "lowerbound",
    "upperbound"}


def parse_int(token: str) -> int | None:
    """``int(token)``, or None when the token is not an integer."""
    try:
        return int(token)
    except ValueError:
        return None


def parse_info(line: str, mate_cp_threshold: int | None = DEFAULT_MATE_CP_THRESHOLD
               ) -> InfoLine | None:
    """Parse an ``info`` line; None when the line is not one.

    Unknown keywords and malformed values are skipped, never raised.
    ``|cp| >= mate_cp_threshold`` is read as a mate (None disables this).
    """
    tokens = line.split()
    if not tokens or tokens[0] != "info":
        return None
    info = InfoLine(raw=line)
    i, n = 1, len(tokens)
    while i < n:
        key = tokens[i]
        i += 1
        if key in _INT_FIELDS:
            if i < n and (value := parse_int(tokens[i])) is not None:
                i += 1
                if key == "multipv":
                    if value >= 1:
                        info.multipv = value
                else:
                    setattr(info, key, value)
        elif key == "score":
            i = _parse_score(tokens, i, info)
        elif key in ("lowerbound", "upperbound"):
            info.bound = key[:-5]
        elif key == "currmove":
            if i < n:
                info.currmove = tokens[i]
                i += 1
        elif key == "pv":
            info.pv = tokens[i:]
            i = n
        elif key == "string":
            info.string = " ".join(tokens[i:])
            i = n
        elif key in _REST_FIELDS:
            i = n
        # Anything else (currmovenumber's number, tbhits, garbage) is skipped
        # one token at a time: the next known keyword resynchronises.
    if (mate_cp_threshold is not None and info.cp is not None
            and abs(info.cp) >= mate_cp_threshold):
        info.mate = 1 if info.cp > 0 else -1
        info.cp = None
        info.mate_estimated = True
    if info.mate_estimated and info.mate is not None:
        plies = len(info.pv)
        info.mate = max(1, plies) if info.mate > 0 else -plies
    return info


def _parse_score(tokens: list[str], i: int, info: InfoLine) -> int:
    n = len(tokens)
    if i + 1 >= n:
        return n
    kind, value = tokens[i], tokens[i + 1]
    if kind == "cp":
        cp = parse_int(value)
        if cp is None:
            return i + 1
        info.cp, info.mate = cp, None
    elif kind == "mate":
        if value in ("+", "-"):
            # A mate of unknown length (YaneuraOu style): estimated from the PV.
            info.mate = 1 if value == "+" else -1
            info.mate_estimated = True
        else:
            mate = parse_int(value)
            if mate is None:
                return i + 1
            info.mate = mate
        info.cp = None
    else:
        return i
    i += 2
    if i < n and tokens[i] in ("lowerbound", "upperbound"):
        info.bound = tokens[i][:-5]
        i += 1
    return i


def parse_bestmove(line: str) -> tuple[str | None, str | None] | None:
    """``(move, ponder)`` of a ``bestmove`` line, None when the line is not one.

    The move is None when the line carries none; ``resign``, ``win`` and
    ``(none)`` are returned as they are.
    """
    tokens = line.split()
    if not tokens or tokens[0] != "bestmove":
        return None
    move = tokens[1] if len(tokens) > 1 else None
    ponder = None
    if len(tokens) > 3 and tokens[2] == "ponder":
        ponder = tokens[3]
    return move, ponder


_OPTION_KEYWORDS = ("name", "type", "default", "min", "max", "var")


def parse_option(line: str) -> UsiOption | None:
    """Parse an ``option name N type T ...`` declaration (None if malformed)."""
    tokens = line.split()
    if len(tokens) < 2 or tokens[0] != "option" or tokens[1] != "name":
        return None
    parts: dict[str, list[str]] = {}
    vars_: list[list[str]] = []
    current: list[str] = []
    for token in tokens[1:]:
        if token == "var":
            vars_.append([])
            current = vars_[-1]
        elif token in _OPTION_KEYWORDS and token not in parts:
            parts[token] = []
            current = parts[token]
        else:
            current.append(token)
    name = " ".join(parts.get("name", []))
    type_ = " ".join(parts.get("type", []))
    if not name or not type_:
        return None
    default = " ".join(parts["default"]) if "default" in parts else None
    if default == "<empty>":
        default = ""
    low = parse_int(" ".join(parts["min"])) if "min" in parts else None
    high = parse_int(" ".join(parts["max"])) if "max" in parts else None
    return UsiOption(name=name, type=type_, default=default, min=low, max=high,
                     vars=[" ".join(v) for v in vars_])


@dataclass
class UsiSearch:
    """What one ``go`` produced.

    ``bestmove`` is the move sent (``resign``, ``win`` and ``(none)`` make it
    None and set the flags below). ``infos`` holds, for each multipv index,
    the last info line that carried a score or a PV. ``lines`` are all raw
    lines received during the search, garbage included.
    """

    bestmove: str | None
    ponder: str | None = None
    infos: dict[int, InfoLine] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)
    resign: bool = False
    win: bool = False
    nodes: int | None = None
    elapsed: float = 0.0

    @property
    def best(self) -> InfoLine | None:
        """The info of the first PV (or of the lowest index reported)."""
        if 1 in self.infos:
            return self.infos[1]
        return self.infos[min(self.infos)] if self.infos else None

    def ranked(self) -> list[InfoLine]:
        """The infos in multipv order."""
        return [self.infos[k] for k in sorted(self.infos)]

    def tail(self, lines: int = 3) -> str:
        """The last lines received, fit to quote in a message (see :func:`printable`)."""
        return printable("\n".join(self.lines[-lines:])) or "nothing"



# --------------------------------------------------------------------------
# engine output as text


def decode_output(raw: bytes) -> str:
    """Engine output as text: bytes that are not UTF-8 become ``\\xNN`` escapes."""
    return raw.decode("utf-8", errors="backslashreplace")


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def printable(text: str, limit: int = 300) -> str:
    """Engine output made fit to quote in a one-line message: line breaks shown
    as `` | ``, other control characters escaped (``\\x1b``), only the last
    ``limit`` characters kept."""
    lines = [line.strip() for line in text.splitlines()]
    joined = " | ".join(line for line in lines if line)
    escaped = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 256
                           else f"\\u{ord(m.group()):04x}", joined)
    return escaped if len(escaped) <= limit else "..." + escaped[-limit:]


# --------------------------------------------------------------------------
# go commands


_GO_LIMITS = ("btime", "wtime", "binc", "winc", "byoyomi", "movetime", "nodes", "depth")


def go_limits(**limits: int | None) -> list[str]:
    """The tokens of a ``go`` command for ``limits`` (None ones left out), in USI's order."""
    unknown = set(limits) - set(_GO_LIMITS)
    if unknown:
        raise ValueError(f"unknown go limits: {', '.join(sorted(unknown))}")
    tokens: list[str] = []
    for key in _GO_LIMITS:
        value = limits.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"go {key} must be a non-negative integer, not {value!r}")
        tokens += [key, str(value)]
    return tokens
