#!/usr/bin/env python3
"""Writes schemas.json: JSON schemas as Pydantic 2 writes them for the models
people send as response_format (OpenAI's SDKs pass model_json_schema()), each
with instances Pydantic itself validated and serialized (model_dump_json: no
whitespace, keys in field order). tests/engine/pydantic_schema_test.cpp
compiles every schema and walks every instance through its automaton; the
models minfer refuses carry the reason it gives.

    python3 tests/data/pydantic/make_schemas.py > tests/data/pydantic/schemas.json
"""
from __future__ import annotations

import datetime
import enum
import json
import uuid
from decimal import Decimal
from ipaddress import IPv4Address, IPv6Address
from typing import Annotated, Literal, Optional, Union

import pydantic
from pydantic import AnyUrl, BaseModel, Field, HttpUrl, IPvAnyAddress

UTC = datetime.timezone.utc


class Color(str, enum.Enum):
    RED = "red"
    GREEN = "green"


class Address(BaseModel):
    street: str
    city: str
    zip: Annotated[str, Field(pattern=r"^\d{5}$")]


class Person(BaseModel):
    name: str
    age: Annotated[int, Field(ge=0, le=150)]
    email: Optional[str] = None
    tags: list[str] = []
    address: Address
    favourite: Color


class Item(BaseModel):
    sku: Annotated[str, Field(min_length=3, max_length=12)]
    price: Annotated[float, Field(gt=0, le=10000, multiple_of=0.01)]
    qty: Annotated[int, Field(ge=1)]


class Order(BaseModel):
    id: uuid.UUID
    placed: datetime.datetime
    ship_by: datetime.date
    window: datetime.timedelta
    items: Annotated[list[Item], Field(min_length=1, max_length=5)]
    notes: Optional[str] = None
    rush: bool = False


class Cat(BaseModel):
    pet_type: Literal["cat"]
    lives: int


class Dog(BaseModel):
    pet_type: Literal["dog"]
    good_boy: bool


class Owner(BaseModel):
    pet: Union[Cat, Dog] = Field(discriminator="pet_type")
    backup: Optional[Union[Cat, Dog]] = None


class Node(BaseModel):
    value: int
    children: list[Node] = []


class Inventory(BaseModel):
    counts: dict[str, int]
    owners: dict[str, Person]


class Server(BaseModel):
    host: IPvAnyAddress
    v4: IPv4Address
    v6: IPv6Address
    url: HttpUrl
    homepage: AnyUrl
    port: Annotated[int, Field(ge=1, le=65535)]


class Point(BaseModel):
    xy: tuple[float, float]
    label: Literal["a", "b", "c"]
    weight: Optional[float] = None
    at: datetime.time


class Search(BaseModel):
    query: str
    filters: list[Union[int, str]]
    limit: Annotated[int, Field(gt=0, lt=101)] = 10


class Tagged(BaseModel):
    tags: set[str]


class Palette(BaseModel):
    colors: set[Color]
    flags: frozenset[bool] = frozenset()


class Money(BaseModel):
    amount: Decimal


PERSON = {"name": "Ann", "age": 31, "address": {"street": "Main St 1", "city": "Oslo", "zip": "01234"}, "favourite": "red"}
CASES = [
    (Person, [PERSON, {**PERSON, "email": "ann@example.com", "tags": ["a", "b"], "age": 0, "favourite": "green"}]),
    (Order, [{"id": "123e4567-e89b-12d3-a456-426614174000", "placed": datetime.datetime(2024, 5, 31, 12, 30, tzinfo=UTC),
              "ship_by": "2024-06-02", "window": datetime.timedelta(days=2, hours=3), "items": [
                  {"sku": "ABC", "price": 19.99, "qty": 2}, {"sku": "X-100-200", "price": 10000, "qty": 1}]},
             {"id": uuid.UUID(int=7), "placed": datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone(datetime.timedelta(hours=2))),
              "ship_by": "2024-01-03", "window": datetime.timedelta(minutes=90), "items": [{"sku": "abc", "price": 0.01, "qty": 99}],
              "notes": "leave at door", "rush": True}]),
    (Owner, [{"pet": {"pet_type": "cat", "lives": 9}}, {"pet": {"pet_type": "dog", "good_boy": True},
                                                        "backup": {"pet_type": "cat", "lives": 1}}]),
    (Node, [{"value": 1}, {"value": 1, "children": [{"value": 2, "children": [{"value": 3}]}, {"value": -4}]}]),
    (Inventory, [{"counts": {}, "owners": {}}, {"counts": {"apples": 3, "pears": -1}, "owners": {"ann": PERSON}}]),
    (Server, [{"host": "10.0.0.1", "v4": "192.168.1.254", "v6": "2001:db8::1", "url": "https://example.com/a?b=c#d",
               "homepage": "ftp://files.example.org/x", "port": 443},
              {"host": "::1", "v4": "0.0.0.0", "v6": "fe80::1:2", "url": "http://user@host:8080", "homepage": "mailto:a@b.c",
               "port": 65535}]),
    (Point, [{"xy": (1.5, -2.0), "label": "a", "at": datetime.time(12, 30, tzinfo=UTC)},
             {"xy": (0, 1e-3), "label": "c", "weight": 2.5, "at": "23:59:59+02:00"}]),
    (Search, [{"query": "cats", "filters": [1, "two", 3]}, {"query": "", "filters": [], "limit": 100}]),
    (Money, [{"amount": Decimal("12.50")}, {"amount": Decimal("-0.001")}, {"amount": Decimal("7")}]),
    (Palette, [{"colors": []}, {"colors": ["red"], "flags": [True, False]}]),
]
REFUSED = [
    (Tagged, "'uniqueItems' is supported where the items are at most 31 enumerated values"),
]


def main() -> None:
    out = {"pydantic": pydantic.VERSION, "models": []}
    for model, examples in CASES:
        instances = [model.model_validate(e).model_dump_json() for e in examples]
        out["models"].append({"name": model.__name__, "schema": model.model_json_schema(), "instances": instances})
    for model, reason in REFUSED:
        out["models"].append({"name": model.__name__, "schema": model.model_json_schema(), "refused": reason})
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
