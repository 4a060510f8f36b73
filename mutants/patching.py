"""How a mutant changes the reference controller: wrap one of its functions at run time."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any


def wrap(owner: Any, name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: replace owner.name by a wrapper that receives the original first."""

    def decorate(wrapper: Callable[..., Any]) -> Callable[..., Any]:
        original = getattr(owner, name)

        @functools.wraps(original)
        def patched(*args: Any, **kwargs: Any) -> Any:
            return wrapper(original, *args, **kwargs)

        setattr(owner, name, patched)
        return wrapper

    return decorate


def key_of(release: dict[str, Any]) -> str:
    meta = release["metadata"]
    return f"{meta['namespace']}/{meta['name']}"
