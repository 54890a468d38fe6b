"""The target's fields are TargetConfig's (schemas/target.py), wherever a user gives them: each is a CLI target
option (tilefarm/options.py TARGET_OPTIONS) and an explicit keyword of the Python client's submit and build_request
(tilefarm/client.py), by the same name and the same rules, and the CLI's help names the choices the schema accepts.
A field added to TargetConfig fails here until both take it."""
from __future__ import annotations

import inspect
import json
import typing

import httpx
import pytest

from schemas.target import TargetConfig
from tilefarm.client import ApiError, AsyncClient, Client, InvalidRequest, build_request
from tilefarm.options import TARGET_OPTIONS

SOURCE = "# a kernel\n"
# a value other than the default for every field
CHANGED = {"arch": "blackhole", "core_grid": (2, 2), "partition": "strided", "cb_depth": 3, "math_fidelity": "LoFi",
           "blocking": "as_written", "fp32_accumulation": True, "approx_exp": True, "intermediate_dtype": "bfloat16",
           "l1_shard": ["A"]}


def test_every_target_field_is_a_cli_option():
    assert set(TARGET_OPTIONS) == set(TargetConfig.model_fields) == set(CHANGED)


@pytest.mark.parametrize("function", [build_request, Client.submit, AsyncClient.submit])
def test_the_python_client_takes_every_target_field_but_the_arch_by_its_name(function):
    """`target` names the arch (or is a whole TargetConfig); every other field is a keyword of its own."""
    parameters = inspect.signature(function).parameters
    keywords = {name for name, p in parameters.items() if p.kind is inspect.Parameter.KEYWORD_ONLY}
    assert set(TargetConfig.model_fields) - {"arch"} <= keywords


@pytest.mark.parametrize("field", sorted(CHANGED))
def test_every_target_field_given_to_the_python_client_sets_it(field):
    given = {"target": CHANGED[field]} if field == "arch" else {field: CHANGED[field]}
    target = build_request(SOURCE, **given).target
    assert getattr(target, field) == CHANGED[field]
    assert getattr(target, field) != getattr(TargetConfig(), field)


@pytest.mark.parametrize("field", sorted(CHANGED))
def test_client_submit_sends_every_target_field_it_is_given(field):
    """Through the sync client's submit to the request it sends (the service's answer is not looked at)."""
    sent = []

    def service(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(500, json={"detail": "not a service"})

    given = {"target": CHANGED[field]} if field == "arch" else {field: CHANGED[field]}
    with Client("http://farm.invalid", transport=httpx.MockTransport(service), retries=0) as farm:
        with pytest.raises(ApiError):
            farm.submit(SOURCE, **given)
    expected = TargetConfig.model_validate({field: CHANGED[field]}).model_dump(mode="json")[field]
    assert sent and sent[0]["target"][field] == expected


def test_a_value_the_target_does_not_take_is_refused_by_name():
    with pytest.raises(InvalidRequest, match="partition"):
        build_request(SOURCE, partition="diagonal")


@pytest.mark.parametrize("field", ["arch", "partition", "math_fidelity", "blocking"])
def test_the_cli_help_names_every_choice_the_schema_accepts(field):
    annotation = TargetConfig.model_fields[field].annotation
    choices = typing.get_args(next((a for a in typing.get_args(annotation) if typing.get_origin(a) is typing.Literal),
                                   annotation))
    assert choices, annotation
    help_text = TARGET_OPTIONS[field][1].help
    assert all(choice in help_text for choice in choices), (choices, help_text)
