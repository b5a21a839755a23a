"""pytest entry point: run tiercheck's conformance suites in a project's own CI.

Options: --tiercheck-impl NAME|package.module:factory (default reference; NAME as
`tiercheck impls` lists) and --tiercheck-backend lockstep|gloo.
Generated suites (`tiercheck generate`) and your own tests take the fixtures
``tiercheck_impl`` and ``tiercheck_backend``; ``tiercheck_conform`` runs the stateful
suite for a model file.
"""

from __future__ import annotations

import pytest


def pytest_addoption(parser):
    group = parser.getgroup("tiercheck")
    group.addoption("--tiercheck-impl", default="reference",
                    help="implementation to drive: a registered name or package.module:factory (default: reference)")
    group.addoption("--tiercheck-backend", default="lockstep", help="rank backend: lockstep or gloo")


def pytest_configure(config):
    """An unknown or unloadable implementation is a usage error (one line), not N failed tests."""
    impl = config.getoption("--tiercheck-impl", default="reference")
    if impl == "reference":
        return  # the default: loaded when a test needs it, so plain runs import no torch here
    from tiercheck.conformance.adapters import lookup
    from tiercheck.errors import UserError

    try:
        lookup(impl).load()
    except UserError as exc:
        raise pytest.UsageError(str(exc)) from None


@pytest.fixture
def tiercheck_impl(request) -> str:
    return request.config.getoption("--tiercheck-impl")


@pytest.fixture
def tiercheck_backend(request) -> str:
    return request.config.getoption("--tiercheck-backend")


@pytest.fixture
def tiercheck_conform(tiercheck_impl, tiercheck_backend, tmp_path):
    """Call with a model (file or shipped name): runs the spec-derived stateful suite."""
    from tiercheck.conformance import machine
    from tiercheck.conformance.adapters import driver_factory
    from tiercheck.models import model_file

    def conform(model: str, examples: int = 50, steps: int = 30, seed: int = 0, variants=()):
        mf = model_file.load(model)
        factory = driver_factory(tiercheck_impl, mf.config, frozenset(variants), tiercheck_backend)
        machine.run(factory, examples=examples, steps=steps, seed=seed, record_dir=str(tmp_path),
                    label=tiercheck_impl)

    return conform
