"""Calls into the JVM in few py4j round trips (runtime/jvm_calls.py), with stand-in JVM objects."""

from types import SimpleNamespace

from dbt_incremental_mv.runtime import jvm_calls


class Buffer:
    """A JVM StringBuffer as py4j hands it over; counts the answers it gives."""

    def __init__(self, text):
        self.text, self.answers = text, []

    def length(self):
        return len(self.text)

    def toString(self):  # noqa: N802 - Java's name
        self.answers.append(len(self.text))
        return self.text

    def substring(self, start, end):
        self.answers.append(end - start)
        return self.text[start:end]


def test_a_long_text_comes_back_in_pieces_under_py4js_buffer_and_a_very_long_one_at_once():
    piece = jvm_calls.PIECE
    short, long, very_long = "a" * piece, "".join(chr(97 + i % 26) for i in range(piece * 5 + 7)), "b" * (piece * jvm_calls.MOST_PIECES + 1)
    for text, answers in [(short, [piece]), (long, [piece] * 5 + [7]), (very_long, [len(very_long)])]:
        buffer = Buffer(text)
        assert jvm_calls.text_of(SimpleNamespace(getBuffer=lambda buffer=buffer: buffer)) == text
        assert buffer.answers == answers


def test_a_class_is_made_once_per_jvm(monkeypatch):
    made = []

    class FakeJavaClass:
        def __init__(self, name, client):
            made.append((name, client))

    first, second = SimpleNamespace(_jvm=SimpleNamespace(_gateway_client="one")), SimpleNamespace(_jvm=SimpleNamespace(_gateway_client="two"))
    monkeypatch.setattr(jvm_calls, "JavaClass", FakeJavaClass)
    a = jvm_calls.java_class(first, "org.apache.iceberg.spark.Spark3Util")
    assert jvm_calls.java_class(first, "org.apache.iceberg.spark.Spark3Util") is a
    assert jvm_calls.java_class(second, "org.apache.iceberg.spark.Spark3Util") is not a
    assert made == [("org.apache.iceberg.spark.Spark3Util", "one"), ("org.apache.iceberg.spark.Spark3Util", "two")]
