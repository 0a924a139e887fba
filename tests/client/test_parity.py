"""The sync and async clients expose the same methods with the same signatures, and
both placements (one shard, several) implement the whole seam a client routes through."""

from __future__ import annotations

import inspect

import pytest

from fairque import AsyncFairQueue, FairQueue
from fairque.client.shards.one import OnePlace
from fairque.client.shards.placement import Placement
from fairque.client.shards.spread import Shards

PAIRS = [(FairQueue, AsyncFairQueue)]


def public_methods(cls: type) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(member)
        for name, member in inspect.getmembers(cls)
        if not name.startswith("_") and callable(member)
    }


@pytest.mark.parametrize(("one", "two"), PAIRS, ids=lambda c: c.__name__)
def test_same_methods_and_signatures(one: type, two: type) -> None:
    sync, aio = public_methods(one), public_methods(two)
    assert set(sync) == set(aio)
    for name, signature in sync.items():
        other = aio[name]
        assert list(signature.parameters) == list(other.parameters), name
        for param, spec in signature.parameters.items():
            twin = other.parameters[param]
            assert (spec.kind, spec.default) == (twin.kind, twin.default), (name, param)


#: methods that send nothing: the same plain function on both clients
NO_IO = {"from_url", "encode_result", "shard_of"}


@pytest.mark.parametrize(("sync", "aio"), PAIRS, ids=lambda c: c.__name__)
def test_async_methods_are_coroutines(sync: type, aio: type) -> None:
    for name in public_methods(aio):
        if name in NO_IO:
            continue
        assert inspect.iscoroutinefunction(getattr(aio, name)), name
    assert not any(inspect.iscoroutinefunction(getattr(sync, n)) for n in public_methods(sync))


@pytest.mark.parametrize("placement", [OnePlace, Shards], ids=lambda c: c.__name__)
def test_each_placement_implements_the_seam_with_its_signatures(placement: type) -> None:
    assert not inspect.isabstract(placement), getattr(placement, "__abstractmethods__", ())
    seam = public_methods(Placement)
    mine = public_methods(placement)
    assert set(seam) <= set(mine)
    for name, signature in seam.items():
        assert list(signature.parameters) == list(mine[name].parameters), name
