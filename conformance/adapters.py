"""Implementations conformance can drive: one lookup for every `--impl`.

``--impl NAME`` is a name registered in the entry-point group ``tiercheck.implementations``
(tiercheck registers spec, reference and sglang there itself, in its pyproject; another
installed package registers its own the same way). ``--impl package.module:factory``
names a factory directly. A factory is called as
``factory(cfg, variants=frozenset(...), backend="lockstep"|"gloo")`` and returns a fresh
driver (the protocol in tiercheck.conformance.driver); conformance builds one per example.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from dataclasses import dataclass
from importlib.metadata import entry_points

from tiercheck.errors import UserError

from .driver import SpecDriver

GROUP = "tiercheck.implementations"
BACKENDS = ("lockstep", "gloo")
DRIVER_API = ("apply", "state", "verify", "close")


@dataclass(frozen=True)
class Implementation:
    name: str
    target: str  # "package.module:factory"
    origin: str  # the distribution that registered it, or "--impl" for a direct target

    def load(self):
        module_name, _, attr = self.target.partition(":")
        if not module_name or not attr:
            raise UserError(f"--impl {self.name}: {self.target!r} is not package.module:factory")
        if self.origin == "--impl" and os.getcwd() not in sys.path:
            sys.path.append(os.getcwd())  # a factory module in the current directory, as `python -m` would see it
        try:
            obj = importlib.import_module(module_name)
        except UserError:
            raise
        except Exception as exc:  # noqa: BLE001 -- any import-time failure is the user's module
            raise UserError(f"--impl {self.name}: cannot import {module_name} ({type(exc).__name__}: {exc})") from None
        for part in attr.split("."):
            if not hasattr(obj, part):
                raise UserError(f"--impl {self.name}: module {module_name} has no attribute {attr!r}")
            obj = getattr(obj, part)
        if not callable(obj):
            raise UserError(f"--impl {self.name}: {self.target} is not callable")
        return obj

    def description(self) -> str:
        """The first line of the factory's docstring (or why it cannot be loaded)."""
        try:
            doc = (self.load().__doc__ or "").strip()
        except UserError as exc:
            return f"(unavailable: {exc})"
        return doc.splitlines()[0] if doc else ""


def registered() -> dict:
    """name -> Implementation for every entry point in the group."""
    found: dict = {}
    for ep in entry_points(group=GROUP):
        origin = ep.dist.name if ep.dist is not None else "?"
        if ep.name in found and found[ep.name].target != ep.value:
            raise UserError(f"implementation {ep.name!r} is registered twice: by {found[ep.name].origin} "
                            f"({found[ep.name].target}) and by {origin} ({ep.value})")
        found[ep.name] = Implementation(ep.name, ep.value, origin)
    return found


def lookup(impl: str) -> Implementation:
    if ":" in impl:
        return Implementation(impl, impl, "--impl")
    known = registered()
    if impl not in known:
        raise UserError(f"--impl: unknown implementation {impl!r} (registered: {', '.join(sorted(known)) or 'none'}; "
                        f"or give package.module:factory)")
    return known[impl]


def driver_factory(impl: str, cfg, variants=frozenset(), backend: str = "lockstep", timeouts=None):
    """A zero-argument callable building a fresh, checked driver (one per Hypothesis example).
    ``timeouts``: {"timeout": collective seconds, "driver_timeout": seconds}
    (tiercheck.conformance.fault_flags), passed to the factory as keyword options only when
    given, so a factory that has no such bounds need not accept them."""
    if backend not in BACKENDS:
        raise UserError(f"--backend: unknown backend {backend!r} (known: {', '.join(BACKENDS)})")
    factory = lookup(impl).load()
    variants = frozenset(variants)
    options = dict(timeouts or {})
    try:
        inspect.signature(factory).bind(cfg, variants=variants, backend=backend, **options)
    except TypeError as exc:
        wanted = ", ".join(["variants=...", "backend=...", *(f"{k}=..." for k in options)])
        raise UserError(f"--impl {impl}: the factory must accept (cfg, {wanted}): {exc}") from None
    except ValueError:
        pass  # no signature to inspect (a builtin): the call decides

    def build():
        try:
            driver = factory(cfg, variants=variants, backend=backend, **options)
        except UserError:
            raise
        except Exception as exc:  # noqa: BLE001 -- the factory's own failure: one line, no traceback
            raise UserError(f"--impl {impl}: building a driver failed ({type(exc).__name__}: {exc})") from None
        missing = [m for m in DRIVER_API if not callable(getattr(driver, m, None))]
        missing += [] if hasattr(driver, "model") else ["model"]
        if missing:
            raise UserError(f"--impl {impl}: the factory returned a {type(driver).__name__}, not a driver "
                            f"(missing: {', '.join(missing)})")
        return driver

    return build


def probe(factory) -> None:
    """Build and close one driver: a factory that fails does so here, before a test run starts."""
    factory().close()


# tiercheck's own implementations, registered under these names in its pyproject.


def spec(cfg, variants=frozenset(), backend="lockstep"):
    """the specification itself (with --variant: a mutant of it)"""
    return SpecDriver(cfg, variants)


def reference(cfg, variants=frozenset(), backend="lockstep", timeout=None, driver_timeout=None):
    """tiercheck.impl, the torch-backed reference HiCache"""
    from .reference import ReferenceDriver

    return ReferenceDriver(cfg, variants=variants, backend=backend, timeout=timeout, driver_timeout=driver_timeout)


def sglang(cfg, variants=frozenset(), backend="lockstep"):
    """upstream SGLang HiCache, the release of the running lane (tiercheck lane setup sglang==X.Y.Z)"""
    from .sglang import SGLangDriver

    return SGLangDriver(cfg, backend=backend)
