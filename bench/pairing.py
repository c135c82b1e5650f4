"""The order in which two server configs (a link, `Pair`) are measured, so slow drift cancels instead of
landing on one side (docs/reference/paired-measurement.md). Per point the repeats of v1/v2 (A = the mode
listed first) run A0 B0 | B1 A1 | A2 B2 | ..., window by window with both servers up (`server.pair_colocate`),
else cut into one-side blocks, one start each (`restart_blocks`). With `measure.baseline_pairs` the links form
a chain sharing one server per step (`chain`), and a config in L links takes every L-th repeat of its points
(`Slot`), so each link's repeats stay its own, also on resume."""

import dataclasses
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from bench.sweep import ServerConfig, ServerGroup

Side = Literal["A", "B"]


def abba_sides(repeat: int) -> tuple[Side, Side]:
    """The order of the two sides in one repeat: A B for even repeats, B A for odd ones."""
    return ("A", "B") if repeat % 2 == 0 else ("B", "A")


def abba_order(repeats: int) -> list[tuple[int, Side]]:
    """(repeat, side) in measurement order: A0 B0 B1 A1 A2 B2 B3 A3 ..."""
    return [(r, side) for r in range(repeats) for side in abba_sides(r)]


def paired_repeats(a: Mapping[int, int | None], b: Mapping[int, int | None]) -> list[int]:
    """Repeats both sides hold from one invocation (None: unrecorded); other invocations ran other servers."""
    return sorted(r for r in set(a) & set(b) if a[r] == b[r])


def restart_blocks(repeats: int) -> list[tuple[Side, list[int]]]:
    """The ABBA order as runs of one side: one server start per block when the two cannot coexist."""
    blocks: list[tuple[Side, list[int]]] = []
    for r, side in abba_order(repeats):
        if blocks and blocks[-1][0] == side:
            blocks[-1][1].append(r)
        else:
            blocks.append((side, [r]))
    return blocks


@dataclass(frozen=True)
class Slot:
    """A link's repeat r is the point's repeat r * stride + offset (a config in `stride` links)."""

    stride: int = 1
    offset: int = 0

    def index(self, r: int) -> int:
        return r * self.stride + self.offset

    def link_repeat(self, index: int) -> int | None:
        """The link repeat of the point's repeat `index`, or None when that repeat belongs to another link."""
        r, rest = divmod(index - self.offset, self.stride)
        return r if rest == 0 and r >= 0 else None

    @property
    def last(self) -> bool:
        """The config's last link in the chain: its points are complete after it."""
        return self.offset == self.stride - 1


Turns = Literal["abba", "blocks"]


@dataclass(frozen=True)
class WindowLink:
    """A window's link record (samples.link, link_repeat, link_mode): name, turns (abba | blocks), slot."""

    name: str
    turns: Turns
    slot: Slot


@dataclass(frozen=True)
class Pair:
    """Two server configs measured repeat by repeat (v1~v2, or baseline~spec); A = the side measured first."""

    a: ServerGroup
    b: ServerGroup
    slot_a: Slot = Slot()
    slot_b: Slot = Slot()

    def side(self, side: Side) -> ServerGroup:
        return self.a if side == "A" else self.b

    def slot(self, side: Side) -> Slot:
        return self.slot_a if side == "A" else self.slot_b

    @property
    def name(self) -> str:
        """The link as stored on its windows (samples.link): both configs' keys, A first."""
        return f"{self.a.server.key()}~{self.b.server.key()}"

    @property
    def repeats(self) -> int:
        """Planned repeats of the link: its points' planned repeats over the configs' link counts."""
        return max(p.repeats for p in self.a.points) // self.slot_a.stride

    def window_link(self, side: Side, turns: Turns) -> WindowLink:
        return WindowLink(self.name, turns, self.slot(side))

    def holds(self, config: ServerConfig) -> Side | None:
        """The side whose server config is `config`, or None."""
        return "A" if self.a.server == config else "B" if self.b.server == config else None


Unit = ServerGroup | Pair


def pair_units(groups: Sequence[ServerGroup], paired: bool) -> list[Unit]:
    """Groups in launch order, each v1/v2 pair with equal points joined into one `Pair`."""
    if not paired:
        return list(groups)
    by_key: dict[str, list[ServerGroup]] = {}
    for g in groups:
        if g.server.spec_mode is not None:
            by_key.setdefault(g.server.pair_key(), []).append(g)
    out: list[Unit] = []
    taken: set[int] = set()
    for g in groups:
        if id(g) in taken:
            continue
        mates = by_key.get(g.server.pair_key(), []) if g.server.spec_mode is not None else []
        other = next((m for m in mates if m is not g and id(m) not in taken), None)
        if other is not None and len(mates) == 2 and _same_points(g, other):
            out.append(Pair(g, other))
            taken |= {id(g), id(other)}
        else:
            out.append(g)
            taken.add(id(g))
    return out


