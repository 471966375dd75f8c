"""Argument checks shared by the sources: each raises ValueError naming the
argument and the value it got."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def check_int(name: str, value: Any, *, minimum: int | None = None) -> int:
    """``value`` as an int (bool refused), at least ``minimum`` when given."""
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise ValueError(f"{name} must be an int, got {value!r} ({type(value).__name__})")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def check_rank(rank: Any, world_size: Any) -> tuple[int, int]:
    world_size = check_int("world_size", world_size, minimum=1)
    rank = check_int("rank", rank, minimum=0)
    if rank >= world_size:
        raise ValueError(f"rank must be < world_size ({world_size}), got {rank}")
    return rank, world_size


def check_state(state: Any, owner: str, required: tuple[str, ...]) -> Mapping[str, Any]:
    """A state dict given to ``load_state_dict``: a mapping with these keys."""
    if not isinstance(state, Mapping):
        raise ValueError(f"{owner}.load_state_dict takes a dict, got {type(state).__name__}")
    missing = [k for k in required if k not in state]
    if missing:
        raise ValueError(f"{owner}.load_state_dict: state misses {', '.join(missing)} (got keys {sorted(state)})")
    return state


def check_matches(owner: str, state: Mapping[str, Any], **expected: Any) -> None:
    """The state was saved by an object configured like this one."""
    for key, value in expected.items():
        if key in state and state[key] != value:
            raise ValueError(
                f"{owner}.load_state_dict: the state has {key}={state[key]!r}, this {owner} has {key}={value!r}"
            )
