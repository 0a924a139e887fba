"""The sync and async clients expose the same methods with the same signatures."""

from __future__ import annotations

import inspect

from fairque import AsyncFairQueue, FairQueue


def public_methods(cls: type) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(member)
        for name, member in inspect.getmembers(cls)
        if not name.startswith("_") and callable(member)
    }


def test_same_methods_and_signatures() -> None:
    sync, aio = public_methods(FairQueue), public_methods(AsyncFairQueue)
    assert set(sync) == set(aio)
    for name, signature in sync.items():
        other = aio[name]
        assert list(signature.parameters) == list(other.parameters), name
        for param, spec in signature.parameters.items():
            twin = other.parameters[param]
            assert (spec.kind, spec.default) == (twin.kind, twin.default), (name, param)


#: methods that send nothing: the same plain function on both clients
NO_IO = {"from_url", "encode_result", "shard_of"}


def test_async_methods_are_coroutines() -> None:
    for name in public_methods(AsyncFairQueue):
        if name in NO_IO:
            continue
        assert inspect.iscoroutinefunction(getattr(AsyncFairQueue, name)), name
    assert not any(
        inspect.iscoroutinefunction(getattr(FairQueue, n)) for n in public_methods(FairQueue)
    )
