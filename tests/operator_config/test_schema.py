"""The published JSON Schema of the operator file is current and agrees with the validator."""

from __future__ import annotations

import json

import jsonschema
import pytest

from chainrouter.operator_config.load import ConfigFileError, parse_yaml, validate_document
from chainrouter.operator_config.model import json_schema
from tests.conftest import REPO_ROOT
from tests.operator_config.test_load import EXAMPLE

SCHEMA_FILE = REPO_ROOT / "docs" / "operator-config.schema.json"


def _to_json(value: object) -> object:
    """YAML as a JSON tool sees it: exact decimals become JSON numbers."""
    return json.loads(json.dumps(value, default=float))


def test_the_committed_schema_is_the_generated_one() -> None:
    committed = json.loads(SCHEMA_FILE.read_text())
    assert committed == json_schema(), (
        "run `make schema` and commit docs/operator-config.schema.json"
    )


def test_the_schema_is_a_valid_draft_2020_12_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(json_schema())


def test_the_example_file_satisfies_the_schema() -> None:
    jsonschema.validate(_to_json(parse_yaml(EXAMPLE.read_text())), json_schema())


@pytest.mark.parametrize(
    "document",
    [
        {"providers": [{"slug": "p", "name": "P", "colour": "red"}]},
        {"customers": [{"email": "a@b.co", "name": "A", "api_keys": [{"name": "k"}]}]},
        {"chains": [{"chain_id": 1, "name": "x"}]},
        {"version": 2},
    ],
)
def test_documents_the_schema_refuses_are_refused_by_the_validator_too(document: object) -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(document, json_schema())
    with pytest.raises(ConfigFileError):
        validate_document(document)
