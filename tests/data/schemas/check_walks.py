#!/usr/bin/env python3
"""Random documents of each schema in a schemas file (schema_walk, built with
the tests) checked by independent validators: whatever structured output lets
through must be valid.

  - always: the jsonschema package (Draft 2020-12, with its format checkers;
    multipleOf in exact decimals, where jsonschema's floats call 4.6 no
    multiple of 0.01);
  - with --pydantic (tests/data/pydantic/schemas.json): Pydantic 2, each
    document an instance of the model make_schemas.py defines.

Exit 77 (CTest: skipped) without the package a check needs.

    check_walks.py SCHEMA_WALK SCHEMAS_JSON COUNT SEED [--pydantic]
"""
import collections
import decimal
import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys

# What Pydantic asks beyond its own schema, which no schema-held output can
# know: (model, field, error type) and why.
BEYOND_THE_SCHEMA = {
    ("Server", "url", "url_scheme"): "HttpUrl wants http or https; its schema says only format uri",
    ("Server", "homepage", "url_parsing"): "Pydantic reads URLs as WHATWG does: http, https, ws, wss, ftp and file "
                                           "need a host (ws:x is an RFC 3986 URI); its schema says only format uri",
}


def json_schema_validator(schema):
    import jsonschema

    def multiple_of(validator, m, instance, schema):
        if validator.is_type(instance, "number"):
            if decimal.Decimal(str(instance)) % decimal.Decimal(str(m)) != 0:
                yield jsonschema.ValidationError(f"{instance} is not a multiple of {m}")

    exact = jsonschema.validators.extend(jsonschema.Draft202012Validator, {"multipleOf": multiple_of})
    return exact(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)


def pydantic_models():
    import pydantic

    if int(pydantic.VERSION.split(".")[0]) < 2:
        raise ImportError(f"Pydantic {pydantic.VERSION}; the models need 2 or later")
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pydantic", "make_schemas.py")
    spec = importlib.util.spec_from_file_location("make_schemas", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["make_schemas"] = module  # (its annotations are resolved by module name)
    spec.loader.exec_module(module)
    return {m.__name__: m for m, _ in module.CASES}, pydantic


def main() -> int:
    walker, schemas_path, count, seed = sys.argv[1:5]
    with_pydantic = "--pydantic" in sys.argv[5:]
    try:
        import jsonschema  # noqa: F401

        models, pydantic = pydantic_models() if with_pydantic else ({}, None)
    except ImportError as e:
        print(f"SKIPPED: {e} (pip install jsonschema 'pydantic>=2')")
        return 77
    with open(schemas_path) as f:
        schemas = {m["name"]: m["schema"] for m in json.load(f)["models"] if "refused" not in m}
    docs = json.loads(subprocess.run([walker, schemas_path, count, seed], check=True, capture_output=True, text=True).stdout)

    failures, beyond, total = collections.Counter(), collections.Counter(), 0
    for name, documents in docs.items():
        validator = json_schema_validator(schemas[name])
        for doc in documents:
            total += 1
            try:
                value = json.loads(doc, parse_float=decimal.Decimal)
            except decimal.InvalidOperation:  # an exponent beyond Decimal's (free numbers may have any)
                value = json.loads(doc)
            except json.JSONDecodeError as e:
                print(f"FAIL {name}: not JSON ({e})\n  {doc!r}")
                failures[("json", name)] += 1
                continue
            for err in validator.iter_errors(value):
                key = ("jsonschema", name, tuple(err.absolute_path), err.validator)
                if not failures[key]:
                    print(f"FAIL jsonschema {name} at {list(err.absolute_path)}: {err.message}\n  {doc!r}")
                failures[key] += 1
            if not with_pydantic:
                continue
            try:
                models[name].model_validate_json(doc)
            except pydantic.ValidationError as e:
                for err in e.errors():
                    key = (name, err["loc"][-1] if err["loc"] else "", err["type"])
                    if key in BEYOND_THE_SCHEMA:
                        beyond[key] += 1
                        continue
                    if not failures[key]:
                        print(f"FAIL Pydantic {name}: {err['type']} at {err['loc']}: {err['msg']}\n  {doc!r}")
                    failures[key] += 1
    checks = "jsonschema " + importlib.metadata.version("jsonschema") + (f" and Pydantic {pydantic.VERSION}" if with_pydantic else "")
    print(f"{total} documents of {len(docs)} schemas, checked by {checks}: {sum(failures.values())} invalid")
    for key, n in beyond.items():
        print(f"  {n} {key}: {BEYOND_THE_SCHEMA[key]}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
