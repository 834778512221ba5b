"""YAML files validated against the package's JSON schemas (repro/config/schemas), defaults
filled in; a bad file is a one-line ConfigError naming the file and the key.

YAML is read as researchers write it and bounded as an attacker could: 1e-4 is a number (YAML 1.2;
PyYAML reads it as a string), a key written twice is refused (YAML keeps the second silently), and
a file too large, too deep or whose aliases expand too far ("billion laughs") is refused.
"""

from __future__ import annotations

import copy
import math
import os
import re
import sys
from functools import cache, lru_cache
from importlib import resources
from pathlib import Path

import yaml

from repro.errors import ReproError
from repro.files import read_regular

# The largest configuration file here is about 10 kB; experiments.yaml holds about 900 values.
MAX_YAML_BYTES = 1 << 20
MAX_YAML_DEPTH = 64
MAX_YAML_NODES = 100_000
# Python reads no integer of more than 4,300 digits (a traceback); within this bound the schema
# names the key of one too large.
MAX_YAML_INT_DIGITS = 100

# YAML 1.2's floats that YAML 1.1 reads as strings: an exponent without a dot or without a sign
# (1e-4, 1.0e5, 3E+2, .5e-3).
_EXPONENT_FLOAT = re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$")
_MERGE_TAG = "tag:yaml.org,2002:merge"


class ConfigError(ReproError):
    """A configuration file or value that cannot be used; the message names the file and key."""


class ConfigLoader(yaml.SafeLoader):
    """yaml.SafeLoader with YAML 1.2's exponent floats, duplicate keys refused, size bounded."""

    def __init__(self, stream):
        super().__init__(stream)
        self.depth = 0  # of the node being composed

    def compose_node(self, parent, index):
        self.depth += 1
        if self.depth > MAX_YAML_DEPTH:
            raise yaml.composer.ComposerError(
                None,
                None,
                f"nested deeper than {MAX_YAML_DEPTH} levels",
                self.peek_event().start_mark,
            )
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def get_single_node(self):
        node = super().get_single_node()
        if node is not None:
            _check_expanded_size(node)
        return node

    def construct_yaml_int(self, node):
        digits = node.value.lstrip("+-").replace("_", "")
        if len(digits) > MAX_YAML_INT_DIGITS:
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"an integer of {len(digits):,} digits, more than {MAX_YAML_INT_DIGITS}",
                node.start_mark,
            )
        return super().construct_yaml_int(node)

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            first_lines = {}
            for key_node, _ in node.value:
                # A merge key (`<<: *base`) may be overridden by the keys beside it.
                if key_node.tag == _MERGE_TAG:
                    continue
                key = self.construct_object(key_node, deep=True)
                if isinstance(key, (list, dict)):
                    continue  # unhashable: the constructor refuses it
                if key in first_lines:
                    raise yaml.constructor.ConstructorError(
                        None,
                        None,
                        f"key {key!r} written twice (first on line {first_lines[key] + 1})",
                        key_node.start_mark,
                    )
                first_lines[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep)


ConfigLoader.add_constructor("tag:yaml.org,2002:int", ConfigLoader.construct_yaml_int)
ConfigLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float", _EXPONENT_FLOAT, list("-+.0123456789")
)


def _children(node) -> list:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return node.value if isinstance(node, yaml.SequenceNode) else []


def _check_expanded_size(root) -> None:
    """Refuse a document that refers to itself or expands past MAX_YAML_NODES values; each shared
    node counted once, so that a bomb is refused in time linear in its text."""
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack = [(root, False)]
    while stack:
        node, children_counted = stack.pop()
        if children_counted:
            on_path.discard(id(node))
            sizes[id(node)] = 1 + sum(sizes[id(child)] for child in _children(node))
            if sizes[id(node)] > MAX_YAML_NODES:
                raise yaml.composer.ComposerError(
                    None,
                    None,
                    f"more than {MAX_YAML_NODES:,} values once its aliases are expanded",
                    node.start_mark,
                )
        elif id(node) not in sizes:
            if id(node) in on_path:
                raise yaml.composer.ComposerError(
                    None,
                    None,
                    "an alias refers to a value that contains it",
                    node.start_mark,
                )
            on_path.add(id(node))
            stack.append((node, True))
            stack.extend((child, False) for child in _children(node))


def parse_yaml(text: str | bytes):
    """The data of one YAML document, read with ConfigLoader."""
    return yaml.load(text, ConfigLoader)