def _same_points(a: ServerGroup, b: ServerGroup) -> bool:
    def shape(g: ServerGroup) -> list[tuple[int, str, int, int]]:
        return [(p.batch_size, p.workload.key(), p.num_prompts, p.repeats) for p in g.points]

    return shape(a) == shape(b)


def chain(groups: Sequence[ServerGroup], paired: bool, baseline_modes: Sequence[str]) -> list[Unit]:
    """The comparisons as links ordered so consecutive links share a server, in the grid's config order, then
    the configs in no link. `paired`: v1~v2 links; `baseline_modes`: these modes link with the baseline. Per
    family (base, modes x, y in grid order): all linked: base~x, x~y, y~base; one mode m on base plus m~o:
    base~m, m~o when base is up, else o~m, m~base; both on base only: x~base, base~y. Each config plans
    `repeats` x its link count, every link its own every-L-th repeat (`Slot`)."""
    base = next((g for g in groups if g.server.is_baseline), None)
    families: dict[str, list[ServerGroup]] = {}
    for g in groups:
        if not g.server.is_baseline:
            families.setdefault(g.server.pair_key(), []).append(g)
    walk: list[tuple[ServerGroup, ServerGroup]] = []
    up: ServerGroup | None = None  # the server the walk leaves up
    for members in families.values():
        modes = [g for g in members if g.server.spec_mode is not None]
        both = paired and len(modes) == 2 and _same_points(modes[0], modes[1])
        linked = [g for g in modes if g.server.spec_mode in baseline_modes] if base is not None else []
        links = _family_walk(base, modes, linked, both, up)
        walk += links
        if links:
            up = links[-1][1]
    return _with_slots(groups, walk)


def _family_walk(
    base: ServerGroup | None,
    modes: list[ServerGroup],
    linked: list[ServerGroup],
    both: bool,
    up: ServerGroup | None,
) -> list[tuple[ServerGroup, ServerGroup]]:
    """One configuration's links, oriented so the first starts from `up` where it can."""
    if base is None or not linked:
        return [(modes[0], modes[1])] if both else []
    if len(linked) == 2:
        x, y = linked
        return [(base, x), (x, y), (y, base)] if both else [(x, base), (base, y)]
    m = linked[0]
    other = [g for g in modes if g is not m]
    if not both or not other:
        return [(base, m)] if up is base else [(m, base)]
    o = other[0]
    return [(base, m), (m, o)] if up is base else [(o, m), (m, base)]


def _with_slots(groups: Sequence[ServerGroup], walk: list[tuple[ServerGroup, ServerGroup]]) -> list[Unit]:
    """The walk as Pairs (repeats x links per point, each side's Slot), then the groups in no link."""
    count = Counter(g.server for link in walk for g in link)
    planned = {
        g.server: ServerGroup(
            g.server, [dataclasses.replace(p, repeats=p.repeats * count[g.server]) for p in g.points]
        )
        for g in groups
        if g.server in count
    }
    seen: dict[ServerConfig, int] = {}

    def slot(g: ServerGroup) -> Slot:
        offset = seen.get(g.server, 0)
        seen[g.server] = offset + 1
        return Slot(count[g.server], offset)

    out: list[Unit] = [Pair(planned[a.server], planned[b.server], slot(a), slot(b)) for a, b in walk]
    return out + [g for g in groups if g.server not in count]


@dataclass(frozen=True)
class PartRecord:
    """A run part as pairing needs it: first `invocation`, host, GPU, drift check agreed (None: not run)."""

    part: int
    invocation: int
    host: str
    gpu: str
    agrees: bool | None = None


def part_of(parts: Sequence[PartRecord], invocation: int | None) -> int | None:
    """The part that measured a window of `invocation`: the latest begun at or before it (an empty part shares
    its start with the next); None invocation: the first part; None when no parts are recorded."""
    if not parts:
        return None
    ordered = sorted(parts, key=lambda p: p.part)
    if invocation is None:
        return ordered[0].part
    began = [p.part for p in ordered if p.invocation <= invocation]
    return began[-1] if began else ordered[0].part


def part_groups(parts: Sequence[PartRecord]) -> dict[int, int]:
    """part -> first part of its group: the same host and GPU or an agreeing drift check joins the last."""
    groups: dict[int, int] = {}
    before: PartRecord | None = None
    for p in sorted(parts, key=lambda p: p.part):
        same_place = before is not None and (p.host, p.gpu) == (before.host, before.gpu)
        groups[p.part] = groups[before.part] if before is not None and (same_place or p.agrees) else p.part
        before = p
    return groups
