#!/usr/bin/env python3
"""Random documents of each schema in schemas.json (schema_walk, built with the
tests) validated by Pydantic: whatever structured output lets through must be
an instance of the model. Exit 77 (CTest: skipped) without Pydantic 2.

    check_walks.py SCHEMA_WALK SCHEMAS_JSON [COUNT] [SEED]
"""
import collections
import importlib.util
import json
import os
import subprocess
import sys

# What Pydantic asks beyond its own schema, which no schema-held output can
# know: (model, field, error type) and why.
BEYOND_THE_SCHEMA = {
    ("Server", "url", "url_scheme"): "HttpUrl wants http or https; its schema says only format uri",
}


def main() -> int:
    walker, schemas = sys.argv[1], sys.argv[2]
    count = sys.argv[3] if len(sys.argv) > 3 else "200"
    seed = sys.argv[4] if len(sys.argv) > 4 else "1"
    try:
        import pydantic
    except ImportError:
        print("SKIPPED: Pydantic is not installed (pip install 'pydantic>=2')")
        return 77
    if int(pydantic.VERSION.split(".")[0]) < 2:
        print(f"SKIPPED: Pydantic {pydantic.VERSION}; the models need 2 or later")
        return 77
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location("make_schemas", os.path.join(here, "make_schemas.py"))
    models_module = importlib.util.module_from_spec(spec)
    sys.modules["make_schemas"] = models_module  # (its annotations are resolved by module name)
    spec.loader.exec_module(models_module)
    models = {m.__name__: m for m, _ in models_module.CASES}

    docs = json.loads(subprocess.run([walker, schemas, count, seed], check=True, capture_output=True, text=True).stdout)
    failures, beyond, total = collections.Counter(), collections.Counter(), 0
    for name, documents in docs.items():
        for doc in documents:
            total += 1
            try:
                models[name].model_validate_json(doc)
            except pydantic.ValidationError as e:
                for err in e.errors():
                    key = (name, err["loc"][-1] if err["loc"] else "", err["type"])
                    if key in BEYOND_THE_SCHEMA:
                        beyond[key] += 1
                        continue
                    if not failures[key]:
                        print(f"FAIL {name}: {err['type']} at {err['loc']}: {err['msg']}\n  {doc!r}")
                    failures[key] += 1
    print(f"{total} documents of {len(docs)} models (Pydantic {pydantic.VERSION}), {sum(failures.values())} refused by it")
    for key, n in beyond.items():
        print(f"  {n} {key}: {BEYOND_THE_SCHEMA[key]}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
