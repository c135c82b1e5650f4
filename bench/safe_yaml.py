"""YAML for files other people write: bounded in size, depth and alias expansion, strict about duplicates.
yaml.safe_load runs no code but keeps the last of equal keys, expands a 514-byte "billion laughs", recurses on
deep brackets and raises on huge integers or bad dates; `load` turns each into one YAMLLimitError naming the
problem and, where it can, the line."""

from typing import Any

import yaml
from yaml.nodes import MappingNode, ScalarNode

MAX_BYTES = 1 << 20  # a sweep is a page of text; 1 MiB is generous
MAX_DEPTH = 50  # nesting of mappings/lists
MAX_ALIASES = 200
MAX_NODES = 100_000  # values after alias expansion: what a consumer walking the data will see
MAX_INT_DIGITS = 40
MAX_BRACKETS = 1000  # PyYAML scans open flow brackets in quadratic time (5,000 take 1 s); no sweep needs 1000


class YAMLLimitError(ValueError):
    """The text is not YAML we accept; the message says why (and where, when known)."""


# libyaml when present (~10x faster scanner); the constructors, where the checks live, are Python either way.
_BaseLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_BaseLoader):  # type: ignore[misc]
    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                continue  # non-scalar keys fail later as unhashable; merge keys (<<) may repeat keys
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if key in seen:
                raise YAMLLimitError(f"duplicate key {key!r} (line {seen[key]} and line {line})")
            seen[key] = line
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_int(self, node: ScalarNode) -> int:  # type: ignore[override]
        if (digits := sum(c.isdigit() for c in str(node.value))) > MAX_INT_DIGITS:
            line = node.start_mark.line + 1
            raise YAMLLimitError(f"integer with {digits} digits (line {line}); at most {MAX_INT_DIGITS}")
        return super().construct_yaml_int(node)  # type: ignore[no-any-return]


_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)


def _check_expanded_size(data: Any) -> None:
    """Count values as a walker meets them (an alias each use), memoised so a bomb is cheap to measure."""
    sizes: dict[int, int] = {}
    open_: set[int] = set()

    def size(item: Any) -> int:
        if not isinstance(item, dict | list):
            return 1
        key = id(item)
        if key in sizes:
            return sizes[key]
        if key in open_:
            raise YAMLLimitError("an alias refers to a value that contains it")
        open_.add(key)
        children = [*item.keys(), *item.values()] if isinstance(item, dict) else item
        total = 1
        for child in children:
            total += size(child)
            if total > MAX_NODES:
                raise YAMLLimitError(f"expands to more than {MAX_NODES:,} values (aliases used as a bomb?)")
        open_.discard(key)
        sizes[key] = total
        return total

    size(data)


def _check_events(text: str) -> None:
    """Depth and alias count from the event stream, before anything is composed (composing recurses)."""
    depth = aliases = 0
    for event in yaml.parse(text, Loader=_BaseLoader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                line = event.start_mark.line + 1 if event.start_mark else "?"
                raise YAMLLimitError(f"nested more than {MAX_DEPTH} levels deep (line {line})")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
        elif isinstance(event, yaml.AliasEvent):
            aliases += 1
            if aliases > MAX_ALIASES:
                raise YAMLLimitError(f"more than {MAX_ALIASES} aliases (*name)")


def load(text: str) -> Any:
    """Parse one YAML document within the limits above; YAMLLimitError for anything else."""
    if len(text) > MAX_BYTES:
        raise YAMLLimitError(f"larger than {MAX_BYTES // 1024} KiB")
    if text.count("[") + text.count("{") > MAX_BRACKETS:
        raise YAMLLimitError(f"more than {MAX_BRACKETS} '[' and '{{' (flow collections)")
    try:
        _check_events(text)
        loader = _Loader(text)
        try:
            data = loader.get_single_data()
        finally:
            loader.dispose()
    except YAMLLimitError:
        raise
    # ValueError and the others come from the constructors, e.g. a timestamp like 2026-13-45.
    except (yaml.YAMLError, ValueError, TypeError, OverflowError) as e:
        raise YAMLLimitError(f"not valid YAML: {e}") from None
    except RecursionError:
        raise YAMLLimitError("nested too deeply") from None
    _check_expanded_size(data)
    return data


def decode(raw: bytes) -> str:
    """UTF-8 text (a BOM is dropped), or YAMLLimitError naming the first bad byte."""
    if len(raw) > MAX_BYTES:
        raise YAMLLimitError(f"larger than {MAX_BYTES // 1024} KiB")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise YAMLLimitError(f"not UTF-8 text (byte 0x{raw[e.start]:02x} at offset {e.start})") from None
