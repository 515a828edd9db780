"""Calls into the JVM in few py4j round trips: JVM objects read as Python data, long texts read
without py4j's wait, classes looked up once.

Walking a Scala collection through py4j costs a round trip per element and per field (a plan's
nodes, their metrics, a session's settings: dozens to hundreds of calls, ~0.1-0.3 ms each). Here
the JVM renders the object as JSON with Spark's own Jackson and its Scala module (both on every
Spark's class path) and Python parses the text.

The text comes back in pieces of ``PIECE`` characters: py4j writes an answer through an
8,192-character buffer, and the rest of a longer answer waits ~40 ms for the loopback socket's
delayed acknowledgement (Nagle's algorithm; measured: a 8,150-character answer 0.4 ms, a
8,200-character one 44 ms).
"""

from __future__ import annotations

import json
from typing import Any

from py4j.java_gateway import JavaClass

PIECE = 4_000  # characters per round trip: py4j escapes them (at most twice as many), under its 8,192
MOST_PIECES = 100  # ~0.3 ms each: beyond them one answer and its 44 ms wait cost less

# each JVM's JSON mapper by the id of its py4j JVM view, made once; the view is kept with it, so
# that id is not reused by another view while the entry lives
_MAPPERS: dict[int, tuple[Any, Any]] = {}


def _mapper(session: Any) -> Any:
    """``session``'s JVM's JSON mapper: Jackson's ``ObjectMapper`` with the Scala module."""
    jvm = session._jvm
    if id(jvm) not in _MAPPERS:
        mapper = java_class(session, "com.fasterxml.jackson.databind.ObjectMapper")()
        mapper.registerModule(
            getattr(jvm.com.fasterxml.jackson.module.scala, "DefaultScalaModule$").__getattr__("MODULE$")
        )
        _MAPPERS[id(jvm)] = (jvm, mapper)
    return _MAPPERS[id(jvm)][1]


def to_python(session: Any, value: Any) -> Any:
    """``value`` (a JVM object of ``session``'s JVM: a Scala or Java collection, a case class, a
    map) as Python lists, dicts, strings and numbers."""
    writer = string_writer(session)
    _mapper(session).writeValue(writer, value)
    return json.loads(text_of(writer))


def string_writer(session: Any) -> Any:
    """A new ``java.io.StringWriter`` in ``session``'s JVM (for a JVM method that writes text)."""
    return java_class(session, "java.io.StringWriter")()


def text_of(writer: Any) -> str:
    """The text a JVM ``java.io.StringWriter`` holds, in pieces of ``PIECE`` characters; in one
    answer when it would take more than ``MOST_PIECES`` (the 44 ms wait once costs less)."""
    text = writer.getBuffer()
    size = int(text.length())
    if size <= PIECE or size > PIECE * MOST_PIECES:
        return str(text.toString())
    return "".join(text.substring(start, min(start + PIECE, size)) for start in range(0, size, PIECE))


def java_class(session: Any, name: str) -> Any:
    """The class ``name`` (``org.apache.iceberg.spark.Spark3Util``) of ``session``'s JVM, for its
    constructors and static methods. Made once per JVM: through py4j's JVM view every dotted part of a name is a
    round trip (the first, ``org``, ~2 ms), each time the name is written."""
    jvm = session._jvm
    key = (id(jvm), name)
    if key not in _CLASSES:
        _CLASSES[key] = (jvm, JavaClass(name, jvm._gateway_client))
    return _CLASSES[key][1]


_CLASSES: dict[tuple[int, str], tuple[Any, Any]] = {}  # (id of the JVM view, class name) -> (the view, the class)