@cache
def schema(name: str) -> dict:
    return parse_yaml(resources.files("repro.config").joinpath("schemas", name).read_text())


def import_jsonschema():
    """jsonschema, imported without rfc3987_syntax, which it imports for its "iri" format check
    whenever that is installed (Jupyter installs it) and which builds a grammar as it is imported:
    about 2 s of CPU in every command that reads a configuration, and in the workflow's config
    check (Snakefile). The package's schemas and the workflow's check no format; the module stays
    importable for any other user of this process."""
    if "jsonschema" not in sys.modules and "rfc3987_syntax" not in sys.modules:
        sys.modules["rfc3987_syntax"] = None  # an ImportError, which jsonschema passes over
        try:
            import jsonschema
        finally:
            del sys.modules["rfc3987_syntax"]
    import jsonschema

    return jsonschema


def _fill_defaults(validator, properties, instance, subschema):
    # The jsonschema FAQ's recipe: validate, and fill each missing property's default.
    jsonschema = import_jsonschema()
    for prop, prop_schema in properties.items():
        if isinstance(instance, dict) and "default" in prop_schema:
            instance.setdefault(prop, prop_schema["default"])
    yield from jsonschema.Draft202012Validator.VALIDATORS["properties"](
        validator, properties, instance, subschema
    )


def _is_integer(checker, instance) -> bool:
    # JSON Schema counts 40.0 as an integer; a step count or a seed written so is a mistake.
    return isinstance(instance, int) and not isinstance(instance, bool)


def _is_finite_number(checker, instance) -> bool:
    # .nan and .inf are YAML floats; no setting here means them.
    if isinstance(instance, float):
        return math.isfinite(instance)
    return _is_integer(checker, instance)


@cache
def _default_filling_validator():
    """The validator class; jsonschema is imported at the first validation, not with the package
    (its format checkers take seconds to import, which `repro train`'s restart would pay twice).
    """
    jsonschema = import_jsonschema()

    return jsonschema.validators.extend(
        jsonschema.Draft202012Validator,
        {"properties": _fill_defaults},
        type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine_many(
            {"integer": _is_integer, "number": _is_finite_number}
        ),
    )


def validate(data, schema_name: str | dict, source: str | os.PathLike) -> dict:
    """Validate `data` against a package schema (or a schema's data), filling defaults in place;
    a one-line ConfigError names source and key."""
    jsonschema = import_jsonschema()

    checked_by = schema(schema_name) if isinstance(schema_name, str) else schema_name
    error = jsonschema.exceptions.best_match(
        _default_filling_validator()(checked_by).iter_errors(data)
    )
    if error is not None:
        where = ".".join(str(p) for p in error.absolute_path) or "(top level)"
        if error.validator == "additionalProperties":
            unknown = sorted(set(error.instance) - set(error.schema.get("properties", {})))
            message = f"unknown key {', '.join(map(repr, unknown))}"
        elif isinstance(error.instance, float) and not math.isfinite(error.instance):
            message = f"{error.instance} is not a finite number"
        else:
            message = error.message
        raise ConfigError(f"{source}: {where}: {message}")
    return data


def _parse_yaml_file(text: bytes, path: str) -> dict:
    try:
        data = parse_yaml(text)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"line {mark.line + 1}: " if mark else ""
        raise ConfigError(f"{path}: {where}not valid YAML: {e.problem or e.context}") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {str(e).splitlines()[0]}") from None
    return {} if data is None else data


def load(path: Path, schema_name: str) -> dict:
    """A YAML file, validated against a schema, with its defaults filled in. The parse of its
    bytes is kept (a tenth of a second, paid once per run an analysis reads); each call gets a
    copy."""
    text = read_regular(path, MAX_YAML_BYTES, ConfigError, "a YAML file")
    return copy.deepcopy(_load_bytes(text, schema_name, str(path)))


def load_outside(path: Path, schema_path: Path) -> dict:
    """A YAML file validated against a schema file that is not the package's (the workflow's
    config schema), with its defaults filled in."""
    data = _parse_yaml_file(
        read_regular(path, MAX_YAML_BYTES, ConfigError, "a YAML file"), str(path)
    )
    text = read_regular(schema_path, MAX_YAML_BYTES, ConfigError, "a schema file")
    return validate(data, _parse_yaml_file(text, str(schema_path)), path)


@lru_cache(maxsize=32)
def _load_bytes(text: bytes, schema_name: str, path: str) -> dict:
    return validate(_parse_yaml_file(text, path), schema_name, path)
