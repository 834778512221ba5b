"""YAML files validated against the package's JSON schemas (repro/config/schemas), defaults
filled in.

A file that is missing, not YAML, or breaks its schema is a one-line ConfigError naming the file and
the key. The schemas are the one description of every configuration key; tests check that their
enumerations equal the code's constants.
"""

from __future__ import annotations

import os
from functools import cache
from importlib import resources
from pathlib import Path

import jsonschema
import yaml

from repro.errors import ReproError


class ConfigError(ReproError):
    """A configuration file or value that cannot be used; the message names the file and key."""


@cache
def schema(name: str) -> dict:
    return yaml.safe_load(resources.files("repro.config").joinpath("schemas", name).read_text())


def _fill_defaults(validator, properties, instance, subschema):
    # The jsonschema FAQ's recipe: validate, and fill each missing property's default.
    for prop, prop_schema in properties.items():
        if isinstance(instance, dict) and "default" in prop_schema:
            instance.setdefault(prop, prop_schema["default"])
    yield from jsonschema.Draft202012Validator.VALIDATORS["properties"](
        validator, properties, instance, subschema
    )


_DefaultFillingValidator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator, {"properties": _fill_defaults}
)


def validate(data, schema_name: str, source: str | os.PathLike) -> dict:
    """Validate `data`, filling defaults in place; a one-line ConfigError names source and key."""
    error = jsonschema.exceptions.best_match(
        _DefaultFillingValidator(schema(schema_name)).iter_errors(data)
    )
    if error is not None:
        where = ".".join(str(p) for p in error.absolute_path) or "(top level)"
        if error.validator == "additionalProperties":
            unknown = sorted(set(error.instance) - set(error.schema.get("properties", {})))
            message = f"unknown key {', '.join(map(repr, unknown))}"
        else:
            message = error.message
        raise ConfigError(f"{source}: {where}: {message}")
    return data


def read_yaml(path: Path) -> dict:
    try:
        with open(path) as f:
            data = yaml.safe_load(f)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: not valid YAML: {str(e).splitlines()[0]}") from None
    return {} if data is None else data


def load(path: Path, schema_name: str) -> dict:
    """A YAML file, validated against a schema, with its defaults filled in."""
    return validate(read_yaml(path), schema_name, path)
